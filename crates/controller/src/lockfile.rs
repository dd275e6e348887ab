//! Lock files that say who holds them: an exclusive advisory lock
//! ([`nnb_sys::file::try_lock_exclusive`]) on a file into which the holder writes one
//! line (pid, command, start), so a refused process can name the holder. The kernel
//! drops the lock when the holder exits, even by `kill -9`.
//!
//! A lock file is opened with [`nnb_sys::owned::open_own`]: never through a symbolic
//! link, never a FIFO or a device, never another user's file, and created 0600, so
//! no other user can truncate a file through it (reliability review NH1, NH2) or
//! lock it to forge an "in use" (NL1).
//!
//! Local runs lock the CPUs they use ([`hold_cpus`]) in a directory only their user
//! can change ([`cpu_lock_dir`]): `/run/nnb` for root (mode 0700; older nnb versions
//! made it 1777, and root narrows it), and for another user `$XDG_RUNTIME_DIR/nnb`,
//! else `/run/user/<uid>/nnb`, else `<tmp>/nnb-locks-<uid>` (mode 0700; refused when
//! it is someone else's). The trade-off: runs of different users, root included,
//! no longer see each other's CPU locks. A directory shared by every user cannot
//! give both: a lock file others can open, they can lock (forging "in use" for every
//! later run), and a name others can create, they can plant (a link, a FIFO, a file
//! of theirs); a shared directory would also show every user the command lines of
//! the others' runs. Safety of root's files comes first; two users running
//! benchmarks on one machine at once have to agree on CPUs between themselves.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nnb_burn::topology::format_list;

/// How many times a refused process looks again for the holder's line when it is
/// not written yet (the holder takes the lock, then writes): 100 looks, 10 ms apart.
const HOLDER_LOOKS: u32 = 100;
/// Pause between two looks at the holder's line.
const HOLDER_POLL: Duration = Duration::from_millis(10);
/// The longest holder line read.
const HOLDER_MAX: usize = 4096;

/// Takes the lock on `path` (created 0600 if needed): `Ok(Ok(file))` holds it while
/// `file` stays open; `Ok(Err(holder))` when another process holds it, `holder`
/// being the line it wrote (or `unknown` when, after a second, it still wrote none).
/// Refuses (an error) a path that is not a regular file of this user's (or of the
/// directory's owner): see [`nnb_sys::owned::open_own`].
pub(crate) fn try_hold(path: &Path) -> io::Result<Result<File, String>> {
    let file = nnb_sys::owned::open_own(path, true)?;
    for _ in 0..HOLDER_LOOKS {
        if nnb_sys::file::try_lock_exclusive(&file)? {
            let me = format!(
                "pid {}, `{}`, since {}\n",
                std::process::id(),
                std::env::args().collect::<Vec<_>>().join(" "),
                nnb_format::timestamp(SystemTime::now())
            );
            file.set_len(0)?;
            file.write_all_at(me.as_bytes(), 0)?;
            file.sync_data()?;
            return Ok(Ok(file));
        }
        if let Some(holder) = holder_line(&file) {
            return Ok(Err(holder));
        }
        std::thread::sleep(HOLDER_POLL);
    }
    Ok(Err("unknown".to_string()))
}

/// The holder's line in `file`, once it is all there and names a live process: a
/// holder that has just taken the lock has not written yet (or not all), and the
/// line until then may be a dead holder's (reliability review NL9).
fn holder_line(file: &File) -> Option<String> {
    let mut buf = vec![0; HOLDER_MAX];
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let line = text.strip_suffix('\n')?;
    let pid = line.strip_prefix("pid ")?.split(',').next()?.parse().ok()?;
    nnb_sys::process::process_exists(pid).then(|| line.to_string())
}

/// Where this user's per-CPU locks live (see the module's documentation): the first
/// of [`lock_dir_candidates`] that is, or can be made, private; the last one when
/// none is ([`hold_cpus`] then says why).
pub(crate) fn cpu_lock_dir() -> PathBuf {
    let candidates = lock_dir_candidates(
        nnb_sys::process::effective_uid(),
        std::env::var_os("XDG_RUNTIME_DIR"),
        &std::env::temp_dir(),
    );
    first_private(&candidates)
}

/// The first of `candidates` that is, or can be made, private; the last when none
/// is. `candidates` is never empty.
fn first_private(candidates: &[PathBuf]) -> PathBuf {
    candidates
        .iter()
        .find(|d| nnb_sys::owned::private_dir(d).is_ok())
        .or(candidates.last())
        .cloned()
        .unwrap_or_default()
}

