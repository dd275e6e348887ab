//! Uploading a run directory: one object per file, multipart above [`PART_SIZE`],
//! the manifest last, then a HeadObject check of every object.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::checksums::{sha256_file, Checksums, FileSum, CHECKSUMS_NAME};
use super::{api_error, io_error, S3Error, S3Url, PART_SIZE, S3, SHA256_METADATA};

/// S3's limit on the number of parts of one multipart upload.
const MAX_PARTS: usize = 10_000;

/// What [`S3::upload_run`] uploaded and verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UploadReport {
    /// Where the run now is: `s3://bucket/prefix/<run-id>`.
    pub url: String,
    /// Number of files uploaded (the manifest not counted).
    pub files: usize,
    /// Total bytes of those files.
    pub bytes: u64,
    /// How many of them went up in multipart parts.
    pub multipart_files: usize,
    /// Every uploaded object, the manifest last.
    pub objects: Vec<UploadedObject>,
}

/// One uploaded object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UploadedObject {
    /// Object key in the bucket.
    pub key: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the contents, lowercase hex.
    pub sha256: String,
    /// Number of multipart parts; 0 for a single PutObject.
    pub parts: u32,
}

impl S3 {
    /// Uploads every file of the run directory `dir` to `dest/<dir name>/`, files
    /// above 8 MiB in 8 MiB multipart parts (aborted on failure), then the manifest
    /// `nnb-checksums.json`, then checks each object's size and SHA-256 with
    /// HeadObject. Uploading the same run again overwrites it with identical objects.
    /// Files at the top of `dir` named in `skip` are not part of the run (the
    /// controller's lock, which holds its command line) and are left out.
    pub async fn upload_run(
        &self,
        dir: &Path,
        dest: &S3Url,
        skip: &[&str],
    ) -> Result<UploadReport, S3Error> {
        let run_id = dir
            .file_name()
            .and_then(OsStr::to_str)
            .ok_or_else(|| S3Error::Layout {
                path: dir.to_path_buf(),
                reason: "a run directory needs a UTF-8 name (its run id)".to_string(),
            })?;
        let files = list_files(dir, skip)?;
        let run_url = dest.join(run_id);
        tracing::info!(files = files.len(), to = %run_url, "uploading run");
        let mut objects = Vec::with_capacity(files.len() + 1);
        for (relative, path) in &files {
            let (sha256, bytes) = sha256_file(path).await?;
            let key = run_url.key(relative);
            let parts = if bytes > PART_SIZE {
                self.put_multipart(&run_url.bucket, &key, path, bytes, &sha256)
                    .await?
            } else {
                self.put_single(&run_url.bucket, &key, path, bytes, &sha256)
                    .await?;
                0
            };
            tracing::debug!(%key, bytes, parts, "uploaded");
            objects.push(UploadedObject {
                key,
                bytes,
                sha256,
                parts,
            });
        }
        let sums = files
            .iter()
            .zip(&objects)
            .map(|((relative, _), o)| FileSum {
                path: relative.clone(),
                bytes: o.bytes,
                sha256: o.sha256.clone(),
            })
            .collect();
        let manifest = Checksums::new(run_id, sums);
        let json = manifest.to_json().map_err(|e| S3Error::Checksums {
            url: run_url.object_url(&run_url.key(CHECKSUMS_NAME)),
            reason: e.to_string(),
        })?;
        let manifest_object = UploadedObject {
            key: run_url.key(CHECKSUMS_NAME),
            bytes: json.len() as u64,
            sha256: hex::encode(Sha256::digest(&json)),
            parts: 0,
        };
        self.put_bytes(&run_url.bucket, &manifest_object, json)
            .await?;
        objects.push(manifest_object);
        self.verify_objects(&run_url, &objects).await?;
        let report = UploadReport {
            url: run_url.to_string(),
            files: files.len(),
            bytes: manifest.files.iter().map(|f| f.bytes).sum(),
            multipart_files: objects.iter().filter(|o| o.parts > 0).count(),
            objects,
        };
        tracing::info!(url = %report.url, files = report.files, bytes = report.bytes, "run uploaded and verified");
        Ok(report)
    }

    /// Uploads a file of at most [`PART_SIZE`] bytes with one PutObject.
    async fn put_single(
        &self,
        bucket: &str,
        key: &str,
        path: &Path,
        bytes: u64,
        sha256: &str,
    ) -> Result<(), S3Error> {
        let data = tokio::fs::read(path).await.map_err(io_error(path))?;
        if data.len() as u64 != bytes {
            return Err(changed(path));
        }
        let object = UploadedObject {
            key: key.to_string(),
            bytes,
            sha256: sha256.to_string(),
            parts: 0,
        };
        self.put_bytes(bucket, &object, data).await
    }

