//! What readers of a run need of its experiment: the manifest's `experiment` is the
//! whole checked experiment as its writer serialized it (`nnb_experiment::Experiment`,
//! units resolved), and [`ExperimentView`] is the part of it the format guarantees,
//! typed, so that `nnb analyze` reads a manifest through
//! `Manifest<_, _, ExperimentView>` without depending on the experiment language.
//!
//! Every field but the scenario's kind may be missing (an older run, another
//! scenario); a field that is there must have its type.

use serde::Deserialize;

use crate::kind::{Role, Scenario};

/// The experiment a run measured, as readers see it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ExperimentView {
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
    /// Where its tenants ran.
    #[serde(default)]
    pub provider: ProviderView,
    /// The tenants' network.
    #[serde(default)]
    pub network: NetworkView,
    /// Every tenant, in file order.
    #[serde(default)]
    pub tenants: Vec<TenantView>,
    /// What was measured.
    pub scenario: ScenarioView,
}

impl ExperimentView {
    /// The first tenant of `role` (the test tenant, or the first neighbor).
    pub fn tenant(&self, role: Role) -> Option<&TenantView> {
        self.tenants.iter().find(|t| t.role == role)
    }
}

/// The experiment's `provider`, as readers see it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ProviderView {
    /// The aws provider's instance type of every tenant.
    #[serde(default)]
    pub instance_type: Option<String>,
}

/// The experiment's `network`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum NetworkView {
    /// All agents on loopback.
    #[default]
    None,
    /// One network namespace per tenant behind an emulated host NIC.
    Emulated {
        /// The emulated NIC's bandwidth, bit/s.
        host_bw_bps: f64,
    },
}

/// One of the experiment's `tenants`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TenantView {
    /// Its name.
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// Its vCPUs.
    #[serde(default)]
    pub vcpus: Option<usize>,
    /// Its instance type, where a run recorded one per tenant.
    #[serde(default)]
    pub instance_type: Option<String>,
}

/// The experiment's `scenario`: its kind and the keys readers use.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ScenarioView {
    /// The scenario kind.
    pub kind: Scenario,
    /// The test tenant's burner (neighbor staircase, thread sweep).
    #[serde(default)]
    pub test: Option<BurnView>,
    /// What a busy neighbor runs (neighbor staircase).
    #[serde(default)]
    pub busy: Option<BusyView>,
    /// The load generators' UDP payload, bytes (load steps, throughput staircase).
    #[serde(default)]
    pub msg_size: Option<usize>,
    /// The rate a node is expected to reach alone, bit/s (throughput staircase).
    #[serde(default)]
    pub baseline_bps: Option<f64>,
}

/// A scenario's `test` burner.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct BurnView {
    /// Its threads.
    #[serde(default)]
    pub threads: Option<usize>,
    /// Its pinning strategy's name, e.g. `cores`.
    #[serde(default)]
    pub pin: Option<String>,
}

/// A staircase's `busy` neighbor job.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct BusyView {
    /// A burner's threads; none for a load, or a burner on all the neighbor's vCPUs.
    #[serde(default)]
    pub threads: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_experiment_reads_what_readers_use_and_ignores_the_rest() {
        let e: ExperimentView = serde_json::from_value(json!({
            "name": "stair", "repetitions": 3,
            "provider": {"kind": "aws", "instance_type": "m5.large", "region": "x"},
            "network": {"mode": "emulated", "host_bw_bps": 1e9, "queue": "fifo"},
            "tenants": [{"name": "t", "role": "test", "vcpus": 2},
                        {"name": "n", "role": "neighbor", "vcpus": 1, "grant": {"cpu": 0.5}}],
            "scenario": {"kind": "neighbor-staircase", "levels": [0, 1],
                "test": {"workload": "fpadd", "threads": 2, "pin": "cores"},
                "busy": {"kind": "burner", "threads": null}},
        }))
        .unwrap();
        assert_eq!(e.name.as_deref(), Some("stair"));
        assert_eq!(e.provider.instance_type.as_deref(), Some("m5.large"));
        assert_eq!(e.network, NetworkView::Emulated { host_bw_bps: 1e9 });
        assert_eq!(e.tenant(Role::Neighbor).map(|t| t.vcpus), Some(Some(1)));
        assert_eq!(e.scenario.kind, Scenario::NeighborStaircase);
        assert_eq!(e.scenario.test.and_then(|t| t.threads), Some(2));
        assert_eq!(e.scenario.busy, Some(BusyView { threads: None }));
        let bare: ExperimentView =
            serde_json::from_value(json!({"scenario": {"kind": "thread-sweep"}})).unwrap();
        assert_eq!(
            (bare.network, bare.tenants.len(), bare.scenario.msg_size),
            (NetworkView::None, 0, None)
        );
    }

    #[test]
    fn an_unknown_scenario_kind_or_role_is_an_error() {
        let err = serde_json::from_value::<ExperimentView>(json!({"scenario": {"kind": "x"}}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown variant `x`"), "{err}");
        let err = serde_json::from_value::<ExperimentView>(json!({
            "tenants": [{"name": "t", "role": "tester"}],
            "scenario": {"kind": "thread-sweep"}}))
        .unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `tester`"),
            "{err}"
        );
        assert!(serde_json::from_value::<ExperimentView>(json!({"name": "no scenario"})).is_err());
    }
}
