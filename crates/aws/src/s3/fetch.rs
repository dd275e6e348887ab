//! Fetching a run back: manifest first, every object downloaded into a staging
//! directory and checked against it, then one rename into place.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::checksums::{sha256_file, Checksums, FileSum, CHECKSUMS_NAME, MAX_CHECKSUMS_BYTES};
use super::upload::list_files;
use super::{api_error, io_error, S3Error, S3Url, S3};

impl S3 {
    /// Downloads the run at `src` (`s3://bucket/prefix/<run-id>`) into
    /// `into/<run-id>/` and returns that path. Every file's size and SHA-256 must match
    /// the run's manifest; on any failure nothing is left behind in `into`. An
    /// existing `into/<run-id>/` with exactly the manifest's files is accepted as
    /// already fetched; one with other contents is never overwritten.
    pub async fn fetch_run(&self, src: &S3Url, into: &Path) -> Result<PathBuf, S3Error> {
        let run_id = src.last_segment().ok_or_else(|| S3Error::Url {
            url: src.to_string(),
            reason: "names no run: expected s3://bucket/prefix/<run-id>".to_string(),
        })?;
        let manifest = self.read_manifest(src).await?;
        if manifest.run_id != run_id {
            return Err(S3Error::Checksums {
                url: src.object_url(&src.key(CHECKSUMS_NAME)),
                reason: format!("describes run {:?}, not {run_id:?}", manifest.run_id),
            });
        }
        self.check_listing(src, &manifest).await?;

        let target = into.join(run_id);
        if tokio::fs::try_exists(&target)
            .await
            .map_err(io_error(&target))?
        {
            if holds_exactly(&target, &manifest).await? {
                tracing::info!(path = %target.display(), "run already fetched and identical");
                return Ok(target);
            }
            return Err(S3Error::Exists { path: target });
        }
        tokio::fs::create_dir_all(into)
            .await
            .map_err(io_error(into))?;
        let staging = Staging::create(into, run_id)?;
        for file in &manifest.files {
            self.download(src, file, &staging.path.join(&file.path))
                .await?;
        }
        tokio::fs::rename(&staging.path, &target)
            .await
            .map_err(io_error(&target))?;
        staging.disarm();
        tracing::info!(files = manifest.files.len(), path = %target.display(), "run fetched and verified");
        Ok(target)
    }