    /// PutObject of in-memory `data` with the object's SHA-256 as metadata.
    async fn put_bytes(
        &self,
        bucket: &str,
        object: &UploadedObject,
        data: Vec<u8>,
    ) -> Result<(), S3Error> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(&object.key)
            .metadata(SHA256_METADATA, &object.sha256)
            .body(ByteStream::from(data))
            .send()
            .await
            .map_err(api_error(
                "PutObject",
                &format!("s3://{bucket}/{}", object.key),
            ))?;
        Ok(())
    }

    /// Uploads a large file in [`PART_SIZE`] parts; aborts the multipart upload if
    /// any part or the completion fails, so no orphaned parts keep costing storage.
    /// Returns the number of parts.
    async fn put_multipart(
        &self,
        bucket: &str,
        key: &str,
        path: &Path,
        bytes: u64,
        sha256: &str,
    ) -> Result<u32, S3Error> {
        let url = format!("s3://{bucket}/{key}");
        let created = self
            .client
            .create_multipart_upload()
            .bucket(bucket)
            .key(key)
            .metadata(SHA256_METADATA, sha256)
            .send()
            .await
            .map_err(api_error("CreateMultipartUpload", &url))?;
        let upload_id = created.upload_id().ok_or_else(|| S3Error::Api {
            call: "CreateMultipartUpload",
            key: url.clone(),
            message: "the response has no upload id".to_string(),
        })?;
        let result = self.upload_parts(bucket, key, upload_id, path, bytes).await;
        if result.is_err() {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .send()
                .await;
            if let Err(e) = aborted {
                tracing::warn!(%url, upload_id, error = %DisplayErrorContext(e),
                    "could not abort the failed multipart upload; its parts keep costing storage until a lifecycle rule removes them");
            }
        }
        result
    }

    /// UploadPart for every [`PART_SIZE`] chunk of `path`, then CompleteMultipartUpload.
    async fn upload_parts(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        path: &Path,
        bytes: u64,
    ) -> Result<u32, S3Error> {
        let url = format!("s3://{bucket}/{key}");
        let mut file = tokio::fs::File::open(path).await.map_err(io_error(path))?;
        let mut parts = Vec::new();
        let mut sent = 0u64;
        loop {
            let mut chunk = Vec::with_capacity(PART_SIZE as usize);
            (&mut file)
                .take(PART_SIZE)
                .read_to_end(&mut chunk)
                .await
                .map_err(io_error(path))?;
            if chunk.is_empty() {
                break;
            }
            if parts.len() == MAX_PARTS {
                return Err(S3Error::Layout {
                    path: path.to_path_buf(),
                    reason: format!("larger than S3's {MAX_PARTS} parts of {PART_SIZE} bytes"),
                });
            }
            sent += chunk.len() as u64;
            let number = parts.len() as i32 + 1;
            let part = self
                .client
                .upload_part()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .body(ByteStream::from(chunk))
                .send()
                .await
                .map_err(api_error("UploadPart", &url))?;
            parts.push(
                CompletedPart::builder()
                    .set_e_tag(part.e_tag().map(str::to_string))
                    .part_number(number)
                    .build(),
            );
        }
        if sent != bytes {
            return Err(changed(path));
        }
        let count = parts.len() as u32;
        let completed = self
            .client
            .complete_multipart_upload()
            .bucket(bucket)
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await;
        match completed {
            Ok(_) => Ok(count),
            // moto 5.2 answers 200 with a <CompleteMultipartUploadResponse> root that the
            // SDK refuses. The upload did complete, and verify_objects checks the object's
            // size and SHA-256 with HeadObject next, so a success status is enough here.
            Err(e) if e.raw_response().is_some_and(|r| r.status().is_success()) => {
                tracing::warn!(%url, error = %DisplayErrorContext(&e),
                    "CompleteMultipartUpload succeeded with a response the SDK cannot parse; HeadObject verifies it");
                Ok(count)
            }
            Err(e) => Err(api_error("CompleteMultipartUpload", &url)(e)),
        }
    }

    /// HeadObject of every uploaded object: its size and its stored SHA-256 must be
    /// what was uploaded (S3 checked each request's checksum on receipt).
    async fn verify_objects(
        &self,
        run_url: &S3Url,
        objects: &[UploadedObject],
    ) -> Result<(), S3Error> {
        for object in objects {
            let url = run_url.object_url(&object.key);
            let head = self
                .client
                .head_object()
                .bucket(&run_url.bucket)
                .key(&object.key)
                .send()
                .await
                .map_err(api_error("HeadObject", &url))?;
            let size = head.content_length().and_then(|n| u64::try_from(n).ok());
            let stored = head.metadata().and_then(|m| m.get(SHA256_METADATA));
            let fail = |reason: String| S3Error::Verify {
                file: url.clone(),
                reason,
            };
            if size != Some(object.bytes) {
                return Err(fail(format!(
                    "S3 holds {size:?} bytes, {} were uploaded",
                    object.bytes
                )));
            }
            if stored.map(String::as_str) != Some(object.sha256.as_str()) {
                return Err(fail(format!(
                    "stored SHA-256 {stored:?} != uploaded {}",
                    object.sha256
                )));
            }
        }
        Ok(())
    }
}

