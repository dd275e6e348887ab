//! Who serves the agent of a running instance. On EC2 it is the instance itself: its
//! user data installs nnb and enables the `nnb-agent` unit, which starts on every boot.
//! moto's instances run nothing, so an end-to-end test of the provider hands it an
//! [`InstanceAgents`] that starts a real `nnb agent` on this machine for each instance
//! that runs and stops it when the instance stops. This is a seam for tests, reached only
//! through [`super::AwsProvider::with_agents`]: no experiment key or flag selects it.

use std::net::SocketAddr;

use crate::client::BoxFuture;

/// Stands in for the agent a tenant's instance runs while it runs.
pub trait InstanceAgents: Send + Sync + std::fmt::Debug {
    /// Instance `instance_id` of tenant `tenant` runs now: start the agent that answers
    /// for it, with bearer `token`, and return its address. Called again for an instance
    /// whose agent never answered (a retried level change): the new agent replaces it.
    fn started<'a>(
        &'a self,
        tenant: &'a str,
        instance_id: &'a str,
        token: &'a str,
    ) -> BoxFuture<'a, Result<SocketAddr, String>>;

    /// Instance `instance_id` is stopping or terminated: its agent goes. An id whose agent
    /// is gone already, or that never had one, is no error.
    fn stopped(&self, instance_id: &str);
}