    /// GetObject of the run's manifest; its absence means no finished upload there.
    async fn read_manifest(&self, src: &S3Url) -> Result<Checksums, S3Error> {
        let key = src.key(CHECKSUMS_NAME);
        let url = src.object_url(&key);
        let response = self
            .client
            .get_object()
            .bucket(&src.bucket)
            .key(&key)
            .send()
            .await;
        let object = match response {
            Ok(object) => object,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(S3Error::Checksums {
                    url,
                    reason: "not found: no nnb run there, or its upload did not finish".to_string(),
                })
            }
            Err(e) => return Err(api_error("GetObject", &url)(e)),
        };
        let too_large = || S3Error::Checksums {
            url: url.clone(),
            reason: format!(
                "refused: larger than {} MiB, the limit",
                MAX_CHECKSUMS_BYTES >> 20
            ),
        };
        if object
            .content_length()
            .is_some_and(|n| u64::try_from(n).map_or(true, |n| n > MAX_CHECKSUMS_BYTES))
        {
            return Err(too_large());
        }
        let bytes = object
            .body
            .collect()
            .await
            .map_err(api_error("GetObject", &url))?
            .into_bytes();
        if bytes.len() as u64 > MAX_CHECKSUMS_BYTES {
            return Err(too_large());
        }
        Checksums::from_json(&bytes, &url)
    }

    /// ListObjectsV2 (all pages) under the run: every manifest file must be there with
    /// its size; objects the manifest does not list are ignored with a warning.
    async fn check_listing(&self, src: &S3Url, manifest: &Checksums) -> Result<(), S3Error> {
        let prefix = src.key("");
        let mut sizes = HashMap::new();
        let mut pages = self
            .client
            .list_objects_v2()
            .bucket(&src.bucket)
            .prefix(&prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error("ListObjectsV2", &src.to_string()))?;
            for object in page.contents() {
                let relative = object.key().and_then(|k| k.strip_prefix(&prefix));
                if let Some(relative) = relative {
                    sizes.insert(relative.to_string(), object.size());
                }
            }
        }
        for file in &manifest.files {
            let fail = |reason: String| S3Error::Verify {
                file: file.path.clone(),
                reason,
            };
            match sizes.remove(&file.path) {
                None => return Err(fail(format!("missing from {src}"))),
                Some(size) if size.and_then(|s| u64::try_from(s).ok()) != Some(file.bytes) => {
                    return Err(fail(format!(
                        "S3 lists {size:?} bytes, the manifest {}",
                        file.bytes
                    )))
                }
                Some(_) => {}
            }
        }
        sizes.remove(CHECKSUMS_NAME);
        for extra in sizes.keys() {
            tracing::warn!(file = %extra, run = %src, "object not in the run's manifest: not fetched");
        }
        Ok(())
    }

    /// GetObject of one file, streamed to `dest` while hashing; size and SHA-256
    /// must match the manifest entry.
    async fn download(&self, src: &S3Url, file: &FileSum, dest: &Path) -> Result<(), S3Error> {
        let key = src.key(&file.path);
        let url = src.object_url(&key);
        if let Some(parent) = dest.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(io_error(parent))?;
        }
        let mut body = self
            .client
            .get_object()
            .bucket(&src.bucket)
            .key(&key)
            .send()
            .await
            .map_err(api_error("GetObject", &url))?
            .body;
        let mut out = tokio::fs::File::create(dest)
            .await
            .map_err(io_error(dest))?;
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(api_error("GetObject", &url))?
        {
            hasher.update(&chunk);
            bytes += chunk.len() as u64;
            out.write_all(&chunk).await.map_err(io_error(dest))?;
        }
        out.flush().await.map_err(io_error(dest))?;
        let sha256 = hex::encode(hasher.finalize());
        if bytes != file.bytes || sha256 != file.sha256 {
            return Err(S3Error::Verify {
                file: file.path.clone(),
                reason: format!(
                    "downloaded {bytes} bytes with SHA-256 {sha256}, the manifest says {} bytes with {}",
                    file.bytes, file.sha256
                ),
            });
        }
        Ok(())
    }
}

/// True when `dir` holds exactly the manifest's files with the manifest's checksums.
async fn holds_exactly(dir: &Path, manifest: &Checksums) -> Result<bool, S3Error> {
    let files = match list_files(dir, &[]) {
        Ok(files) => files,
        Err(S3Error::Layout { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    if files.len() != manifest.files.len() {
        return Ok(false);
    }
    for (relative, path) in &files {
        let Some(expected) = manifest.file(relative) else {
            return Ok(false);
        };
        let (sha256, bytes) = sha256_file(path).await?;
        if bytes != expected.bytes || sha256 != expected.sha256 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A hidden staging directory next to the destination, removed on drop unless the
/// fetch succeeded and renamed it into place.
struct Staging {
    path: PathBuf,
    armed: bool,
}

impl Staging {
    /// Creates `into/.nnb-fetch-<run-id>-<pid>`, replacing a stale one of the same name.
    fn create(into: &Path, run_id: &str) -> Result<Staging, S3Error> {
        let path = into.join(format!(".nnb-fetch-{run_id}-{}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io_error(&path))?;
        }
        std::fs::create_dir(&path).map_err(io_error(&path))?;
        Ok(Staging { path, armed: true })
    }

    /// Keeps the directory (it has been renamed into place).
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = std::fs::remove_dir_all(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove the partial fetch");
            }
        }
    }
}
