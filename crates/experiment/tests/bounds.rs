//! The checker bounds what the plan and the agents would otherwise fail on at run
//! time (issue 30: NM3, NM4, NM5, NM7, NL7): each case of the review is refused with
//! the file's line and column, before anything is expanded or created.

use nnb_experiment::{parse, parse_on, ExperimentError, Host, MAX_FILE_BYTES};
use nnb_testkit::Staircase;

/// The first line holding `needle`, 1-based.
fn line_of(src: &str, needle: &str) -> usize {
    let at = src
        .find(needle)
        .unwrap_or_else(|| panic!("no {needle} in\n{src}"));
    src[..at].matches('\n').count() + 1
}

/// `src` checked on `host` must fail at the line of `needle` with a message holding
/// `part`.
fn refused_on(host: &Host, src: &str, needle: &str, part: &str) {
    match parse_on("bad.toml", src, host) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => {
            let d = e.diagnostic().unwrap_or_else(|| panic!("no location: {e}"));
            assert_eq!(d.line, line_of(src, needle), "wrong line: {d}");
            assert!(d.message.contains(part), "`{}` lacks `{part}`", d.message);
        }
    }
}

/// As [`refused_on`], on a pretend 2-CPU host (no memory or path checks).
fn refused(src: &str, needle: &str, part: &str) {
    refused_on(
        &Host {
            cpus: Some(2),
            ..Host::default()
        },
        src,
        needle,
        part,
    );
}

fn staircase() -> String {
    Staircase::default().toml()
}

/// The shared staircase with `from` replaced by `to`.
fn staircase_with(from: &str, to: &str) -> String {
    let s = staircase();
    assert!(s.contains(from), "fixture lacks {from}");
    s.replacen(from, to, 1)
}

#[test]
fn warmups_and_repetitions_that_make_too_many_steps_are_refused() {
    // E2: 3 levels x 2 states x (2 + 10^9) steps.
    let src = staircase_with("repetitions = 2", "repetitions = 2\nwarmup = 1000000000");
    refused(&src, "warmup", "above the limit of 100000");
    // E3: fits the u32.
    let src = staircase_with("repetitions = 2", "repetitions = 4294967295");
    refused(&src, "repetitions", "steps");
    // 6 levels x 16,666 = 99,996 steps pass; x 16,667 = 100,002 do not.
    let ok = staircase_with("repetitions = 2", "repetitions = 16666");
    assert!(parse("ok.toml", &ok, Some(2)).is_ok());
    let over = staircase_with("repetitions = 2", "repetitions = 16667");
    refused(&over, "repetitions", "100002 steps");
}

#[test]
fn a_plan_of_too_many_tenant_entries_is_refused() {
    // 200 neighbors: 201 levels x 2 states x 30 repetitions = 12,060 steps, under
    // the step limit, but x 201 tenants = 2,424,060 entries.
    let src = staircase_with("repetitions = 2", "repetitions = 30").replacen(
        "count = 2",
        "count = 200",
        1,
    );
    refused(&src, "repetitions", "tenant entries");
}

#[test]
fn tenant_counts_are_bounded() {
    // E4: a million, and i64::MAX (which fits the usize).
    for count in ["1000000", "9223372036854775807"] {
        let src = staircase_with("count = 2", &format!("count = {count}"));
        refused(&src, "count", "more than 1024 tenants");
    }
}

#[test]
fn values_the_agent_refuses_are_refused_where_written() {
    // E5: deadline 0 ms.
    let src = staircase_with("repetitions = 2", "repetitions = 2\nstep_timeout = \"1ns\"");
    refused(&src, "step_timeout", "at least 1ms");
    // A test workload of half a millisecond would be a 0 ms job.
    let src = staircase_with("ops = 1000", "duration = \"500us\"");
    refused(&src, "duration", "at least 1ms");
    // E6: load streams above the agent's 256.
    let src = "name = \"l\"\n[[tenants]]\nrole = \"test\"\n[[tenants]]\nrole = \"neighbor\"\n\
               [scenario]\nkind = \"load-steps\"\nlevels = \"0:100M:50M\"\nstreams = 100000\n";
    refused(src, "streams", "agent's limit of 256");
}

/// A memory isolation matrix whose tenants are granted `grant`.
fn memory_matrix(grant: &str) -> String {
    format!(
        "name = \"m\"\n\
         [[tenants]]\nname = \"a\"\nrole = \"test\"\ngrant = {{ memory = \"{grant}\" }}\n\
         [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\ngrant = {{ memory = \"256M\" }}\n\
         [scenario]\nkind = \"isolation-matrix\"\nresource = \"memory\"\n"
    )
}

