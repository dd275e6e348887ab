//! A tenant's OCI bundle on disk: `config.json` beside a minimal root filesystem,
//! an empty read-only tree of mount points. Everything the agent sees is mounted
//! there by the runtime: nnb's binary, the host's library directories (what `ldd`
//! lists of it, read-only), its token file, `/proc`, `/sys`, `/dev`, `/tmp` and
//! the I/O directory, so no file of the host is copied and nothing outside the
//! bundle is written.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path};

use super::oci::Config;
use crate::provider::ProviderError;

/// Writes `config` as `bundle/config.json` (0600) and makes `bundle/rootfs` with a
/// mount point for each of its mounts (a file for a file, a directory otherwise).
/// `bundle` is made (0700) when missing; a previous start's files are replaced.
pub(super) fn write_bundle(bundle: &Path, config: &Config) -> Result<(), ProviderError> {
    let io = |what: &str, p: &Path| ProviderError::io(format!("{what} {}", p.display()));
    let rootfs = bundle.join("rootfs");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&rootfs)
        .map_err(io("creating the bundle", &rootfs))?;
    for m in config.mounts() {
        // Destinations are absolute paths nnb chose; only their normal parts count.
        let rel: std::path::PathBuf = m
            .destination()
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        let at = rootfs.join(rel);
        if m.is_file() {
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&at)
                .map_err(io("creating the mount point", &at))?;
        } else {
            std::fs::create_dir_all(&at).map_err(io("creating the mount point", &at))?;
        }
    }
    let json = serde_json::to_vec_pretty(config)
        .map_err(|e| ProviderError::Invalid(format!("writing config.json: {e}")))?;
    let path = bundle.join("config.json");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(io("writing", &path))?;
    std::io::Write::write_all(&mut f, &json).map_err(io("writing", &path))
}