/// The lock directories user `uid` may use, best first: `/run/nnb` for root; the
/// runtime directory (`runtime`, `$XDG_RUNTIME_DIR`) or `/run/user/<uid>` for
/// another user; then `<tmp>/nnb-locks-<uid>` for everyone.
fn lock_dir_candidates(uid: u32, runtime: Option<OsString>, tmp: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if uid == 0 {
        dirs.push(PathBuf::from("/run/nnb"));
    } else {
        if let Some(runtime) = runtime.map(PathBuf::from).filter(|p| p.is_absolute()) {
            dirs.push(runtime.join("nnb"));
        }
        let user_run = PathBuf::from(format!("/run/user/{uid}/nnb"));
        if !dirs.contains(&user_run) && user_run.parent().is_some_and(Path::is_dir) {
            dirs.push(user_run);
        }
    }
    dirs.push(tmp.join(format!("nnb-locks-{uid}")));
    dirs
}

/// Takes the lock of each of `cpus` under `dir`: the locks held (keep them for the
/// fleet's lifetime), and the warnings: one per other run found on some of the
/// CPUs, and one naming the CPUs that could not be checked (a lock directory that
/// is not private, a lock file that is not one nnb made). Locking never fails a run.
pub(crate) fn hold_cpus(
    dir: &Path,
    cpus: impl IntoIterator<Item = usize>,
) -> (Vec<File>, Vec<String>) {
    let wanted: std::collections::BTreeSet<usize> = cpus.into_iter().collect();
    let unchecked = |which: &[usize], why: &dyn std::fmt::Display| {
        let w = format!(
            "other local nnb runs on {} are not detected: {why}",
            cpu_phrase(which)
        );
        tracing::warn!("{w}");
        w
    };
    if wanted.is_empty() {
        return (Vec::new(), Vec::new());
    }
    if let Err(e) = nnb_sys::owned::private_dir(dir) {
        let all: Vec<usize> = wanted.into_iter().collect();
        return (Vec::new(), vec![unchecked(&all, &e)]);
    }
    let mut held = Vec::new();
    let mut others: Vec<(String, Vec<usize>)> = Vec::new();
    let mut refused: Vec<usize> = Vec::new();
    let mut first_refusal = None;
    for cpu in wanted {
        let path = dir.join(format!("cpu{cpu}.lock"));
        match try_hold(&path) {
            Ok(Ok(file)) => held.push(file),
            Ok(Err(holder)) => match others.iter_mut().find(|(h, _)| *h == holder) {
                Some((_, cpus)) => cpus.push(cpu),
                None => others.push((holder, vec![cpu])),
            },
            Err(e) => {
                refused.push(cpu);
                first_refusal.get_or_insert(e);
            }
        }
    }
    let mut warnings: Vec<String> = others
        .into_iter()
        .map(|(holder, cpus)| {
            let which = match cpus.as_slice() {
                [_] => format!("{} is", cpu_phrase(&cpus)),
                _ => format!("{} are", cpu_phrase(&cpus)),
            };
            format!(
                "{which} in use by another local nnb run ({holder}): two runs on the same \
                 CPUs slow each other down, so this run's numbers are contaminated; run them \
                 one after the other, or give each its own CPUs (taskset)"
            )
        })
        .collect();
    if let Some(e) = first_refusal {
        let more = if refused.len() > 1 {
            " (the first refused; remove what is not nnb's lock file)"
        } else {
            " (remove it if it is not nnb's lock file)"
        };
        warnings.push(unchecked(&refused, &format!("{e}{more}")));
    }
    (held, warnings)
}