#[test]
fn memory_beyond_this_machine_is_refused_for_local_tenants() {
    // E7: a 64 GiB grant on the review's 23.5 GiB machine.
    let host = Host {
        cpus: Some(2),
        mem_total: Some(24_683_656 * 1024),
        paths: false,
    };
    let src = memory_matrix("64G");
    refused_on(
        &host,
        &src,
        "memory = \"64G\"",
        "more than this machine's memory",
    );
    // 8 GiB fits, but its overcommitted state asks for 16 GiB and the unrestricted
    // one for 32: the agent would refuse that step, so the file is refused at the
    // scenario.
    let src = memory_matrix("8G");
    refused_on(
        &host,
        &src,
        "kind = \"isolation-matrix\"",
        "refused by its agent",
    );
    // 4 GiB: 16 GiB unrestricted fits the 23.5.
    assert!(parse_on("ok.toml", &memory_matrix("4G"), &host).is_ok());
    // Without the machine's memory (another host), nothing is said.
    assert!(parse("ok.toml", &memory_matrix("64G"), Some(2)).is_ok());
}

#[test]
fn files_over_the_size_limit_are_refused_unread() {
    // R15: a valid file with a large comment.
    let mut src = staircase();
    src.push('#');
    src.push_str(&"x".repeat(MAX_FILE_BYTES));
    assert!(matches!(
        parse("big.toml", &src, Some(2)),
        Err(ExperimentError::TooLarge { .. })
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.toml");
    std::fs::write(&path, &src).expect("write");
    let e = nnb_experiment::read(&path).expect_err("read a 1 MiB+ file");
    assert!(e.to_string().contains("larger than 1024 KiB"), "{e}");
    std::fs::write(&path, staircase()).expect("write");
    assert_eq!(nnb_experiment::read(&path).ok(), Some(staircase()));
}

#[test]
fn tenant_names_that_cannot_be_file_names_are_refused() {
    // E8: 300 characters, and `..`.
    let long = "n".repeat(300);
    let src = staircase_with("name = \"test\"", &format!("name = \"{long}\""));
    refused(&src, &long, "above the limit of 64");
    let src = staircase_with("name = \"test\"", "name = \"..\"");
    refused(&src, "\"..\"", "may not start with `.`");
    // 64 is fine; a count's suffix counts.
    let ok = staircase_with("name = \"test\"", &format!("name = \"{}\"", "n".repeat(64)));
    assert!(parse("ok.toml", &ok, Some(2)).is_ok());
}

/// The fixture's disk matrix with `from` replaced by `to`.
fn disk_matrix(from: &str, to: &str) -> String {
    let src = "name = \"m\"\n\
         [[tenants]]\nname = \"a\"\nrole = \"test\"\ngrant = { write_iops = 200, read_iops = 100, io_dir = \"/var/tmp\" }\n\
         [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\ngrant = { write_iops = 200, read_iops = 100, io_dir = \"/var/tmp\" }\n\
         [scenario]\nkind = \"isolation-matrix\"\nresource = \"disk\"\ndir = \"/var/tmp\"\n";
    assert!(src.contains(from));
    src.replacen(from, to, 1)
}

#[test]
fn io_directories_must_be_absolute_and_on_a_disk() {
    // E9, the part that needs no filesystem: relative paths.
    refused(
        &disk_matrix("io_dir = \"/var/tmp\"", "io_dir = \"scratch\""),
        "io_dir = \"scratch\"",
        "absolute path",
    );
    refused(
        &disk_matrix("dir = \"/var/tmp\"\n", "dir = \"scratch\"\n"),
        "dir = \"scratch\"",
        "absolute path",
    );
    // Against this machine: missing, /proc, and tmpfs (/dev/shm, where it is one).
    let host = Host {
        cpus: Some(2),
        mem_total: None,
        paths: true,
    };
    let missing = disk_matrix("io_dir = \"/var/tmp\"", "io_dir = \"/nonexistent-nnb\"");
    refused_on(&host, &missing, "/nonexistent-nnb", "not a directory");
    let proc = disk_matrix("io_dir = \"/var/tmp\"", "io_dir = \"/proc\"");
    refused_on(&host, &proc, "/proc", "without a block device");
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        // The grants' I/O limits apply to the matrix's dir.
        let src = disk_matrix("dir = \"/var/tmp\"\n", "dir = \"/dev/shm\"\n")
            .replace(", io_dir = \"/var/tmp\"", "");
        refused_on(&host, &src, "dir = \"/dev/shm\"", "in memory");
    }
}

#[test]
fn shaped_rates_are_within_what_tc_takes() {
    // E10: host_bw of 1 bit/s; rate grants of 1 bit/s and 5 Tbit/s.
    let net = |host_bw: &str, rate: &str| {
        format!(
            "name = \"n\"\n[network]\nmode = \"emulated\"\nhost_bw = \"{host_bw}\"\n\
             [[tenants]]\nname = \"a\"\nrole = \"test\"\ngrant = {{ rate = \"{rate}\" }}\n\
             [[tenants]]\nname = \"b\"\nrole = \"neighbor\"\ngrant = {{ rate = \"{rate}\" }}\n\
             [scenario]\nkind = \"isolation-matrix\"\nresource = \"network\"\n"
        )
    };
    refused(&net("1", "100M"), "host_bw", "a shaped rate is");
    refused(&net("1G", "1"), "rate = \"1\"", "a shaped rate is");
    refused(&net("1G", "5T"), "rate = \"5T\"", "a shaped rate is");
    assert!(parse("ok.toml", &net("1G", "100M"), Some(2)).is_ok());
}
