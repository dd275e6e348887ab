//! Hostile run directories (reliability review M6, L9, L10; attacks N3, N10, N11, N13,
//! N14, N16-N18): what analysis refuses or flags instead of hanging, running out of
//! memory, reading outside the run or printing impossible numbers. Every read that
//! once hung or ran out of memory runs under [`within`], so a regression fails instead
//! of hanging the suite.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use nnb_analysis::read::{
    read_run, ReadError, Run, MAX_HDR_BYTES, MAX_LINE_BYTES, MAX_MANIFEST_BYTES,
};
use nnb_analysis::tables::{degradation, findings, latency_vs_load, Analyses, AnalysisError};
use serde_json::{json, Value};

use crate::fixture::copied;

/// What `f` returns, or a failure when it does not return within 30 s (a read that
/// waits on a FIFO or streams `/dev/zero`).
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // The receiver is gone only after the test has failed.
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the read hung (or panicked)")
}

/// The error reading the run in `dir` gives, within 30 s.
fn read_error(dir: &Path) -> ReadError {
    let dir = dir.to_path_buf();
    within(move || read_run(&dir)).unwrap_err()
}

/// Asserts `e` refuses the file named `name` for a reason containing `why`.
#[track_caller]
fn assert_refused(e: &ReadError, name: &str, why: &str) {
    match e {
        ReadError::Refused { path, message } => {
            assert!(path.ends_with(name), "{e}");
            assert!(message.contains(why), "{e}");
        }
        other => panic!("not refused: {other}"),
    }
}

