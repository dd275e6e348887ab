//! Uploading a run's results to the experiment's `results_s3` (any provider kind):
//! S3 through `nnb-aws` with the `aws` feature; a build without it refuses such a
//! run before it starts ([`available`]).

use std::path::Path;

use super::ProviderError;

/// What an upload sent and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReport {
    /// Where the run now is: `s3://bucket/prefix/<run-id>`.
    pub url: String,
    /// Files uploaded (the checksum manifest not counted).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Whether this build can upload results (the `aws` feature).
pub fn available() -> Result<(), ProviderError> {
    if cfg!(feature = "aws") {
        Ok(())
    } else {
        Err(ProviderError::NoAwsFeature)
    }
}

/// Uploads the run directory `dir` to `dest` (`s3://bucket/prefix`; the run id is
/// appended) with an S3 client of `region` (`None`: the standard AWS chain's), and
/// checks every object's checksum. The run's lock file is left out: it holds the
/// controller's pid and command line, no part of the results.
#[cfg(feature = "aws")]
pub async fn to_s3(
    region: Option<&str>,
    dir: &Path,
    dest: &str,
) -> Result<UploadReport, ProviderError> {
    let url: nnb_aws::s3::S3Url = dest.parse().map_err(|source| ProviderError::Upload {
        what: format!("results_s3 = {dest:?}"),
        source,
    })?;
    let report = super::aws::connect_s3(region)
        .await
        .upload_run(dir, &url, &[crate::results::LOCK])
        .await
        .map_err(|source| ProviderError::Upload {
            what: format!("uploading {} to {url}", dir.display()),
            source,
        })?;
    Ok(UploadReport {
        url: report.url,
        files: report.files,
        bytes: report.bytes,
    })
}

/// Without the `aws` feature nothing can be uploaded.
#[cfg(not(feature = "aws"))]
pub async fn to_s3(
    region: Option<&str>,
    dir: &Path,
    dest: &str,
) -> Result<UploadReport, ProviderError> {
    let _ = (region, dir, dest);
    Err(ProviderError::NoAwsFeature)
}
