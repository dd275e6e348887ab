//! An aws run before anything is created: the capacity check, the price, whether
//! the user consented to it, and the resources a dry run lists.

use std::collections::BTreeSet;
use std::time::Duration;

use nnb_catalog::Catalog;
use nnb_experiment::plan::Plan;
use nnb_experiment::{AwsHost, AwsSpec, Experiment};
use serde_json::json;

use super::{check_capacity, launch_plan, LAUNCH_OVERHEAD, LEVEL_CHANGE};
use crate::budget::{usd, Consent, CostEstimate};
use crate::provider::{
    Preflight, ProviderError, Resource, Resources, Serving, TenantSpec, Verdict,
};

/// Prices holding `hosts` of `spec`'s dedicated hosts (the tenants', and the
/// mirrored servers' when they have one) for `measuring` (the plan's estimate), plus
/// `level_changes` changes of the tenants present and the launch and teardown overhead.
pub fn estimate_cost(
    spec: &AwsSpec,
    hosts: u32,
    measuring: Duration,
    level_changes: usize,
) -> CostEstimate {
    let family = Catalog::builtin().family(&spec.family);
    let usd_per_hour = family.map_or(0.0, |f| f.host_price_usd_per_hour);
    let changes = LEVEL_CHANGE.saturating_mul(u32::try_from(level_changes).unwrap_or(u32::MAX));
    let hours = (measuring + changes + LAUNCH_OVERHEAD).as_secs_f64() / 3600.0;
    CostEstimate {
        family: spec.family.clone(),
        usd_per_hour,
        hosts,
        price_region: family.map_or_else(String::new, |f| f.price_region.clone()),
        price_as_of: family.map_or_else(String::new, |f| f.price_as_of.clone()),
        level_changes,
        hours,
        usd: usd_per_hour * f64::from(hosts) * hours,
    }
}

/// How often the tenants present change along `plan`: every tenant runs after the
/// launch, and each step whose set differs from the one before is one change.
pub fn level_changes(plan: &Plan, tenants: &[TenantSpec]) -> usize {
    let mut now: BTreeSet<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
    let mut changes = 0;
    for step in &plan.steps {
        let wanted: BTreeSet<&str> = step.present.iter().map(String::as_str).collect();
        if wanted != now {
            changes += 1;
            now = wanted;
        }
    }
    changes
}

/// How the estimate was made, in one line: the price, the hours and what they are
/// made of, the total, and the steps it could not price.
fn cost_line(cost: &CostEstimate, steps_without_estimate: usize) -> String {
    let unknown = if steps_without_estimate > 0 {
        format!(
            " (plus {steps_without_estimate} fixed-work steps of unknown length, not priced: \
             max_cost_usd also stops the run before a step would pass it)"
        )
    } else {
        String::new()
    };
    let changes = if cost.level_changes > 0 {
        format!(
            " + {} changes of the tenants present x {} s",
            cost.level_changes,
            LEVEL_CHANGE.as_secs()
        )
    } else {
        String::new()
    };
    let hosts = match cost.hosts {
        1 => String::new(),
        n => format!("{n} x "),
    };
    format!(
        "{hosts}{} host at {}/h ({}, price as of {}) x {:.2} h (plan{changes} + {} min launch and \
         teardown) = {}{unknown}",
        cost.family,
        usd(cost.usd_per_hour),
        cost.price_region,
        cost.price_as_of,
        cost.hours,
        LAUNCH_OVERHEAD.as_secs() / 60,
        usd(cost.usd)
    )
}