/// Every regular file under `dir` as (relative `/`-path, absolute path), sorted,
/// but those at its top named in `skip`. Refuses non-UTF-8 names, special files, a
/// file named like the manifest and an empty directory: each would make the
/// uploaded run differ from the local one.
pub(super) fn list_files(dir: &Path, skip: &[&str]) -> Result<Vec<(String, PathBuf)>, S3Error> {
    let mut files = Vec::new();
    let mut pending = vec![(String::new(), dir.to_path_buf())];
    while let Some((relative_dir, path)) = pending.pop() {
        for entry in std::fs::read_dir(&path).map_err(io_error(&path))? {
            let entry = entry.map_err(io_error(&path))?;
            let entry_path = entry.path();
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| S3Error::Layout {
                    path: entry_path.clone(),
                    reason: "file names must be UTF-8 to become S3 keys".to_string(),
                })?;
            if relative_dir.is_empty() && skip.contains(&name.as_str()) {
                continue;
            }
            let relative = if relative_dir.is_empty() {
                name
            } else {
                format!("{relative_dir}/{name}")
            };
            let kind = std::fs::metadata(&entry_path).map_err(io_error(&entry_path))?;
            if kind.is_dir() {
                pending.push((relative, entry_path));
            } else if !kind.is_file() {
                return Err(S3Error::Layout {
                    path: entry_path,
                    reason: "not a regular file".to_string(),
                });
            } else if relative == CHECKSUMS_NAME {
                return Err(S3Error::Layout {
                    path: entry_path,
                    reason: format!("{CHECKSUMS_NAME} is reserved for nnb's checksum manifest"),
                });
            } else {
                files.push((relative, entry_path));
            }
        }
    }
    if files.is_empty() {
        return Err(S3Error::Layout {
            path: dir.to_path_buf(),
            reason: "no files to upload".to_string(),
        });
    }
    files.sort();
    Ok(files)
}

/// The error for a file that changed size between hashing and uploading.
fn changed(path: &Path) -> S3Error {
    S3Error::Layout {
        path: path.to_path_buf(),
        reason: "the file changed while it was being uploaded".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_nested_files_sorted_with_slash_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("b/c")).expect("mkdir");
        std::fs::write(dir.path().join("b/c/x.csv"), b"x").expect("write");
        std::fs::write(dir.path().join("a.json"), b"{}").expect("write");
        std::fs::create_dir(dir.path().join("empty")).expect("mkdir");
        let files = list_files(dir.path(), &[]).expect("list");
        let names: Vec<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(names, ["a.json", "b/c/x.csv"]);
        assert_eq!(files[1].1, dir.path().join("b/c/x.csv"));
    }

    #[test]
    fn files_named_to_skip_at_the_top_are_left_out() {
        // The controller's `.lock` (its pid and command line) is no part of the run;
        // a file of that name deeper down is.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("t")).expect("mkdir");
        for name in [".lock", "manifest.json", "t/.lock"] {
            std::fs::write(dir.path().join(name), b"x").expect("write");
        }
        let files = list_files(dir.path(), &[".lock"]).expect("list");
        let names: Vec<&str> = files.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(names, ["manifest.json", "t/.lock"]);
    }

    #[test]
    fn refuses_what_would_not_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = list_files(dir.path(), &[]).expect_err("empty");
        assert!(err.to_string().contains("no files"), "{err}");
        std::fs::write(dir.path().join(CHECKSUMS_NAME), b"{}").expect("write");
        let err = list_files(dir.path(), &[]).expect_err("reserved name");
        assert!(err.to_string().contains("reserved"), "{err}");
        let err = list_files(&dir.path().join("missing"), &[]).expect_err("missing dir");
        assert!(matches!(err, S3Error::Io { .. }), "{err}");
    }
}