/// Asserts `e` says line `line` of `name` is corrupt for a reason containing `why`.
#[track_caller]
fn assert_corrupt(e: &ReadError, name: &str, line: usize, why: &str) {
    match e {
        ReadError::Corrupt {
            path,
            line: at,
            message,
        } => {
            assert!(path.ends_with(name) && *at == line, "{e}");
            assert!(message.contains(why), "{e}");
            assert!(e.to_string().contains(&format!("{name}:{line}: ")), "{e}");
        }
        other => panic!("not a corrupt line: {other}"),
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn unedited(name: &str) -> tempfile::TempDir {
    copied(name, |_| {}, |_| {})
}

/// The lines of the run's `samples.jsonl`, each with its newline.
fn sample_lines(dir: &Path) -> Vec<Vec<u8>> {
    std::fs::read(dir.join("samples.jsonl"))
        .unwrap()
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

fn write_samples(dir: &Path, lines: &[Vec<u8>]) {
    std::fs::write(dir.join("samples.jsonl"), lines.concat()).unwrap();
}

/// N16: a FIFO in place of samples.jsonl, manifest.json or background.jsonl used to
/// hang analysis; it is refused without being opened for a blocking read.
#[test]
fn m6_a_fifo_is_refused_not_waited_on() {
    for name in ["samples.jsonl", "manifest.json", "background.jsonl"] {
        let dir = unedited("staircase");
        let path = dir.path().join(name);
        if path.exists() {
            std::fs::remove_file(&path).unwrap();
        }
        mkfifo(&path);
        assert_refused(&read_error(dir.path()), name, "a FIFO, not a regular file");
    }
}

/// N14: `samples.jsonl -> /dev/zero` grew until the OOM killer; a link to a device is
/// refused before a byte is read, for every file of the run.
#[test]
fn m6_a_link_to_dev_zero_is_refused() {
    for name in ["samples.jsonl", "manifest.json", "background.jsonl"] {
        let dir = unedited("staircase");
        let path = dir.path().join(name);
        if path.exists() {
            std::fs::remove_file(&path).unwrap();
        }
        symlink("/dev/zero", &path);
        assert_refused(
            &read_error(dir.path()),
            name,
            "a character device, not a regular file",
        );
    }
}

/// A link to a regular file is still followed (a run directory may be assembled with
/// links), and a directory in place of the manifest is refused as one.
#[test]
fn m6_links_to_regular_files_are_read_and_directories_refused() {
    let dir = unedited("staircase");
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join("samples.jsonl");
    std::fs::rename(dir.path().join("samples.jsonl"), &moved).unwrap();
    symlink(&moved, &dir.path().join("samples.jsonl"));
    let run = read_run(dir.path()).unwrap();
    assert_eq!(run.samples.height(), 24);

    std::fs::remove_file(dir.path().join("manifest.json")).unwrap();
    std::fs::create_dir(dir.path().join("manifest.json")).unwrap();
    assert_refused(&read_error(dir.path()), "manifest.json", "a directory");
}

/// The manifest has a size limit: one byte over it is refused without reading it; at
/// the limit it is read (and here found not to be JSON).
#[test]
fn m6_a_manifest_over_its_limit_is_refused() {
    let dir = unedited("staircase");
    let path = dir.path().join("manifest.json");
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(MAX_MANIFEST_BYTES + 1).unwrap();
    assert_refused(
        &read_error(dir.path()),
        "manifest.json",
        "larger than 16 MiB",
    );
    file.set_len(MAX_MANIFEST_BYTES).unwrap();
    let e = read_error(dir.path());
    assert!(matches!(e, ReadError::Corrupt { .. }), "{e}");
}

/// N13: a line longer than [`MAX_LINE_BYTES`] is held only up to the limit. In the
/// middle of the file it is an error naming its line; as the last line it is a torn
/// tail, noted and ignored.
#[test]
fn m6_an_overlong_line_is_an_error_unless_it_is_the_last() {
    let dir = unedited("staircase");
    let mut lines = sample_lines(dir.path());
    let long = [b"{\"pad\":\"".as_slice(), &vec![b'x'; 20 << 20], b"\"}\n"].concat();
    assert!(long.len() > MAX_LINE_BYTES);
    lines.insert(2, long.clone());
    write_samples(dir.path(), &lines);
    assert_corrupt(
        &read_error(dir.path()),
        "samples.jsonl",
        3,
        "longer than 16 MiB",
    );

    lines.remove(2);
    lines.push(long);
    write_samples(dir.path(), &lines);
    let notes = within(move || read_run(dir.path()).map(|r| r.notes)).unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("samples.jsonl:25: torn last line ignored (longer than")),
        "{notes:?}"
    );
}

/// L9 / N10: invalid UTF-8 on line 5 is an error naming line 5 (it was reported with
/// no line); in the manifest, the line of the bad byte.
#[test]
fn l9_invalid_utf8_is_reported_with_its_line() {
    let dir = unedited("staircase");
    let mut lines = sample_lines(dir.path());
    let at = lines[4].windows(4).position(|w| w == b"busy").unwrap();
    lines[4][at + 2] = 0xff;
    write_samples(dir.path(), &lines);
    assert_corrupt(
        &read_error(dir.path()),
        "samples.jsonl",
        5,
        "not valid UTF-8",
    );

    let dir = unedited("staircase");
    let path = dir.path().join("manifest.json");
    let m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut text = serde_json::to_string_pretty(&m).unwrap().into_bytes();
    let third = text
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .nth(1)
        .unwrap()
        .0;
    text.insert(third + 3, 0xff);
    std::fs::write(&path, text).unwrap();
    assert_corrupt(
        &read_error(dir.path()),
        "manifest.json",
        3,
        "not valid UTF-8",
    );
}

/// L10 / N11 (two writers, H2): records of steps already read are ignored, the first
/// copy kept; the degradation is the one of the run without them, and both the notes
/// and the verdict say how many were ignored.
#[test]
fn l10_duplicated_records_are_counted_once_and_flagged() {
    let clean = read_run(unedited("staircase").path()).unwrap();
    assert_eq!(clean.duplicates, 0);
    let dir = unedited("staircase");
    let mut lines = sample_lines(dir.path());
    // busy/neighbors=1/rep=1 and rep=2, again, the second copy with another number.
    let mut changed: Value = serde_json::from_slice(&lines[5]).unwrap();
    changed["value"] = json!(99.0);
    changed["runtime_s"] = json!(99.0);
    lines.push(lines[4].clone());
    lines.push((changed.to_string() + "\n").into_bytes());
    write_samples(dir.path(), &lines);
    let run = read_run(dir.path()).unwrap();
    assert_eq!(run.duplicates, 2);
    assert_eq!(run.samples.height(), clean.samples.height());
    assert!(
        run.notes.iter().any(|n| n.starts_with(
            "samples.jsonl:25: 2 duplicated record(s) ignored (the same step, tenant and \
             part as an earlier line, here line 5"
        )),
        "{:?}",
        run.notes
    );
    let d = |r: &Run| {
        degradation(r).unwrap().unwrap().groups[0]
            .levels
            .iter()
            .map(|l| (l.n, l.mean))
            .collect::<Vec<_>>()
    };
    assert_eq!(d(&run), d(&clean));
    let verdict = findings(&run, &Analyses::of(&run).unwrap()).unwrap();
    assert!(
        verdict
            .iter()
            .any(|f| f.starts_with("2 duplicated record(s) ignored")),
        "{verdict:?}"
    );
}

/// L10 / N3: a negative runtime read as a -153% degradation; now a value no
/// measurement can have, or a part outside its step, is an error naming the line.
#[test]
fn l10_impossible_values_are_errors_naming_their_line() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 5] = [
        ("`value` is -3", |r| {
            r["value"] = json!(-3.0);
            r["runtime_s"] = json!(-3.0);
        }),
        ("`runtime_s` is -3", |r| r["runtime_s"] = json!(-3.0)),
        ("`elapsed_ms` is -1", |r| r["elapsed_ms"] = json!(-1.0)),
        ("part 1 of 0", |r| r["parts"] = json!(0)),
        ("part 2 of 1", |r| r["part"] = json!(2)),
    ];
    for (why, edit) in cases {
        let dir = copied(
            "staircase",
            |_| {},
            |r| {
                if r["step_index"] == 5 {
                    edit(r);
                }
            },
        );
        assert_corrupt(&read_error(dir.path()), "samples.jsonl", 6, why);
    }
}

