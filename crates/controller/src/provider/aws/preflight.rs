//! An aws run before anything is created: the capacity check, the price (the
//! dedicated hosts per host-hour, default-tenancy instances per instance-hour, from
//! the catalog), whether the user consented to it, and the resources a dry run
//! lists.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nnb_aws::ec2::Place;
use nnb_catalog::Catalog;
use nnb_experiment::plan::Plan;
use nnb_experiment::{AwsHost, AwsSpec, Experiment, ServerTenancy};
use serde_json::json;

use super::{check_capacity, launch_plan, LAUNCH_OVERHEAD, LEVEL_CHANGE};
use crate::budget::{usd, Consent, CostEstimate};
use crate::provider::{
    Preflight, ProviderContext, ProviderError, Resource, Resources, Serving, TenantSpec, Verdict,
};

/// Region of the catalog's on-demand instance prices (catalog.toml).
const ON_DEMAND_REGION: &str = "us-east-1";
/// When the catalog's on-demand instance prices were read (catalog.toml).
const ON_DEMAND_AS_OF: &str = "2025, EC2 on-demand";

/// What a fleet costs per hour at the catalog's prices: its dedicated hosts and
/// its default-tenancy instances (each at its type's on-demand price).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPrice {
    /// Dedicated hosts held.
    pub hosts: u32,
    /// One host's price, USD per hour (0 without hosts).
    pub host_usd_per_hour: f64,
    /// The default-tenancy instances together, USD per hour.
    pub instances_usd_per_hour: f64,
    /// The whole fleet, USD per hour: hosts and instances.
    pub usd_per_hour: f64,
    /// How it is made, e.g. `["2 x m5.large at $0.096/h", "m5 host at $5.069/h"]`.
    pub parts: Vec<String>,
    /// Instance types the catalog has no price for (counted as free: say so).
    pub unpriced: Vec<String>,
}

/// The price per hour of `hosts` of `spec`'s dedicated hosts and of the
/// default-tenancy instances whose types are `default_instances` (one entry per
/// instance), from the catalog.
pub fn fleet_price(spec: &AwsSpec, hosts: u32, default_instances: &[String]) -> FleetPrice {
    let catalog = Catalog::builtin();
    let host_usd_per_hour = match hosts {
        0 => 0.0,
        _ => catalog
            .family(&spec.family)
            .map_or(0.0, |f| f.host_price_usd_per_hour),
    };
    let mut parts = Vec::new();
    if hosts > 0 {
        let n = if hosts == 1 {
            String::new()
        } else {
            format!("{hosts} x ")
        };
        parts.push(format!(
            "{n}{} host at {}",
            spec.family,
            per_hour(host_usd_per_hour)
        ));
    }
    let mut per_type: BTreeMap<&str, usize> = BTreeMap::new();
    for t in default_instances {
        *per_type.entry(t.as_str()).or_default() += 1;
    }
    let mut instances_usd_per_hour = 0.0;
    let mut unpriced = Vec::new();
    for (t, n) in per_type {
        match catalog.on_demand_usd_per_hour(t) {
            Some(price) => {
                instances_usd_per_hour += price * n as f64;
                parts.push(format!("{n} x {t} at {}", per_hour(price)));
            }
            None => unpriced.push(format!("{n} x {t}")),
        }
    }
    FleetPrice {
        hosts,
        host_usd_per_hour,
        instances_usd_per_hour,
        usd_per_hour: host_usd_per_hour * f64::from(hosts) + instances_usd_per_hour,
        parts,
        unpriced,
    }
}

/// Prices holding the fleet `price` describes for `measuring` (the plan's
/// estimate), plus `level_changes` changes of the tenants present and the launch
/// and teardown overhead.
pub fn estimate_cost(
    spec: &AwsSpec,
    price: &FleetPrice,
    measuring: Duration,
    level_changes: usize,
) -> CostEstimate {
    let family = Catalog::builtin().family(&spec.family);
    let changes = LEVEL_CHANGE.saturating_mul(u32::try_from(level_changes).unwrap_or(u32::MAX));
    let hours = (measuring + changes + LAUNCH_OVERHEAD).as_secs_f64() / 3600.0;
    CostEstimate {
        family: spec.family.clone(),
        usd_per_hour: price.host_usd_per_hour,
        hosts: price.hosts,
        instances_usd_per_hour: price.instances_usd_per_hour,
        // Instance prices are the catalog's on-demand ones (us-east-1, 2025); a
        // host's carries its own source.
        price_region: family
            .filter(|_| price.hosts > 0)
            .map_or_else(|| ON_DEMAND_REGION.to_string(), |f| f.price_region.clone()),
        price_as_of: family
            .filter(|_| price.hosts > 0)
            .map_or_else(|| ON_DEMAND_AS_OF.to_string(), |f| f.price_as_of.clone()),
        level_changes,
        hours,
        usd: price.usd_per_hour * hours,
    }
}

