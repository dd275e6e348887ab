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

/// The warnings about credits for `plan` of `exp`, expected to keep its instances
/// loading for `duration` (the plan's estimate, and on aws the time its changes of
/// the tenants present take, which the first tenants' loads run through): none off
/// aws, none for a plan without network loads; else one per instance type the
/// loads use (the tenants', and the shared endpoint's when it differs) that they ask
/// above its baseline bandwidth for longer than its shortest burst window, and one
/// per burstable type among them.
pub fn credit_warnings(exp: &Experiment, plan: &Plan, duration: Duration) -> Vec<String> {
    let Provider::Aws(aws) = &exp.provider else {
        return Vec::new();
    };
    // The most one load asks (a tenant's), and the most a step's loads ask together
    // (what one shared endpoint receives), bit/s.
    let (mut one, mut all) = (0.0_f64, 0.0_f64);
    for s in &plan.steps {
        let rates = s
            .background
            .iter()
            .chain(&s.measure)
            .filter_map(|a| match a.job {
                JobSpec::Load { rate_bps, .. } => Some(rate_bps),
                _ => None,
            });
        let (peak, sum) = rates.fold((0.0_f64, 0.0), |(p, t), r| (p.max(r), t + r));
        one = one.max(peak);
        all = all.max(sum);
    }
    if one <= 0.0 {
        return Vec::new();
    }
    let mut types = vec![("the tenants'", aws.instance_type.as_str(), one)];
    if plan.needs_endpoint() && aws.endpoint_instance_type != aws.instance_type {
        types.push(("the endpoint's", aws.endpoint_instance_type.as_str(), all));
    }
    let catalog = Catalog::builtin();
    let mut out = Vec::new();
    for (whose, name, asked_bps) in types {
        if let Some((size, window)) = catalog
            .size(name)
            .and_then(|(_, s)| Some((s, s.burst_window?)))
        {
            let baseline = size.baseline_bandwidth_bps;
            if asked_bps > baseline && duration > Duration::from_secs_f64(window.shortest_s) {
                out.push(network_warning(
                    whose, name, asked_bps, baseline, window, duration,
                ));
            }
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

/// The warning for a size asked `asked_bps`, above its `baseline_bps`, for longer
/// than the shortest of its burst `window`.
fn network_warning(
    whose: &str,
    name: &str,
    asked_bps: f64,
    baseline_bps: f64,
    window: nnb_catalog::BurstWindow,
    duration: Duration,
) -> String {
    let minutes = |s: f64| s / 60.0;
    format!(
        "the plan takes about {} (estimated), longer than the network burst window of \
         {whose} {name} ({:.0} to {:.0} min on network I/O credits, AWS; nnb-catalog), and \
         its loads ask up to {:.2} Gbit/s, above its {:.2} Gbit/s baseline: after the first \
         {:.0} min they may run on the baseline, which reads as contention. Every sample \
         records the ENA allowance counters (ethtool -S) and `nnb analyze`'s credits table \
         flags the levels where they rose or a load ran past {:.0} min",
        format_duration(duration),
        minutes(window.shortest_s),
        minutes(window.longest_s),
        asked_bps / 1e9,
        baseline_bps / 1e9,
        minutes(window.shortest_s),
        minutes(window.shortest_s),
    )
}
