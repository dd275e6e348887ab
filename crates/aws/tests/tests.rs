//! nnb-aws's integration tests: one test binary (as ripgrep's `tests/tests.rs`),
//! so the crate and any shared helpers are linked once.

mod support;

mod ec2_moto;
mod iam_policy;
mod s3_moto;
mod terraform_templates;