/// `CPU 3` or `CPUs 1-2,5`.
fn cpu_phrase(cpus: &[usize]) -> String {
    match cpus {
        [cpu] => format!("CPU {cpu}"),
        _ => format!("CPUs {}", format_list(cpus)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A uid no account has, standing for another local user (the attacker).
    const STRANGER: u32 = 3_999_999;
    const SECRET: &[u8] = b"ORIGINAL ROOT-ONLY CONTENT";

    /// A root-only 0600 file, as the review's `secret.conf`.
    fn secret(dir: &Path) -> PathBuf {
        let victim = dir.join("victim");
        std::fs::create_dir(&victim).unwrap();
        let path = victim.join("secret.conf");
        std::fs::write(&path, SECRET).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    }

    /// `link` -> `target`, planted by the stranger.
    fn plant(target: &Path, link: &Path) {
        std::os::unix::fs::symlink(target, link).unwrap();
        std::os::unix::fs::lchown(link, Some(STRANGER), None).unwrap();
    }

    /// Reliability review NH1 and NL1 (`lockattack.sh`): `/run/nnb` as older nnb
    /// left it (root's, mode 1777), where another user planted `cpu1.lock` -> a
    /// root-only file and made `cpu2.lock` a file of theirs that they hold locked.
    /// Root's next run leaves the root-only file as it was, is not told that CPU 2 is
    /// "in use", says both CPUs went unchecked, narrows the directory to 0700 and
    /// creates its own lock 0600.
    #[test]
    fn a_planted_lock_file_is_refused_not_followed() {
        if !nnb_testkit::require_root("planting files as another uid") {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let secret = secret(base.path());
        let run = base.path().join("run-nnb");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o1777)).unwrap();
        plant(&secret, &run.join("cpu1.lock"));
        let forged = run.join("cpu2.lock");
        std::fs::write(&forged, "pid 1, `nnb run finished.toml`, since then\n").unwrap();
        std::os::unix::fs::lchown(&forged, Some(STRANGER), None).unwrap();
        let theirs = std::fs::File::open(&forged).unwrap();
        assert!(nnb_sys::file::try_lock_exclusive(&theirs).unwrap());

        let (held, warnings) = hold_cpus(&run, [0, 1, 2]);
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(&secret).unwrap()),
            String::from_utf8_lossy(SECRET)
        );
        assert_eq!(held.len(), 1, "only CPU 0's own lock: {warnings:?}");
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("other local nnb runs on CPUs 1-2 are not detected: ")
                && warnings[0].contains("cpu1.lock is a symbolic link"),
            "{warnings:?}"
        );
        assert!(
            !warnings.iter().any(|w| w.contains("in use")),
            "{warnings:?}"
        );
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&run), 0o700);
        assert_eq!(mode(&run.join("cpu0.lock")), 0o600);
    }

    /// Reliability review NH2 (`lockattack2.sh`): the fallback lock directory was
    /// made by another user, with `cpu0.lock` -> the victim's file. The victim's run
    /// takes no lock there, says so, and its file keeps its content; given another
    /// place to go, it uses its own directory instead.
    #[test]
    fn another_users_lock_directory_is_refused() {
        if !nnb_testkit::require_root("planting files as another uid") {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let secret = secret(base.path());
        let theirs = base.path().join("nnb-locks-0");
        std::fs::create_dir(&theirs).unwrap();
        plant(&secret, &theirs.join("cpu0.lock"));
        std::os::unix::fs::lchown(&theirs, Some(STRANGER), None).unwrap();

        let (held, warnings) = hold_cpus(&theirs, [0]);
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(&secret).unwrap()),
            String::from_utf8_lossy(SECRET)
        );
        assert!(held.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("other local nnb runs on CPU 0 are not detected: ")
                && warnings[0].contains(&format!("belongs to uid {STRANGER}")),
            "{warnings:?}"
        );
        let own = base.path().join("own");
        assert_eq!(first_private(&[theirs.clone(), own.clone()]), own);
        assert_eq!(first_private(std::slice::from_ref(&theirs)), theirs);
    }

    /// Root locks in `/run/nnb`; another user in their runtime directory, else in
    /// `/run/user/<uid>`, and everyone in a directory of their own under the
    /// temporary directory last.
    #[test]
    fn each_user_has_a_lock_directory_of_its_own() {
        let tmp = Path::new("/scratch");
        assert_eq!(
            lock_dir_candidates(0, Some("/run/user/0".into()), tmp),
            [PathBuf::from("/run/nnb"), tmp.join("nnb-locks-0")]
        );
        assert_eq!(
            lock_dir_candidates(1000, Some("/home/u/rt".into()), tmp),
            [
                PathBuf::from("/home/u/rt/nnb"),
                // Listed only where /run/user/1000 exists.
                PathBuf::from("/run/user/1000/nnb"),
                tmp.join("nnb-locks-1000"),
            ]
            .into_iter()
            .filter(|p| !p.starts_with("/run/user") || Path::new("/run/user/1000").is_dir())
            .collect::<Vec<_>>()
        );
        // A relative runtime directory is ignored.
        assert_eq!(
            lock_dir_candidates(4_000_001, Some("rt".into()), tmp),
            [tmp.join("nnb-locks-4000001")]
        );
    }

    /// Reliability review NL9: a run refused while the holder has taken the lock
    /// but not yet written its line names the holder, not "unknown" (a new, empty
    /// lock file, the review's case) nor the dead holder whose line is still there.
    #[test]
    fn the_holder_is_named_even_before_it_wrote_its_line() {
        let dir = tempfile::tempdir().unwrap();
        // Above the kernel's largest pid_max (2^22): a dead holder.
        for before in ["", "pid 4194304, `nnb run old.toml`, since then\n"] {
            let path = dir.path().join("run.lock");
            std::fs::write(&path, before).unwrap();
            let holder = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            assert!(nnb_sys::file::try_lock_exclusive(&holder).unwrap());
            let line = format!("pid {}, `nnb run new.toml`, since now", std::process::id());
            let (locked_tx, locked_rx) = std::sync::mpsc::channel();
            let writer = {
                let line = line.clone();
                std::thread::spawn(move || {
                    // Let the refused run look first: it finds no live holder's line.
                    locked_rx.recv().unwrap();
                    std::thread::sleep(Duration::from_millis(50));
                    holder.set_len(0).unwrap();
                    holder
                        .write_all_at(format!("{line}\n").as_bytes(), 0)
                        .unwrap();
                    holder
                })
            };
            locked_tx.send(()).unwrap();
            let refused = try_hold(&path).unwrap();
            let holder = writer.join().unwrap();
            assert_eq!(refused.err(), Some(line), "lock file held {before:?}");
            drop(holder);
            assert!(
                try_hold(&path).unwrap().is_ok(),
                "free once the holder is gone"
            );
        }
    }
}
