//! Files and directories nnb may trust: a directory only this user can change, and
//! a file opened without following a symbolic link, without blocking on a FIFO and
//! without opening a device, then checked to be a regular file of the right owner
//! with a single name. So no nnb (root's least of all) writes, truncates, locks or
//! removes something another local user planted under a name nnb uses: a lock file
//! (reliability review NH1, NH2, NL1) or a disk load's scratch file (NM1, NL2).
//!
//! A file is trusted when it belongs to this user or to the owner of the directory
//! that holds it: the directory's owner could have put any file there anyway (a run
//! directory of a user that root resumes), and another user's file in a shared
//! directory (`/tmp`, an old world-writable `/run/nnb`) is refused.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::process::effective_uid;

/// Why a path is not one nnb may use.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    /// Not the kind of file asked for (a symbolic link, a FIFO, a device ...).
    #[error("{} is a {kind}, not a {wanted}", path.display())]
    Kind {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
        /// What it should have been.
        wanted: &'static str,
    },
    /// Owned by another user.
    #[error("{} belongs to uid {owner}, not to this user (uid {me})", path.display())]
    Owner {
        /// The path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// A directory that other users may write.
    #[error("{} can be written by other users (mode {mode:o})", path.display())]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A file with more than one name: another name may be a file nnb must not touch.
    #[error("{} has {links} hard links, so it may be another file's second name", path.display())]
    Links {
        /// The path.
        path: PathBuf,
        /// Its number of names.
        links: u64,
    },
    /// The name was given to another file between the look and the open.
    #[error("{} was replaced while it was being opened", path.display())]
    Replaced {
        /// The path.
        path: PathBuf,
    },
    /// A system call failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
}

impl Untrusted {
    /// Whether the path does not exist (nothing was refused).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Untrusted::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

impl From<Untrusted> for io::Error {
    /// An I/O error carrying the message; a missing path stays `NotFound`.
    fn from(e: Untrusted) -> io::Error {
        let kind = match &e {
            Untrusted::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// What kind of file `meta` describes, for messages.
pub fn kind_name(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else {
        "special file"
    }
}

/// Makes `dir` (mode 0700) unless it exists, and checks that only this user can
/// change it: a directory (not a symbolic link to one), owned by this user, that
/// neither group nor others may write. A directory of this user's that others may
/// write (as older nnb versions left `/run/nnb`, mode 1777) is narrowed to 0700
/// first; what others put there before is refused file by file by [`open_own`].
/// The parent must be one other users cannot rename entries of (`/run`, a sticky
/// `/tmp`, the user's runtime directory).
pub fn private_dir(dir: &Path) -> Result<(), Untrusted> {
    let io = |what| {
        move |source| Untrusted::Io {
            what,
            path: dir.to_path_buf(),
            source,
        }
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("cannot create")(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io("cannot look at"))?;
    if !meta.is_dir() {
        return Err(Untrusted::Kind {
            path: dir.to_path_buf(),
            kind: kind_name(&meta),
            wanted: "directory",
        });
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(Untrusted::Owner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o022 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("cannot make private"))?;
        let mode = std::fs::symlink_metadata(dir)
            .map_err(io("cannot look at"))?
            .mode();
        if mode & 0o022 != 0 {
            return Err(Untrusted::Writable {
                path: dir.to_path_buf(),
                mode: mode & 0o7777,
            });
        }
    }
    Ok(())
}

/// Opens `path` without following a symbolic link and without blocking
/// (`O_NOFOLLOW | O_NONBLOCK`, and `O_CLOEXEC` as every file std opens), for reading
/// and writing, creating it with mode 0600 when `create` is set, for reading only
/// otherwise. What is already there is looked at first and never opened unless it is
/// a regular file with one name owned by this user or by the directory's owner; the
/// opened file is checked again (it must be the one looked at). Nothing is
/// truncated: the caller may change the file once it is returned. A file of this
/// user's opened with `create` that others may read is narrowed to 0600.
pub fn open_own(path: &Path, create: bool) -> Result<File, Untrusted> {
    let io = |what| {
        move |source| Untrusted::Io {
            what,
            path: path.to_path_buf(),
            source,
        }
    };
    let before = match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            check_file(path, &meta)?;
            Some(meta)
        }
        Err(e) if create && e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("cannot look at")(e)),
    };
    let mut options = OpenOptions::new();
    options.read(true);
    if create {
        options.write(true).create(true).mode(0o600);
    }
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            // Planted between the look and the open.
            Untrusted::Kind {
                path: path.to_path_buf(),
                kind: "symbolic link",
                wanted: "regular file",
            }
        } else {
            io("cannot open")(e)
        }
    })?;
    let after = file.metadata().map_err(io("cannot look at"))?;
    check_file(path, &after)?;
    if before.is_some_and(|b| (b.dev(), b.ino()) != (after.dev(), after.ino())) {
        return Err(Untrusted::Replaced {
            path: path.to_path_buf(),
        });
    }
    if create && after.uid() == effective_uid() && after.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io("cannot make private"))?;
    }
    Ok(file)
}

