//! The AWS side of nnb, kept out of the node-side agent's build.
//!
//! - [`config`]: the SDK configuration from the standard AWS chain;
//! - [`ec2`]: dedicated hosts and the tenants placed on them, always torn down;
//! - [`userdata`]: the cloud-init user data that installs and starts `nnb agent`;
//! - [`reap`]: finds and removes what a dead run left behind;
//! - [`s3`]: results upload, verification and fetch;
//! - [`actions`]: every AWS API call nnb makes and the IAM action it needs.

pub mod actions;
pub mod config;
pub mod ec2;
pub mod reap;
pub mod s3;
pub mod userdata;
