//! Reading and writing cgroup files: bounded reads, one `write` per value (the
//! kernel takes each write as one command), and errors that name the file.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::CgroupError;

/// The largest file nnb reads here (a `cgroup.procs` of ~500k processes, the
/// mountinfo of a host with ~30k mounts); a larger one is refused rather than read
/// without bound.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// The content of `path`, at most [`MAX_FILE_BYTES`], as text.
pub(super) fn read(path: &Path) -> Result<String, CgroupError> {
    let err = |source| CgroupError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(malformed(
            path,
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| malformed(path, "not UTF-8 text".into()))
}

/// Reads `path` and parses it with `parse`, whose complaint becomes a
/// [`CgroupError::Malformed`] naming the file.
pub(super) fn parse<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, CgroupError> {
    parse(&read(path)?).map_err(|what| malformed(path, what))
}

/// A [`CgroupError::Malformed`] for `path`.
pub(super) fn malformed(path: &Path, what: String) -> CgroupError {
    CgroupError::Malformed {
        path: path.to_path_buf(),
        what,
    }
}

/// Writes `value` to the existing file `path` in one `write` (never creates it: a
/// missing cgroup file means the controller is not there).
pub(super) fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|source| CgroupError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        })
}

/// Creates the directory `path` (its parent exists); one that exists already is fine.
pub(super) fn mkdir(path: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(CgroupError::Create {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The subdirectories of `dir` (child cgroups), sorted; none when `dir` is gone.
pub(super) fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let err = |source| CgroupError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        r => r.map_err(err)?,
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err)?;
        if entry.file_type().map_err(err)?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}
