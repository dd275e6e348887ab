//! The checksum manifest of an uploaded run, and local SHA-256 of files.
//!
//! `nnb-checksums.json` lists every file of the run (path relative to the run
//! directory, size, SHA-256 hex). It is uploaded after all the files, so its presence
//! means the upload finished; fetch trusts nothing that does not match it.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::{io_error, S3Error};

/// Name of the manifest object inside a run's prefix.
pub const CHECKSUMS_NAME: &str = "nnb-checksums.json";

/// The largest manifest fetch reads, bytes (16 MiB, as `nnb analyze` caps a run's
/// `manifest.json`): a run of ten thousand files needs about 1.5 MiB.
pub const MAX_CHECKSUMS_BYTES: u64 = 16 << 20;

/// The manifest format version this code writes and reads.
const VERSION: u32 = 1;

/// Every file of an uploaded run with its size and SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checksums {
    /// Format version (1).
    pub version: u32,
    /// The run id, i.e. the run directory's name.
    pub run_id: String,
    /// The files, sorted by path.
    pub files: Vec<FileSum>,
}

/// One file of a run: where it is and what its bytes hash to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    /// Path relative to the run directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, lowercase hex.
    pub sha256: String,
}

impl Checksums {
    /// A manifest for `run_id` listing `files` (sorted here by path).
    pub fn new(run_id: &str, mut files: Vec<FileSum>) -> Checksums {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Checksums {
            version: VERSION,
            run_id: run_id.to_string(),
            files,
        }
    }

    /// The manifest as pretty JSON, the bytes that are uploaded.
    pub fn to_json(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec_pretty(self)
    }

    /// Parses a downloaded manifest and checks that every path stays inside the
    /// run directory; `url` names it in errors.
    pub fn from_json(bytes: &[u8], url: &str) -> Result<Checksums, S3Error> {
        let fail = |reason: String| S3Error::Checksums {
            url: url.to_string(),
            reason,
        };
        let manifest: Checksums =
            serde_json::from_slice(bytes).map_err(|e| fail(format!("not valid JSON: {e}")))?;
        if manifest.version != VERSION {
            return Err(fail(format!(
                "version {} is not supported (expected {VERSION})",
                manifest.version
            )));
        }
        if let Some(bad) = manifest.files.iter().find(|f| !is_safe_relative(&f.path)) {
            return Err(fail(format!(
                "path {:?} leaves the run directory",
                bad.path
            )));
        }
        Ok(manifest)
    }

    /// The entry for `path`, if the manifest lists it.
    pub fn file(&self, path: &str) -> Option<&FileSum> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// True when `path` is a non-empty relative `/`-path without `.`, `..`, empty
/// segments or backslashes, so joining it to a directory stays inside it.
pub fn is_safe_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// SHA-256 (lowercase hex) and size of the file at `path`, read in 1 MiB chunks.
pub async fn sha256_file(path: &Path) -> Result<(String, u64), S3Error> {
    let mut file = tokio::fs::File::open(path).await.map_err(io_error(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).await.map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        total += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_paths_stay_inside_the_run() {
        assert!(is_safe_relative("a.json"));
        assert!(is_safe_relative("tenants/t1/raw.csv"));
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "./a",
            "a\\b",
            "a/",
        ] {
            assert!(!is_safe_relative(bad), "{bad:?}");
        }
    }

    #[test]
    fn manifest_round_trips_and_refuses_escaping_paths() {
        let files = vec![
            FileSum {
                path: "z.csv".into(),
                bytes: 3,
                sha256: "00".into(),
            },
            FileSum {
                path: "a.json".into(),
                bytes: 1,
                sha256: "11".into(),
            },
        ];
        let manifest = Checksums::new("run-1", files);
        assert_eq!(manifest.files[0].path, "a.json");
        let back = Checksums::from_json(&manifest.to_json().expect("json"), "s3://b/run-1")
            .expect("parses");
        assert_eq!(back, manifest);
        assert_eq!(back.file("z.csv").map(|f| f.bytes), Some(3));

        let mut evil = manifest.clone();
        evil.files[0].path = "../../home/x".into();
        let err = Checksums::from_json(&evil.to_json().expect("json"), "s3://b/run-1")
            .expect_err("escapes");
        assert!(
            err.to_string().contains("leaves the run directory"),
            "{err}"
        );
        let err = Checksums::from_json(b"{", "s3://b/run-1").expect_err("broken");
        assert!(err.to_string().contains("not valid JSON"), "{err}");
    }

    #[tokio::test]
    async fn sha256_of_a_file_matches_the_known_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("abc");
        std::fs::write(&path, b"abc").expect("write");
        let (sum, bytes) = sha256_file(&path).await.expect("hash");
        assert_eq!(bytes, 3);
        assert_eq!(
            sum,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let err = sha256_file(&dir.path().join("missing"))
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
