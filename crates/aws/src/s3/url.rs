//! `s3://bucket/prefix` addresses, parsed with errors a person can act on.

use std::fmt;
use std::str::FromStr;

use super::S3Error;

/// An S3 location: a bucket and a key prefix (no leading or trailing `/`; may be empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct S3Url {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix inside the bucket, `/`-separated, without surrounding slashes.
    pub prefix: String,
}

impl S3Url {
    /// This location with `segment` appended to the prefix (e.g. the run id).
    pub fn join(&self, segment: &str) -> S3Url {
        S3Url {
            bucket: self.bucket.clone(),
            prefix: self.key(segment.trim_matches('/')),
        }
    }

    /// The object key of `relative` (a `/`-separated path) under the prefix.
    pub fn key(&self, relative: &str) -> String {
        if self.prefix.is_empty() {
            relative.to_string()
        } else {
            format!("{}/{relative}", self.prefix)
        }
    }

    /// The last segment of the prefix (the run id of a run's location), if any.
    pub fn last_segment(&self) -> Option<&str> {
        self.prefix.rsplit('/').next().filter(|s| !s.is_empty())
    }

    /// The `s3://` address of `key` in this bucket.
    pub fn object_url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }
}

impl fmt::Display for S3Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

impl FromStr for S3Url {
    type Err = S3Error;

    /// Parses `s3://bucket` or `s3://bucket/some/prefix[/]`.
    fn from_str(text: &str) -> Result<S3Url, S3Error> {
        let fail = |reason: &str| S3Error::Url {
            url: text.to_string(),
            reason: reason.to_string(),
        };
        let rest = text
            .strip_prefix("s3://")
            .ok_or_else(|| fail("must start with s3:// (e.g. s3://my-bucket/nnb)"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        check_bucket(bucket).map_err(|reason| fail(&reason))?;
        let prefix = prefix.trim_end_matches('/');
        if prefix
            .split('/')
            .any(|s| s.is_empty() && !prefix.is_empty())
        {
            return Err(fail("the prefix has an empty segment (`//`)"));
        }
        if prefix.split('/').any(|s| s == "." || s == "..") {
            return Err(fail("the prefix may not contain `.` or `..` segments"));
        }
        Ok(S3Url {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }
}

/// Checks S3's bucket naming rules: 3-63 characters of lowercase letters, digits,
/// `.` and `-`, starting and ending with a letter or digit.
fn check_bucket(bucket: &str) -> Result<(), String> {
    if bucket.is_empty() {
        return Err("no bucket name after s3://".to_string());
    }
    if !(3..=63).contains(&bucket.len()) {
        return Err(format!(
            "bucket name {bucket:?} must be 3 to 63 characters long"
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    if let Some(bad) = bucket.chars().find(|&c| !allowed(c)) {
        return Err(format!(
            "bucket name {bucket:?} contains {bad:?}; only lowercase letters, digits, '.' and '-' are allowed"
        ));
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge(bucket.chars().next()) || !edge(bucket.chars().last()) {
        return Err(format!(
            "bucket name {bucket:?} must start and end with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let url: S3Url = "s3://my-bucket/nnb/results/".parse().expect("valid");
        assert_eq!(url.bucket, "my-bucket");
        assert_eq!(url.prefix, "nnb/results");
        assert_eq!(url.to_string(), "s3://my-bucket/nnb/results");
        assert_eq!(
            url.join("run-1").key("a/b.json"),
            "nnb/results/run-1/a/b.json"
        );
        assert_eq!(url.join("run-1").last_segment(), Some("run-1"));
        let bare: S3Url = "s3://my-bucket".parse().expect("valid");
        assert_eq!(bare.prefix, "");
        assert_eq!(bare.key("x"), "x");
        assert_eq!(bare.last_segment(), None);
        assert_eq!(bare.to_string(), "s3://my-bucket");
    }

    #[test]
    fn rejects_malformed_urls_saying_why() {
        for (text, why) in [
            ("https://b/x", "must start with s3://"),
            ("s3://", "no bucket name"),
            ("s3:///x", "no bucket name"),
            ("s3://ab", "3 to 63"),
            ("s3://My_Bucket", "contains 'M'"),
            ("s3://-bucket", "start and end"),
            ("s3://bucket/a//b", "empty segment"),
            ("s3://bucket/a/../b", "`..`"),
        ] {
            let err = text.parse::<S3Url>().expect_err(text).to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
