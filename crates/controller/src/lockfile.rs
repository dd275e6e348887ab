//! Lock files that say who holds them: an exclusive advisory lock
//! ([`nnb_sys::file::try_lock_exclusive`]) on a file into which the holder writes one
//! line (pid, command, start), so a refused process can name the holder. The kernel
//! drops the lock when the holder exits, even by `kill -9`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::SystemTime;

/// Takes the lock on `path` (created if needed): `Ok(Ok(file))` holds it while
/// `file` stays open; `Ok(Err(holder))` when another process holds it, `holder`
/// being the line it wrote (or `unknown`).
pub(crate) fn try_hold(path: &Path) -> io::Result<Result<File, String>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if !nnb_sys::file::try_lock_exclusive(&file)? {
        let mut holder = String::new();
        // Bounded: the holder wrote one short line.
        let _ = (&file).take(4096).read_to_string(&mut holder);
        let holder = holder.trim();
        return Ok(Err(if holder.is_empty() {
            "unknown".to_string()
        } else {
            holder.to_string()
        }));
    }
    let me = format!(
        "pid {}, `{}`, since {}\n",
        std::process::id(),
        std::env::args().collect::<Vec<_>>().join(" "),
        nnb_format::timestamp(SystemTime::now())
    );
    file.set_len(0)?;
    file.write_all(me.as_bytes())?;
    file.sync_data()?;
    Ok(Ok(file))
}
