//! Run results in S3: upload a run directory, verify it, and fetch it back.
//!
//! A run's results (`results/<run-id>/`) go to `s3://bucket/prefix/<run-id>/`, one
//! object per file, large files in 8 MiB multipart parts. Every object carries its
//! SHA-256 (metadata `nnb-sha256`) and a manifest, `nnb-checksums.json`, uploaded
//! last, lists every file with its size and SHA-256: a run without the manifest is
//! incomplete. After the upload each object's size and checksum are checked with
//! HeadObject (no download); `nnb fetch` downloads into a temporary directory,
//! verifies every byte against the manifest and only then renames the run into place.
//!
//! - [`url`] parses `s3://bucket/prefix` addresses;
//! - [`checksums`] holds the checksum manifest and local SHA-256;
//! - `upload` implements [`S3::upload_run`];
//! - `fetch` implements [`S3::fetch_run`].

pub mod checksums;
mod fetch;
mod upload;
pub mod url;

use std::path::PathBuf;

use aws_config::SdkConfig;
use aws_sdk_s3::error::DisplayErrorContext;

pub use upload::{UploadReport, UploadedObject};
pub use url::S3Url;

/// Size of one multipart part, and the size above which a file goes multipart.
pub const PART_SIZE: u64 = 8 * 1024 * 1024;

/// Object metadata key holding an object's SHA-256 (hex); S3 returns it as
/// `x-amz-meta-nnb-sha256`, so HeadObject can verify an upload without downloading.
pub const SHA256_METADATA: &str = "nnb-sha256";

/// The S3 side of nnb: an SDK client configured for AWS or for a local endpoint.
#[derive(Debug, Clone)]
pub struct S3 {
    client: aws_sdk_s3::Client,
}

impl S3 {
    /// An S3 client from the SDK configuration. With an endpoint override
    /// (`AWS_ENDPOINT_URL`, e.g. a moto server) it addresses buckets by path
    /// (`http://host/bucket/key`), since a local server has no per-bucket host names.
    pub fn new(sdk: &SdkConfig) -> S3 {
        let config = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(sdk.endpoint_url().is_some())
            .build();
        S3 {
            client: aws_sdk_s3::Client::from_conf(config),
        }
    }

    /// The underlying SDK client, for callers (tests, tools) needing other S3 calls.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }
}

/// Why an upload or a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// The `s3://` address is malformed.
    #[error("invalid S3 URL {url:?}: {reason}")]
    Url {
        /// The address as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A local file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The local run directory cannot be uploaded as it is.
    #[error("{}: {reason}", path.display())]
    Layout {
        /// The offending path.
        path: PathBuf,
        /// Why it cannot be uploaded.
        reason: String,
    },
    /// An S3 API call failed.
    #[error("S3 {call} {key}: {message}")]
    Api {
        /// The API call, e.g. `PutObject`.
        call: &'static str,
        /// The `s3://` address it was about.
        key: String,
        /// The SDK's error with its causes.
        message: String,
    },
    /// The run's manifest is missing or unreadable.
    #[error("manifest {url}: {reason}")]
    Checksums {
        /// Where the manifest was looked for.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A file's size or SHA-256 does not match the manifest.
    #[error("verification failed for {file}: {reason}")]
    Verify {
        /// The file, relative to the run directory.
        file: String,
        /// Expected and actual values.
        reason: String,
    },
    /// The destination run directory exists with different contents.
    #[error("{} already exists and differs from the run in S3; move it away first", path.display())]
    Exists {
        /// The existing directory.
        path: PathBuf,
    },
}

impl S3Error {
    /// Whether the error is the user's to fix (an S3 address nnb cannot read), not a
    /// failure of the network or the service.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, S3Error::Url { .. })
    }
}

/// Maps an SDK error of `call` about `key` to [`S3Error::Api`], keeping its causes.
fn api_error<E: std::error::Error>(call: &'static str, key: &str) -> impl FnOnce(E) -> S3Error {
    let key = key.to_string();
    move |e| S3Error::Api {
        call,
        key,
        message: DisplayErrorContext(e).to_string(),
    }
}

/// Maps an I/O error on `path` to [`S3Error::Io`].
fn io_error(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> S3Error {
    let path = path.into();
    move |source| S3Error::Io { path, source }
}
