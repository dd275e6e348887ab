//! The report's output directory, made safe to write into (reliability review NM6).
//!
//! `--out` may name a path under `/tmp` that another local user created first, filled
//! with symbolic links to files of the caller's (root's `/etc/...`). So before a byte
//! is written, the directory must be one only the caller can change, reached through
//! directories no other user can rename entries of:
//!
//! - every symbolic link on the path as given belongs to the caller or to root (a link
//!   another user planted could lead anywhere);
//! - the directory itself (its real path, links resolved) and each sub-directory the
//!   report uses belong to the caller, are not symbolic links, and neither group nor
//!   others may write them;
//! - every directory above it belongs to the caller or to root, and one that others
//!   may write is sticky (`/tmp`), so no other user can move it away and put theirs
//!   in its place.
//!
//! Each file is then written to a new temporary name (`O_EXCL | O_NOFOLLOW`) and
//! renamed over the final one: a link or a second hard link already there is replaced,
//! never followed or truncated.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Component, Path, PathBuf};

use super::ReportError;

/// Permission bits that let the group or others change a directory's entries.
const OTHERS_WRITE: u32 = 0o022;
/// The sticky bit: only an entry's owner may rename or remove it.
const STICKY: u32 = 0o1000;

/// A report directory checked as the module describes: files are written under its
/// real path only.
#[derive(Debug)]
pub(super) struct OutDir {
    real: PathBuf,
    me: u32,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn unsafe_dir(path: &Path, why: String) -> ReportError {
    ReportError::UnsafeOut {
        path: path.to_path_buf(),
        why,
    }
}

/// Who owns a file, for messages: `root`, `you (uid N)` or `uid N`.
fn owner(uid: u32, me: u32) -> String {
    match uid {
        0 => "root".to_string(),
        u if u == me => format!("you (uid {u})"),
        u => format!("uid {u}"),
    }
}

impl OutDir {
    /// Makes `out` (and any missing parent) unless it exists, and checks it as the
    /// module describes.
    pub(super) fn prepare(out: &Path) -> Result<OutDir, ReportError> {
        let me = nnb_sys::process::effective_uid();
        let abs = std::path::absolute(out).map_err(io_err(out))?;
        check_links(&abs, me)?;
        fs::create_dir_all(&abs).map_err(io_err(out))?;
        let real = abs.canonicalize().map_err(io_err(out))?;
        let dir = OutDir { real, me };
        dir.check_own(&dir.real)?;
        for above in dir.real.ancestors().skip(1) {
            let meta = fs::metadata(above).map_err(io_err(above))?;
            if meta.uid() != me && meta.uid() != 0 {
                return Err(unsafe_dir(
                    out,
                    format!(
                        "{} above it belongs to {}, who could put another directory in its place",
                        above.display(),
                        owner(meta.uid(), me)
                    ),
                ));
            }
            if meta.mode() & OTHERS_WRITE != 0 && meta.mode() & STICKY == 0 {
                return Err(unsafe_dir(
                    out,
                    format!(
                        "{} above it can be written by other users (mode {:o}, not sticky)",
                        above.display(),
                        meta.mode() & 0o7777
                    ),
                ));
            }
        }
        Ok(dir)
    }

    /// Refuses `path` unless it is a directory (not a link to one) of the caller's
    /// that neither group nor others may write.
    fn check_own(&self, path: &Path) -> Result<(), ReportError> {
        let meta = fs::symlink_metadata(path).map_err(io_err(path))?;
        let why = if !meta.is_dir() {
            Some("it is not a directory".to_string())
        } else if meta.uid() != self.me {
            Some(format!(
                "it belongs to {}, not to you (uid {}): its owner could have planted links \
                 in it that would make you overwrite your own files",
                owner(meta.uid(), self.me),
                self.me
            ))
        } else if meta.mode() & OTHERS_WRITE != 0 {
            Some(format!(
                "other users can write it (mode {:o}); chmod go-w it or choose another directory",
                meta.mode() & 0o7777
            ))
        } else {
            None
        };
        why.map_or(Ok(()), |why| Err(unsafe_dir(path, why)))
    }

    /// Writes `contents` to `rel` (a file name, or a sub-directory and a file name)
    /// under the directory: its sub-directory is made (mode 0755) unless it exists and
    /// checked like the directory, then the file goes to a new temporary name and is
    /// renamed over `rel`.
    pub(super) fn write(&self, rel: &Path, contents: &str) -> Result<(), ReportError> {
        let path = self.real.join(rel);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(unsafe_dir(&path, "not a file name".to_string()));
        };
        if parent != self.real {
            match DirBuilder::new().mode(0o755).create(parent) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(io_err(parent)(e))
                }
                _ => self.check_own(parent)?,
            }
        }
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = parent.join(tmp_name);
        // A temporary file left by a killed report of this process id; the directory
        // is the caller's, so it is theirs.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(&tmp)(e)),
            _ => {}
        }
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| f.write_all(contents.as_bytes()))
            .map_err(io_err(&tmp))
            .and_then(|()| fs::rename(&tmp, &path).map_err(io_err(&path)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }
}

/// Refuses a symbolic link on `abs` (an absolute path) that belongs to neither the
/// caller nor root: its owner chose where it leads.
fn check_links(abs: &Path, me: u32) -> Result<(), ReportError> {
    let mut prefix = PathBuf::new();
    for c in abs.components() {
        prefix.push(c);
        if !matches!(c, Component::Normal(_)) {
            continue;
        }
        let meta = match fs::symlink_metadata(&prefix) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&prefix)(e)),
        };
        if meta.file_type().is_symlink() && meta.uid() != me && meta.uid() != 0 {
            return Err(unsafe_dir(
                abs,
                format!(
                    "{} is a symbolic link of {}'s, who chose where it leads",
                    prefix.display(),
                    owner(meta.uid(), me)
                ),
            ));
        }
    }
    Ok(())
}
