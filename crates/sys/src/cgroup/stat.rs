//! Parsers for the kernel's cgroup file formats: a single number, flat keyed
//! files (`memory.stat`, `cpu.stat`), v1 `blkio.throttle.*` per-device lines, v2
//! `io.stat` nested keys, device rules (`io.max`, `blkio.throttle.*_device`) and
//! `cgroup.procs`. Each returns a complaint instead of panicking on odd content.

/// A block device as the kernel names it in cgroup files: (major, minor).
pub(super) type Device = (u32, u32);

/// Parses a decimal number, naming it in the complaint.
fn num(s: &str, what: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| format!("`{s}` is not a number (in {what})"))
}

/// A file holding one number, e.g. `cpuacct.usage`, `memory.current`.
pub(super) fn number(text: &str) -> Result<u64, String> {
    num(text.trim(), "a single-number file")
}

/// The value of `key` in a flat keyed file ("key value" lines, e.g. `memory.stat`).
pub(super) fn keyed(text: &str, key: &str) -> Result<u64, String> {
    let value = text
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(key)).then(|| f.next())
        })
        .ok_or_else(|| format!("no `{key}` line"))?
        .ok_or_else(|| format!("the `{key}` line has no value"))?;
    num(value, key)
}

/// "MAJ:MIN" as a device.
fn device(s: &str) -> Result<Device, String> {
    s.split_once(':')
        .and_then(|(maj, min)| Some((maj.parse().ok()?, min.parse().ok()?)))
        .ok_or_else(|| format!("`{s}` is not a MAJ:MIN device"))
}

/// Reads plus writes summed over the devices of a v1 `blkio.throttle.io_serviced`
/// or `io_service_bytes` file ("MAJ:MIN Read N" ... lines and a closing
/// "Total N"). Read + Write rather than the per-device Total, which since Linux
/// 4.19 also counts discards: so the sum means what v2's rios + wios means.
pub(super) fn blkio_read_write(text: &str) -> Result<u64, String> {
    let mut sum = 0u64;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[..] {
            [dev, op, n] => {
                device(dev)?;
                let n = num(n, line)?;
                if op == "Read" || op == "Write" {
                    sum = sum.saturating_add(n);
                }
            }
            ["Total", n] => {
                num(n, line)?;
            }
            _ => return Err(format!("unexpected line `{line}`")),
        }
    }
    Ok(sum)
}

/// (operations, bytes) summed over the devices of a v2 `io.stat`
/// ("MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N" lines): reads plus
/// writes; discards and other keys are not counted.
pub(super) fn io_stat(text: &str) -> Result<(u64, u64), String> {
    let (mut ops, mut bytes) = (0u64, 0u64);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.split_whitespace();
        device(f.next().unwrap_or_default())?;
        for pair in f {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not key=value (in `{line}`)"))?;
            match key {
                "rios" | "wios" => ops = ops.saturating_add(num(value, line)?),
                "rbytes" | "wbytes" => bytes = bytes.saturating_add(num(value, line)?),
                _ => {}
            }
        }
    }
    Ok((ops, bytes))
}

/// The devices that a rule file lists, one line each starting "MAJ:MIN" (v1
/// `blkio.throttle.*_device`, v2 `io.max`).
pub(super) fn rule_devices(text: &str) -> Result<Vec<Device>, String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(device)
        .collect()
}

/// The process ids of a `cgroup.procs` file, one per line.
pub(super) fn pids(text: &str) -> Result<Vec<u32>, String> {
    text.split_whitespace()
        .map(|p| p.parse().map_err(|_| format!("`{p}` is not a process id")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_files() {
        let text = "cache 10444800\nrss 2396160\ntotal_rss 5353472\nanon 7\n";
        assert_eq!(keyed(text, "total_rss"), Ok(5_353_472));
        assert_eq!(keyed(text, "rss"), Ok(2_396_160));
        assert!(keyed(text, "usage_usec")
            .unwrap_err()
            .contains("no `usage_usec`"));
        assert!(keyed("rss\n", "rss").is_err());
        assert!(keyed("rss 12x\n", "rss").unwrap_err().contains("12x"));
        assert!(keyed("rss -1\n", "rss").is_err());
    }

    #[test]
    fn single_numbers() {
        assert_eq!(number("61967811078327\n"), Ok(61_967_811_078_327));
        assert!(number("").is_err());
        assert!(number("1 2\n").is_err());
        assert!(number("18446744073709551616").is_err());
    }

    #[test]
    fn blkio_sums_reads_and_writes_of_every_device() {
        // Two devices; the Total lines (which include discards) are not summed.
        let text = "254:0 Read 491\n254:0 Write 93\n254:0 Sync 526\n254:0 Async 93\n\
                    254:0 Discard 35\n254:0 Total 619\n8:0 Read 10\n8:0 Write 5\n\
                    8:0 Sync 15\n8:0 Async 0\n8:0 Discard 0\n8:0 Total 15\nTotal 634\n";
        // 491 + 93 + 10 + 5
        assert_eq!(blkio_read_write(text), Ok(599));
        assert_eq!(blkio_read_write("Total 0\n"), Ok(0));
        assert_eq!(blkio_read_write(""), Ok(0));
        assert!(blkio_read_write("254:0 Read\n").is_err());
        assert!(blkio_read_write("254-0 Read 1\n").is_err());
        assert!(blkio_read_write("254:0 Read many\n").is_err());
    }

    #[test]
    fn io_stat_sums_reads_and_writes_of_every_device() {
        let text = "8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n\
                    254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=512 dios=9 cost.usage=3\n";
        // ops 192 + 353 + 1 + 2; bytes 1459200 + 314773504 + 4096 + 8192
        assert_eq!(io_stat(text), Ok((548, 316_244_992)));
        assert_eq!(io_stat(""), Ok((0, 0)));
        assert!(io_stat("8:16 rios\n").is_err());
        assert!(io_stat("8:16 rios=x\n").is_err());
        assert!(io_stat("sda rios=1\n").is_err());
    }

    #[test]
    fn rules_and_pids() {
        assert_eq!(
            rule_devices("254:0 200\n8:16 rbps=1 wbps=max riops=max wiops=max\n"),
            Ok(vec![(254, 0), (8, 16)])
        );
        assert_eq!(rule_devices(""), Ok(vec![]));
        assert!(rule_devices("254 200\n").is_err());
        assert_eq!(pids("12\n3456\n"), Ok(vec![12, 3456]));
        assert_eq!(pids(""), Ok(vec![]));
        assert!(pids("12\nx\n").is_err());
    }
}