/// Checks capacity and prices `exp`'s `plan` on `spec`'s host (nothing is
/// created), lists what a real run creates, and decides whether it may start: it
/// must fit, and its cost be accepted with `yes` or covered by `max_cost_usd` (a cap
/// below the estimate refuses even with `yes`).
pub fn preflight(
    spec: &AwsSpec,
    exp: &Experiment,
    plan: &Plan,
    yes: bool,
) -> Result<Preflight, ProviderError> {
    let (estimate, unknown) = plan.estimate(exp.settle);
    let tenants = exp.tenant_specs();
    let serving = plan.serving(exp.servers);
    let launch = launch_plan(spec, &tenants, &serving, "dry-run", "dry-run-token")?;
    let hosts = 1 + u32::from(launch.server_host.is_some());
    let cost = estimate_cost(spec, hosts, estimate, level_changes(plan, &tenants));
    let endpoint = serving == Serving::Shared;
    let clients = serving.clients();
    let server_type = spec.server_type();
    let capacity = match check_capacity(&launch) {
        Ok(()) => Ok(format!(
            "ok: {} x {} fit on one {} host (catalog: {} per host){}",
            exp.tenants.len(),
            spec.instance_type,
            spec.host.name(),
            spec.instances_per_host(),
            match launch.server_host {
                Some(_) => format!(
                    ", and their {} servers ({server_type}) on a second one",
                    clients.len()
                ),
                None => String::new(),
            }
        )),
        Err(e) => Err(e.to_string()),
    };
    let line = cost_line(&cost, unknown);
    let verdict = match (&capacity, Consent::of(cost.usd, spec.max_cost_usd, yes)) {
        (Err(why), _) => Verdict::Unfit {
            refusal: format!("{why}; nothing was created"),
            dry_run_refusal: "the plan does not fit on the dedicated host (see capacity \
                              above): use fewer or smaller tenants, or a larger host"
                .to_string(),
        },
        (Ok(_), Consent::Given) => Verdict::Go {
            notes: vec![format!("estimated cost: {line}")],
        },
        (Ok(_), Consent::OverCap { max_usd }) => Verdict::Refused(format!(
            "this run is estimated at {}, above max_cost_usd = {} in [provider]: {line}. Raise \
             max_cost_usd or shorten the plan; nothing was created",
            usd(cost.usd),
            usd(max_usd),
        )),
        (Ok(_), Consent::Missing) => Verdict::Refused(format!(
            "this run allocates a dedicated host, estimated {}: {line}. Run again with --yes to \
             accept, or set max_cost_usd in [provider]; `nnb run --dry-run` shows the plan. \
             Nothing was created",
            usd(cost.usd),
        )),
    };

    let neighbors = exp.neighbors().count();
    let vcpus = spec.tenant_vcpus();
    let (reflector, sink) = spec.serve_ports();
    let udp = if serving != Serving::None {
        format!(", UDP {reflector} and {sink}")
    } else {
        String::new()
    };
    let group = if spec.security_group_ids.is_empty() {
        format!(
            "created for the run: TCP {}{udp} from {}",
            spec.agent_port,
            spec.allowed_cidrs.join(", ")
        )
    } else {
        format!("existing: {}", spec.security_group_ids.join(", "))
    };
    let host_kind = match &spec.host {
        AwsHost::Family(f) => format!("{f} (family host)"),
        AwsHost::Type(t) => format!("{t} (single-type host)"),
    };
    let json = json!({
        "region": spec.region,
        "availability_zone": spec.availability_zone,
        "host": host_kind,
        "instances": { "type": spec.instance_type, "count": exp.tenants.len(), "vcpus_each": vcpus },
        "security_group": group,
        "endpoint": endpoint.then(|| json!({ "type": spec.endpoint_instance_type, "tenancy": "default", "priced": false })),
        "servers": (!clients.is_empty()).then(|| json!({
            "type": server_type,
            "count": clients.len(),
            "clients": clients,
            "tenancy": if launch.server_host.is_some() { "dedicated-host" } else { "default" },
            "priced": launch.server_host.is_some(),
        })),
        "image_id": spec.image_id,
        "cost": cost,
        "steps_without_estimate": unknown,
        "capacity": match &capacity { Ok(m) | Err(m) => m },
        "fits": capacity.is_ok(),
    });
    let zone = match &spec.region {
        Some(r) => format!("{r}, {}", spec.availability_zone),
        None => spec.availability_zone.clone(),
    };
    let mut rows = vec![
        Resource {
            resource: "dedicated host".to_string(),
            what: match launch.server_host {
                Some(_) => format!("{host_kind}: one for the clients, one for their servers"),
                None => host_kind,
            },
            count: hosts as usize,
        },
        Resource {
            resource: "instance".to_string(),
            what: format!(
                "{} ({vcpus} vCPUs), {} on the host: test + {neighbors} neighbors",
                spec.instance_type, spec.image_id
            ),
            count: exp.tenants.len(),
        },
    ];
    if endpoint {
        rows.push(Resource {
            resource: nnb_format::Role::Endpoint.name().to_string(),
            what: format!(
                "{}, default tenancy off the host (sink and reflector; not priced)",
                spec.endpoint_instance_type
            ),
            count: 1,
        });
    }
    if !clients.is_empty() {
        let (place, priced) = match launch.server_host {
            Some(_) => ("on the second dedicated host", "priced with it"),
            None => ("default tenancy", "not priced"),
        };
        rows.push(Resource {
            resource: "server".to_string(),
            what: format!(
                "{server_type}, {place}, one per client ({}; sink and reflector; {priced})",
                match clients {
                    [first, .., last] if clients.len() > 3 => format!("{first}..{last}"),
                    _ => clients.join(", "),
                }
            ),
            count: clients.len(),
        });
    }
    rows.push(Resource {
        resource: "security group".to_string(),
        what: group,
        count: usize::from(spec.security_group_ids.is_empty()),
    });
    let mut notes = vec![
        match &capacity {
            Ok(m) => format!("capacity: {m}"),
            Err(m) => format!("capacity: REFUSED: {m}"),
        },
        format!("estimated cost: {line}"),
    ];
    if let Some(max) = spec.max_cost_usd {
        notes.push(format!("max_cost_usd: {}", usd(max)));
    }
    Ok(Preflight {
        resources: Some(Resources {
            heading: format!("aws resources ({zone}), created by a real run and removed after it:"),
            rows,
            notes,
            json,
        }),
        verdict,
    })
}
