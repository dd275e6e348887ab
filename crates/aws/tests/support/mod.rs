//! What nnb-aws' integration tests share: a real moto server per test ([`server`]) and
//! an SDK configuration pointing at it.

pub(crate) mod fault_proxy;
mod server;

use aws_config::SdkConfig;
use aws_sdk_s3::config::Credentials;

pub(crate) use server::Moto;

impl Moto {
    /// An SDK configuration pointing at this server: region us-east-1, static test
    /// credentials, endpoint override (so S3 uses path-style addressing).
    pub(crate) async fn sdk(&self) -> SdkConfig {
        nnb_aws::config::loader(Some("us-east-1"))
            .endpoint_url(&self.endpoint)
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .load()
            .await
    }
}
