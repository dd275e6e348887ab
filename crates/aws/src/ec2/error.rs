//! The errors of the EC2 side: a plan that does not fit, a failed API call, a wait that ran out.

use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// Why an EC2 operation of nnb failed.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// The plan does not fit on one dedicated host; raised before anything is created
    /// (moto does not check capacity, real EC2 would fail half-way through the launch).
    #[error(
        "the plan does not fit on the dedicated host: it needs {requested} {what}, \
         the host holds {fits} (per {source_of_limit})"
    )]
    Capacity {
        /// What is counted: "m5.large instances" or "vCPUs of family m5".
        what: String,
        /// How many the plan needs.
        requested: u32,
        /// How many the host holds.
        fits: u32,
        /// Where the limit comes from: "the instance catalog" or "DescribeHosts".
        source_of_limit: &'static str,
    },
    /// EC2 does not offer an instance type in the zone (DescribeInstanceTypeOfferings);
    /// raised before anything is created.
    #[error(
        "EC2 does not offer {instance_type} in {zone} (DescribeInstanceTypeOfferings): pick \
         another zone or type; nothing was created"
    )]
    NotOffered {
        /// The instance type.
        instance_type: String,
        /// The availability zone.
        zone: String,
    },
    /// The plan itself is wrong (unknown instance type, a type of another family, no tenants).
    #[error("invalid launch plan: {0}")]
    Plan(String),
    /// An AWS API call failed.
    #[error("{call} failed: {message}")]
    Api {
        /// The API call, e.g. "RunInstances".
        call: &'static str,
        /// The AWS error code when the service sent one, e.g. "InsufficientInstanceCapacity".
        code: Option<String>,
        /// The error with its causes, readable by a person.
        message: String,
    },
    /// Waiting for a state ran past its limit.
    #[error("timed out after {waited_s} s waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long it waited.
        waited_s: u64,
    },
    /// A configuration the provider cannot work with.
    #[error("configuration: {0}")]
    Config(String),
    /// Teardown could not remove everything; the report lists what was removed and what failed.
    #[error("teardown incomplete: {}", .0.failures.join("; "))]
    Teardown(Box<super::TeardownReport>),
}

impl AwsError {
    /// Wraps an SDK error of `call`, keeping the service's error code for callers that
    /// treat some codes (e.g. "InvalidInstanceID.NotFound") as success.
    pub(crate) fn api<E, R>(call: &'static str, err: SdkError<E, R>) -> AwsError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let code = err.code().map(str::to_owned);
        let message = match (err.code(), err.message()) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            _ => DisplayErrorContext(&err).to_string(),
        };
        AwsError::Api {
            call,
            code,
            message,
        }
    }

    /// Whether this is an API error whose code says the resource no longer exists.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, AwsError::Api { code: Some(code), .. } if code.contains("NotFound"))
    }
}