/// The load-steps fixture (latency records with HDR logs), read.
fn load_steps() -> (tempfile::TempDir, Run) {
    let dir = unedited("load-steps");
    let run = read_run(dir.path()).unwrap();
    (dir, run)
}

/// `run.hdr(rel)`'s error, within 30 s.
fn hdr_error(run: &Run, rel: &str) -> ReadError {
    let (run, rel) = (run.clone(), rel.to_string());
    within(move || run.hdr(&rel).map(|h| h.len())).unwrap_err()
}

/// N17 / N18: an `hdr_log` that is absolute or climbs out of the run directory was
/// read (`/etc/passwd`, `/dev/zero` until the OOM killer); it is refused unread, and
/// the latency table fails with that error.
#[test]
fn m6_hdr_logs_outside_the_run_are_refused() {
    let (dir, run) = load_steps();
    assert!(run.hdr("hdr/load_load-0_rep-1.test.hlog").is_ok());
    for rel in ["/etc/passwd", "/dev/zero", "../../x", "hdr/../../x", ""] {
        assert_refused(
            &hdr_error(&run, rel),
            dir.path().file_name().unwrap().to_str().unwrap(),
            "is not a relative path inside the run directory",
        );
    }
    let dir = copied(
        "load-steps",
        |_| {},
        |r| r["hdr_log"] = json!("/etc/passwd"),
    );
    let run = read_run(dir.path()).unwrap();
    let e = latency_vs_load(&run).unwrap_err();
    assert!(
        matches!(e, AnalysisError::Load(ReadError::Refused { .. })),
        "{e}"
    );
}

/// A symlink inside the run directory that leads out of it (to a log elsewhere, to
/// `/dev/zero`, or a whole `hdr` directory elsewhere) is refused; one that stays inside
/// is read.
#[test]
fn m6_hdr_symlinks_leading_out_of_the_run_are_refused() {
    let (dir, run) = load_steps();
    let hdr = dir.path().join("hdr");
    let elsewhere = tempfile::tempdir().unwrap();
    let log = "load_load-0_rep-1.test.hlog";
    std::fs::copy(hdr.join(log), elsewhere.path().join(log)).unwrap();
    symlink(elsewhere.path().join(log), &hdr.join("out.hlog"));
    symlink("/dev/zero", &hdr.join("zero.hlog"));
    symlink(log, &hdr.join("in.hlog"));
    for rel in ["hdr/out.hlog", "hdr/zero.hlog"] {
        let e = hdr_error(&run, rel);
        assert!(e.to_string().contains("outside the run directory"), "{e}");
    }
    assert!(run.hdr("hdr/in.hlog").is_ok());

    std::fs::remove_dir_all(&hdr).unwrap();
    symlink(elsewhere.path(), &hdr);
    let e = hdr_error(&run, &format!("hdr/{log}"));
    assert!(e.to_string().contains("outside the run directory"), "{e}");
}

/// An HDR log inside the run that is a FIFO, a directory or over [`MAX_HDR_BYTES`] is
/// refused without being read.
#[test]
fn m6_hdr_logs_must_be_regular_files_within_the_limit() {
    let (dir, run) = load_steps();
    let hdr = dir.path().join("hdr");
    mkfifo(&hdr.join("fifo.hlog"));
    assert_refused(&hdr_error(&run, "hdr/fifo.hlog"), "fifo.hlog", "a FIFO");
    assert_refused(&hdr_error(&run, "hdr"), "hdr", "a directory");
    let big = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(hdr.join("big.hlog"))
        .unwrap();
    big.set_len(MAX_HDR_BYTES + 1).unwrap();
    assert_refused(
        &hdr_error(&run, "hdr/big.hlog"),
        "big.hlog",
        "larger than 256 MiB",
    );
}
