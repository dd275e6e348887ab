//! What a plan on aws must say about burst credits before it runs (review item 42;
//! thesis §6.1.2 l.437, l.454): an "up to" size bursts above its baseline bandwidth
//! only while its network I/O credits last (AWS: typically 5 to 60 minutes), and a
//! burstable (T) type runs at its baseline CPU once its CPU credits are spent. A plan
//! with network loads that outlasts the shortest window may measure throttling as
//! contention; `nnb run --dry-run` and the start of a real run say so, with what nnb
//! does about it (the ENA counters per sample, `nnb analyze`'s credits table).

use std::time::Duration;

use nnb_agent::jobs::JobSpec;
use nnb_catalog::Catalog;
use nnb_units::format_duration;

use crate::plan::Plan;
use crate::{Experiment, Provider};

/// The warnings about credits for `plan` of `exp`: none off aws, none for a plan
/// without network loads; else one per instance type the loads use (the tenants',
/// and the shared endpoint's when it differs) whose shortest burst window the plan's
/// estimated duration outlasts, and one per burstable type among them.
pub fn credit_warnings(exp: &Experiment, plan: &Plan) -> Vec<String> {
    let Provider::Aws(aws) = &exp.provider else {
        return Vec::new();
    };
    let loads = plan.steps.iter().any(|s| {
        s.background
            .iter()
            .chain(&s.measure)
            .any(|a| matches!(a.job, JobSpec::Load { .. }))
    });
    if !loads {
        return Vec::new();
    }
    let (duration, _) = plan.estimate(exp.settle);
    let mut types = vec![("the tenants'", aws.instance_type.as_str())];
    if plan.needs_endpoint() && aws.endpoint_instance_type != aws.instance_type {
        types.push(("the endpoint's", aws.endpoint_instance_type.as_str()));
    }
    let catalog = Catalog::builtin();
    let mut out = Vec::new();
    for (whose, name) in types {
        if let Some(w) = catalog
            .size(name)
            .and_then(|(_, s)| Some((s, s.burst_window?)))
        {
            out.extend(network_warning(
                whose,
                name,
                w.0.baseline_bandwidth_bps,
                w.1,
                duration,
            ));
        }
        if let Some(c) = catalog.cpu_credits(name) {
            out.push(format!(
                "{whose} {name} is burstable: it earns {} CPU credits per hour ({}% of each \
                 vCPU, AWS; nnb-catalog) and runs at that baseline once they are spent \
                 (standard mode; unlimited mode charges the surplus instead); `nnb analyze` \
                 estimates its balance per sample from its busy CPU time",
                c.credits_per_hour, c.baseline_pct
            ));
        }
    }
    out
}

/// The warning for a size whose shortest burst window `duration` outlasts.
fn network_warning(
    whose: &str,
    name: &str,
    baseline_bps: f64,
    window: nnb_catalog::BurstWindow,
    duration: Duration,
) -> Option<String> {
    let shortest = Duration::from_secs_f64(window.shortest_s);
    (duration > shortest).then(|| {
        format!(
            "the plan takes about {} (estimated), longer than the network burst window of \
             {whose} {name} ({:.0} to {:.0} min on network I/O credits, AWS; nnb-catalog): \
             loads after its first {:.0} min may run on its {:.2} Gbit/s baseline bandwidth, \
             which reads as contention. Every sample records the ENA allowance counters \
             (ethtool -S) and `nnb analyze`'s credits table flags the levels where they rose \
             or a load ran past {:.0} min",
            format_duration(duration),
            window.shortest_s / 60.0,
            window.longest_s / 60.0,
            window.shortest_s / 60.0,
            baseline_bps / 1e9,
            window.shortest_s / 60.0,
        )
    })
}
