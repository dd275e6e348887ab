//! Finding the cgroup mounts in `/proc/self/mountinfo` text.

use std::path::PathBuf;

/// One line of mountinfo, the fields nnb needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mount {
    /// Where it is mounted (octal escapes such as `\040` decoded).
    pub(super) point: PathBuf,
    /// The filesystem type: `cgroup` (v1) or `cgroup2`.
    pub(super) fstype: String,
    /// The per-superblock options; for v1 they name the controllers (`rw,cpu,cpuacct`).
    pub(super) super_options: String,
}

impl Mount {
    /// Whether this is a v1 mount of `controller`.
    pub(super) fn is_v1_of(&self, controller: &str) -> bool {
        self.fstype == "cgroup" && self.super_options.split(',').any(|o| o == controller)
    }
}

/// The mounts of a mountinfo text ("ID PARENT MAJ:MIN ROOT POINT OPTIONS
/// [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS" per line).
pub(super) fn parse(text: &str) -> Result<Vec<Mount>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields
                .iter()
                .skip(6)
                .position(|&f| f == "-")
                .map(|i| i + 6)
                .ok_or_else(|| format!("no ` - ` separator in `{line}`"))?;
            match (fields.get(4), &fields[sep + 1..]) {
                (Some(point), [fstype, _source, super_options, ..]) => Ok(Mount {
                    point: PathBuf::from(unescape(point)),
                    fstype: (*fstype).to_string(),
                    super_options: (*super_options).to_string(),
                }),
                _ => Err(format!("too few fields in `{line}`")),
            }
        })
        .collect()
}

/// Decodes the kernel's octal escapes (`\040` space, `\011` tab, `\012` newline,
/// `\134` backslash); anything else is kept as it is.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_with_and_without_optional_ones() {
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 master:2 - cgroup cgroup rw,cpu,cpuacct\n\
                    41 31 0:38 / /mnt/my\\040cg rw,relatime - cgroup2 none rw,nsdelegate\n";
        let m = parse(text).expect("parse");
        assert_eq!(m.len(), 3);
        assert_eq!(m[1].point, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(m[1].fstype, "cgroup");
        assert!(m[1].is_v1_of("cpu") && m[1].is_v1_of("cpuacct") && !m[1].is_v1_of("cpuset"));
        assert_eq!(m[2].point, PathBuf::from("/mnt/my cg"));
        assert_eq!(m[2].fstype, "cgroup2");
        assert!(!m[0].is_v1_of("rw"));
    }

    #[test]
    fn refuses_truncated_lines() {
        assert!(parse("31 23 0:28 / /sys/fs/cgroup rw,relatime tmpfs tmpfs rw\n").is_err());
        assert!(parse("31 23 0:28 / /sys/fs/cgroup rw - tmpfs\n").is_err());
        assert!(parse("31 -\n").is_err());
        assert_eq!(parse(""), Ok(vec![]));
    }

    #[test]
    fn unescapes_octal_only() {
        assert_eq!(unescape(r"a\040b\134c"), r"a b\c");
        assert_eq!(unescape(r"a\09b\"), r"a\09b\");
        assert_eq!(unescape(r"\04"), r"\04");
    }
}
