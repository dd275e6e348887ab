//! The AWS SDK configuration from the standard chain, with HTTPS through rustls and ring.
//!
//! Credentials, region and endpoint come from wherever the AWS CLI would find them
//! (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `~/.aws/config`, instance roles ...),
//! so the same binary runs against AWS and against moto.

use aws_config::{BehaviorVersion, ConfigLoader, Region, SdkConfig};
use aws_smithy_http_client::{
    tls::{rustls_provider::CryptoMode, Provider},
    Builder,
};

/// The standard-chain loader with nnb's HTTPS client (rustls + ring, no OpenSSL and no
/// aws-lc build) and the region overridden when `region` is `Some`.
///
/// Callers that must pin more (tests pointing at their own moto server: endpoint and
/// credentials) add it to the loader instead of touching process-wide environment variables.
pub fn loader(region: Option<&str>) -> ConfigLoader {
    let http = Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
    match region {
        Some(region) => loader.region(Region::new(region.to_owned())),
        None => loader,
    }
}

/// SDK config from the standard chain (AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL,
/// AWS_ACCESS_KEY_ID ...), region overridden when `region` is `Some`; HTTPS through rustls+ring.
pub async fn load(region: Option<&str>) -> SdkConfig {
    loader(region).load().await
}