/// A price per hour as the catalog writes it: `$5.069/h`, `$0.0104/h` (cents at
/// least, at most four decimals).
fn per_hour(amount: f64) -> String {
    let four = format!("{amount:.4}");
    let trimmed = four.trim_end_matches('0');
    let decimals = trimmed.find('.').map_or(0, |dot| trimmed.len() - dot - 1);
    if decimals <= 2 {
        format!("${amount:.2}/h")
    } else {
        format!("${trimmed}/h")
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

/// How the estimate was made, in one line: the prices, the hours and what they
/// are made of, the total, and the steps it could not price.
fn cost_line(cost: &CostEstimate, price: &FleetPrice, steps_without_estimate: usize) -> String {
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
    let per_hour = match price.parts.len() {
        1 => String::new(),
        _ => format!(" = {}", per_hour(price.usd_per_hour)),
    };
    let unpriced = match price.unpriced.as_slice() {
        [] => String::new(),
        u => format!(" ({} not priced: not in the catalog)", u.join(", ")),
    };
    format!(
        "{}{per_hour}{unpriced} ({}, price as of {}) x {:.2} h (plan{changes} + {} min launch and \
         teardown) = {}{unknown}",
        price.parts.join(" + "),
        cost.price_region,
        cost.price_as_of,
        cost.hours,
        LAUNCH_OVERHEAD.as_secs() / 60,
        usd(cost.usd)
    )
}

/// Checks capacity and prices `exp`'s `plan` on `spec`'s host, or with default
/// tenancy (nothing is created), lists what a real run creates, and decides
/// whether it may start: it must fit, and its cost be accepted with `yes` or
/// covered by `max_cost_usd` (a cap below the estimate refuses even with `yes`).
pub fn preflight(
    spec: &AwsSpec,
    exp: &Experiment,
    plan: &Plan,
    yes: bool,
) -> Result<Preflight, ProviderError> {
    let (estimate, unknown) = plan.estimate(exp.settle);
    let tenants = exp.tenant_specs();
    let serving = plan.serving(exp.servers);
    let cx = ProviderContext {
        run_id: "dry-run".to_string(),
        ..ProviderContext::default()
    };
    let launch = launch_plan(spec, &tenants, &serving, &cx, "dry-run-token")?;
    let hosts = u32::from(launch.host.is_some()) + u32::from(launch.server_host.is_some());
    let default_instances: Vec<String> = launch
        .tenants
        .iter()
        .filter(|t| t.place == Place::Default)
        .map(|t| t.instance_type.clone())
        .collect();
    let price = fleet_price(spec, hosts, &default_instances);
    let cost = estimate_cost(spec, &price, estimate, level_changes(plan, &tenants));
    let endpoint = serving == Serving::Shared;
    let clients = serving.clients();
    let server_type = spec.server_type();
    let group = spec.placement_group.map(|g| g.strategy());
    let capacity = match (check_capacity(&launch), &spec.host) {
        (Err(e), _) => Err(e.to_string()),
        (Ok(()), Some(host)) => Ok(format!(
            "ok: {} x {} fit on one {} host (catalog: {} per host){}",
            exp.tenants.len(),
            spec.instance_type,
            host.name(),
            spec.instances_per_host(),
            match launch.server_host {
                Some(_) => format!(
                    ", and their {} servers ({server_type}) on a second one",
                    clients.len()
                ),
                None => String::new(),
            }
        )),
        (Ok(()), None) => Ok(format!(
            "ok: {} default-tenancy instance(s) in {}{}; a real run first checks that the \
             zone offers their types (DescribeInstanceTypeOfferings)",
            launch.tenants.len(),
            spec.availability_zone,
            match group {
                Some(g) => format!(", in one {g} placement group"),
                None => String::new(),
            }
        )),
    };
    let line = cost_line(&cost, &price, unknown);
    let what = match &spec.host {
        Some(_) => "allocates a dedicated host".to_string(),
        None => format!(
            "launches {} default-tenancy instance(s)",
            launch.tenants.len()
        ),
    };
    let verdict = match (&capacity, Consent::of(cost.usd, spec.max_cost_usd, yes)) {
        (Err(why), _) => Verdict::Unfit {
            refusal: format!("{why}; nothing was created"),
            dry_run_refusal: match &spec.host {
                Some(_) => "the plan does not fit on the dedicated host (see capacity \
                            above): use fewer or smaller tenants, or a larger host"
                    .to_string(),
                None => "the plan cannot be placed as written (see capacity above)".to_string(),
            },
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
            "this run {what}, estimated {}: {line}. Run again with --yes to \
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
    let security_group = if spec.security_group_ids.is_empty() {
        format!(
            "created for the run: TCP {}{udp} from {}",
            spec.agent_port,
            spec.allowed_cidrs.join(", ")
        )
    } else {
        format!("existing: {}", spec.security_group_ids.join(", "))
    };
    let host_kind = spec.host.as_ref().map(|h| match h {
        AwsHost::Family(f) => format!("{f} (family host)"),
        AwsHost::Type(t) => format!("{t} (single-type host)"),
    });
    // What one default-tenancy instance of `t` costs, for the rows.
    let priced = |t: &str| match Catalog::builtin().on_demand_usd_per_hour(t) {
        Some(p) => format!("{} each", per_hour(p)),
        None => "not priced: not in the catalog".to_string(),
    };
    let tenancy = match spec.tenancy {
        ServerTenancy::DedicatedHost => "dedicated-host",
        ServerTenancy::Default => "default",
    };
    let json = json!({
        "region": spec.region,
        "availability_zone": spec.availability_zone,
        "tenancy": tenancy,
        "host": host_kind,
        "placement_group": spec.placement_group,
        "instances": { "type": spec.instance_type, "count": exp.tenants.len(), "vcpus_each": vcpus },
        "security_group": security_group,
        "endpoint": endpoint.then(|| json!({
            "type": spec.endpoint_instance_type,
            "tenancy": "default",
            "priced": Catalog::builtin().on_demand_usd_per_hour(&spec.endpoint_instance_type).is_some(),
        })),
        "servers": (!clients.is_empty()).then(|| json!({
            "type": server_type,
            "count": clients.len(),
            "clients": clients,
            "tenancy": if launch.server_host.is_some() { "dedicated-host" } else { "default" },
            "priced": launch.server_host.is_some() || Catalog::builtin().on_demand_usd_per_hour(server_type).is_some(),
        })),
        "image_id": spec.image_id,
        "cost": cost,
        "hourly_usd": price.usd_per_hour,
        "instance_count": launch.tenants.len(),
        "unpriced": price.unpriced,
        "steps_without_estimate": unknown,
        "capacity": match &capacity { Ok(m) | Err(m) => m },
        "fits": capacity.is_ok(),
    });
    let zone = match &spec.region {
        Some(r) => format!("{r}, {}", spec.availability_zone),
        None => spec.availability_zone.clone(),
    };
    let mut rows = Vec::new();
    match &host_kind {
        Some(host_kind) => {
            rows.push(Resource {
                resource: "dedicated host".to_string(),
                what: match launch.server_host {
                    Some(_) => format!("{host_kind}: one for the clients, one for their servers"),
                    None => host_kind.clone(),
                },
                count: hosts as usize,
            });
            rows.push(Resource {
                resource: "instance".to_string(),
                what: format!(
                    "{} ({vcpus} vCPUs), {} on the host: test + {neighbors} neighbors",
                    spec.instance_type, spec.image_id
                ),
                count: exp.tenants.len(),
            });
        }
        None => {
            if let Some(g) = group {
                rows.push(Resource {
                    resource: "placement group".to_string(),
                    what: format!("{g}, created for the run, the instances in it"),
                    count: 1,
                });
            }
            rows.push(Resource {
                resource: "instance".to_string(),
                what: format!(
                    "{} ({vcpus} vCPUs), {}, default tenancy: test + {neighbors} neighbors ({})",
                    spec.instance_type,
                    spec.image_id,
                    priced(&spec.instance_type)
                ),
                count: exp.tenants.len(),
            });
        }
    }
    if endpoint {
        rows.push(Resource {
            resource: nnb_format::Role::Endpoint.name().to_string(),
            what: format!(
                "{}, default tenancy{} (sink and reflector; {})",
                spec.endpoint_instance_type,
                if spec.host.is_some() {
                    " off the host"
                } else {
                    ""
                },
                priced(&spec.endpoint_instance_type)
            ),
            count: 1,
        });
    }
    if !clients.is_empty() {
        let (place, priced) = match launch.server_host {
            Some(_) => ("on the second dedicated host", "priced with it".to_string()),
            None => ("default tenancy", priced(server_type)),
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
        what: security_group,
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
            hourly_usd: Some(price.usd_per_hour),
            instances: launch.tenants.len(),
        }),
        verdict,
    })
}
