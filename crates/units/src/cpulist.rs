//! CPU lists in the kernel's syntax: `0-3,8,10-11`.

use std::collections::BTreeSet;

use thiserror::Error;

/// The largest number of CPUs Linux supports (`NR_CPUS` with `CONFIG_MAXSMP`):
/// the bound for lists typed by people, checked before a range is expanded.
pub const MAX_CPUS: usize = 8192;

/// Why a CPU list such as `0-3,8,10-11` could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CpuListError {
    /// An item is not a number or a `low-high` range of numbers.
    #[error("{item:?} is not a CPU number or a range like 4-7")]
    NotANumber {
        /// The offending comma-separated item.
        item: String,
    },
    /// A range whose end is below its start.
    #[error("range {item:?} ends before it starts")]
    Reversed {
        /// The offending range.
        item: String,
    },
    /// A CPU number at or above the bound.
    #[error("CPU {cpu} does not exist: CPU numbers are below {max}")]
    TooLarge {
        /// The first CPU number out of bounds.
        cpu: usize,
        /// The bound.
        max: usize,
    },
    /// More CPUs in all than the bound: the list must name some twice.
    #[error("the list names more than {max} CPUs")]
    TooMany {
        /// The bound.
        max: usize,
    },
}

/// Parses a kernel-style CPU list (`0-3,8,10-11`), keeping the order written, with
/// every CPU number below `max` and at most `max` numbers in all: both are checked
/// before a range is expanded, so `0-1000000000` fails at once.
///
/// Empty input (or only whitespace) is an empty list: sysfs writes that for a NUMA
/// node without CPUs. Spaces around items are ignored. Duplicates are kept; callers
/// that care reject them.
pub fn parse_cpu_list(s: &str, max: usize) -> Result<Vec<usize>, CpuListError> {
    let mut out = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for raw in s.trim().split(',') {
        let item = raw.trim();
        let number = |t: &str| {
            let cpu = t
                .trim()
                .parse::<usize>()
                .map_err(|_| CpuListError::NotANumber {
                    item: item.to_string(),
                })?;
            if cpu >= max {
                return Err(CpuListError::TooLarge { cpu, max });
            }
            Ok(cpu)
        };
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (number(lo)?, number(hi)?),
            None => {
                let cpu = number(item)?;
                (cpu, cpu)
            }
        };
        if hi < lo {
            return Err(CpuListError::Reversed {
                item: item.to_string(),
            });
        }
        if out.len() + (hi - lo + 1) > max {
            return Err(CpuListError::TooMany { max });
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}

/// A non-empty CPU list typed on the command line, in the order written (repeats
/// allowed: streams go round robin over it). Parse it with [`cpu_list_arg`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses a command-line CPU list (a clap `value_parser`): [`parse_cpu_list`] against
/// [`MAX_CPUS`], and not empty.
pub fn cpu_list_arg(s: &str) -> Result<CpuList, CpuListError> {
    let cpus = parse_cpu_list(s, MAX_CPUS)?;
    if cpus.is_empty() {
        return Err(CpuListError::NotANumber {
            item: s.to_string(),
        });
    }
    Ok(CpuList(cpus))
}

/// Formats CPU numbers the way the kernel does (`0-3,8,10-11`), after sorting and
/// removing duplicates; `""` for an empty set.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let set: BTreeSet<usize> = cpus.iter().copied().collect();
    let mut parts = Vec::new();
    let mut iter = set.into_iter().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_lists() {
        let p = |s| parse_cpu_list(s, MAX_CPUS);
        assert_eq!(p("0-3,8,10-11\n"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(p("5"), Ok(vec![5]));
        assert_eq!(p("4,0"), Ok(vec![4, 0]));
        assert_eq!(p("\n"), Ok(vec![]));
        assert_eq!(p(" 1 - 2 , 7 "), Ok(vec![1, 2, 7]));
        assert_eq!(p("3,3"), Ok(vec![3, 3]));
    }

    #[test]
    fn rejects_malformed_lists() {
        let p = |s| parse_cpu_list(s, MAX_CPUS);
        for bad in ["x", "1,,2", "-3", "1-", "1,", "1-2-3"] {
            assert!(
                matches!(p(bad), Err(CpuListError::NotANumber { .. })),
                "{bad}"
            );
        }
        assert!(matches!(p("3-1"), Err(CpuListError::Reversed { .. })));
    }

    #[test]
    fn bounds_are_checked_before_expanding() {
        // 1e9 CPUs would be 8 GB of usize: refused by the bound, not by the allocator.
        assert_eq!(
            parse_cpu_list("0-1000000000", 4096),
            Err(CpuListError::TooLarge {
                cpu: 1_000_000_000,
                max: 4096
            })
        );
        assert_eq!(
            parse_cpu_list("4096", 4096),
            Err(CpuListError::TooLarge {
                cpu: 4096,
                max: 4096
            })
        );
        assert_eq!(parse_cpu_list("4095", 4096), Ok(vec![4095]));
        // Two full ranges of 4 CPUs against a bound of 4: 8 numbers.
        assert_eq!(
            parse_cpu_list("0-3,0-3", 4),
            Err(CpuListError::TooMany { max: 4 })
        );
        let e = parse_cpu_list("9999", MAX_CPUS).unwrap_err();
        assert!(e.to_string().contains("CPU 9999 does not exist"), "{e}");
    }

    #[test]
    fn command_line_lists() {
        assert_eq!(cpu_list_arg("0,2-3,0"), Ok(CpuList(vec![0, 2, 3, 0])));
        assert!(cpu_list_arg(" ").is_err());
        assert!(cpu_list_arg("0-1000000000").is_err());
    }

    #[test]
    fn formats_like_the_kernel() {
        assert_eq!(format_cpu_list(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[5, 5]), "5");
        for s in ["0-95", "0,2,4", "1-2,5-6,9"] {
            let cpus = parse_cpu_list(s, MAX_CPUS).unwrap_or_default();
            assert_eq!(format_cpu_list(&cpus), s);
        }
    }
}