/// Refuses anything but a regular file with one name, owned by this user or by the
/// owner of the directory that holds it.
fn check_file(path: &Path, meta: &Metadata) -> Result<(), Untrusted> {
    if !meta.is_file() {
        return Err(Untrusted::Kind {
            path: path.to_path_buf(),
            kind: kind_name(meta),
            wanted: "regular file",
        });
    }
    let me = effective_uid();
    if meta.uid() != me {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let dir_owner = std::fs::symlink_metadata(parent).map(|m| m.uid()).ok();
        if dir_owner != Some(meta.uid()) {
            return Err(Untrusted::Owner {
                path: path.to_path_buf(),
                owner: meta.uid(),
                me,
            });
        }
    }
    if meta.nlink() != 1 {
        return Err(Untrusted::Links {
            path: path.to_path_buf(),
            links: meta.nlink(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nnb-owned-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn only_a_regular_file_with_one_name_is_opened() {
        let dir = scratch("kinds");
        let target = dir.join("target");
        std::fs::write(&target, b"keep").expect("target");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        for create in [false, true] {
            let e = open_own(&link, create).expect_err("a symlink");
            assert!(
                matches!(
                    e,
                    Untrusted::Kind {
                        kind: "symbolic link",
                        ..
                    }
                ),
                "{e}"
            );
        }
        let second = dir.join("second");
        std::fs::hard_link(&target, &second).expect("hard link");
        let e = open_own(&second, true).expect_err("two names");
        assert!(matches!(e, Untrusted::Links { links: 2, .. }), "{e}");
        std::fs::remove_file(&second).expect("unlink");
        assert_eq!(std::fs::read(&target).expect("read"), b"keep");
        // A file of one's own that others may read is narrowed when opened to write.
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        open_own(&target, true).expect("own file");
        let mode = std::fs::metadata(&target).expect("stat").mode();
        assert_eq!(mode & 0o777, 0o600);
        let fresh = dir.join("fresh");
        assert!(open_own(&fresh, false).expect_err("absent").is_not_found());
        open_own(&fresh, true).expect("created");
        assert_eq!(
            std::fs::metadata(&fresh).expect("stat").mode() & 0o777,
            0o600
        );
        assert!(open_own(&dir, false).is_err(), "a directory");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// A uid no account has: files given to it stand for another local user's.
    pub(crate) const STRANGER: u32 = 3_999_999;

    #[test]
    fn another_users_file_is_refused_unless_the_directory_is_theirs() {
        if !nnb_testkit::require_root("giving files to another uid") {
            return;
        }
        let dir = scratch("owner");
        let theirs = dir.join("theirs");
        std::fs::write(&theirs, b"x").expect("write");
        std::os::unix::fs::lchown(&theirs, Some(STRANGER), None).expect("chown");
        for create in [false, true] {
            let e = open_own(&theirs, create).expect_err("another user's file");
            assert!(
                matches!(
                    e,
                    Untrusted::Owner {
                        owner: STRANGER,
                        ..
                    }
                ),
                "{e}"
            );
        }
        std::os::unix::fs::lchown(&dir, Some(STRANGER), None).expect("chown dir");
        open_own(&theirs, false).expect("the directory's owner's file");
        let e = private_dir(&dir).expect_err("another user's directory");
        assert!(
            matches!(
                e,
                Untrusted::Owner {
                    owner: STRANGER,
                    ..
                }
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_private_dir_is_made_narrowed_or_refused() {
        let dir = scratch("private");
        let made = dir.join("made");
        private_dir(&made).expect("made");
        assert_eq!(
            std::fs::metadata(&made).expect("stat").mode() & 0o7777,
            0o700
        );
        let wide = dir.join("wide");
        std::fs::create_dir(&wide).expect("mkdir");
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        private_dir(&wide).expect("narrowed");
        assert_eq!(
            std::fs::metadata(&wide).expect("stat").mode() & 0o7777,
            0o700
        );
        let link = dir.join("link");
        std::os::unix::fs::symlink(&made, &link).expect("symlink");
        let e = private_dir(&link).expect_err("a symlink");
        assert!(
            matches!(
                e,
                Untrusted::Kind {
                    kind: "symbolic link",
                    ..
                }
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
