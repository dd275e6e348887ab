//! Whether a plan fits on one dedicated host, checked before anything is created.
//!
//! EC2 itself would refuse the instance that no longer fits, half-way through the launch;
//! moto does not check at all. nnb checks up front against the catalog, and again against
//! what DescribeHosts reports for the allocated host (run-time values win).

use std::collections::BTreeMap;

use nnb_catalog::{Catalog, Family, Size};

use super::{AwsError, HostInfo, HostKind, LaunchPlan, Place, TenantLaunch};

/// Checks `plan` against `catalog`, and against `host` when it is known: per instance type
/// the count must not exceed what fits (AvailableCapacity, else the catalog's instances per
/// host); on a family host the vCPUs together must not exceed the host's.
pub(crate) fn check(
    plan: &LaunchPlan,
    catalog: &Catalog,
    host: Option<&HostInfo>,
) -> Result<(), AwsError> {
    check_placement_group(plan)?;
    let Some(kind) = &plan.host else {
        return match plan.tenants.iter().find(|t| t.place != Place::Default) {
            _ if plan.tenants.is_empty() => Err(AwsError::Plan("no tenants to launch".into())),
            Some(t) => Err(AwsError::Plan(format!(
                "{} is to run on a dedicated host, but the plan allocates none",
                t.name
            ))),
            None => Ok(()),
        };
    };
    if !plan.tenants.iter().any(TenantLaunch::on_host) {
        return Err(AwsError::Plan("no tenants to launch on the host".into()));
    }
    fits(
        kind,
        plan.tenants.iter().filter(|t| t.on_host()),
        catalog,
        host,
    )
}

/// Most running instances of a spread placement group in one availability zone
/// (AWS's limit).
pub const SPREAD_MAX_INSTANCES: usize = 7;

/// A placement group's limits: only for a plan without dedicated hosts, and a
/// spread group holds at most [`SPREAD_MAX_INSTANCES`] instances in the zone.
fn check_placement_group(plan: &LaunchPlan) -> Result<(), AwsError> {
    let Some(group) = &plan.placement_group else {
        return Ok(());
    };
    if plan.host.is_some() || plan.server_host.is_some() {
        return Err(AwsError::Plan(
            "a placement group places default-tenancy instances; this plan allocates a dedicated host".into(),
        ));
    }
    if group.strategy == "spread" && plan.tenants.len() > SPREAD_MAX_INSTANCES {
        return Err(AwsError::Plan(format!(
            "a spread placement group holds at most {SPREAD_MAX_INSTANCES} running instances \
             in a zone ({}), the run launches {}: use partition, or fewer tenants",
            plan.availability_zone,
            plan.tenants.len()
        )));
    }
    Ok(())
}

/// Checks the mirrored servers of `plan` against its second host as [`check`] does the
/// tenants against the first; a plan with servers to place there needs that host, and
/// a second host needs servers.
pub(crate) fn check_servers(
    plan: &LaunchPlan,
    catalog: &Catalog,
    host: Option<&HostInfo>,
) -> Result<(), AwsError> {
    let mut servers = plan
        .tenants
        .iter()
        .filter(|t| t.place == Place::ServerHost)
        .peekable();
    match (&plan.server_host, servers.peek()) {
        (None, None) => Ok(()),
        (None, Some(t)) => Err(AwsError::Plan(format!(
            "{} is to run on the servers' dedicated host, but the plan allocates none",
            t.name
        ))),
        (Some(_), None) => Err(AwsError::Plan(
            "the plan allocates a dedicated host for servers but places none there".into(),
        )),
        (Some(kind), Some(_)) => fits(kind, servers, catalog, host),
    }
}

/// Whether `tenants` fit one host of `kind` (and `host`, as DescribeHosts reports it).
fn fits<'a>(
    kind: &HostKind,
    tenants: impl Iterator<Item = &'a TenantLaunch>,
    catalog: &Catalog,
    host: Option<&HostInfo>,
) -> Result<(), AwsError> {
    let family = host_family(kind, catalog)?;
    let mut per_type: BTreeMap<&str, (&Size, u32)> = BTreeMap::new();
    for tenant in tenants {
        let size = tenant_size(kind, family, &tenant.instance_type, &tenant.name)?;
        per_type.entry(size.name.as_str()).or_insert((size, 0)).1 += 1;
    }
    for (name, (size, count)) in &per_type {
        let runtime = host.and_then(|h| h.available.iter().find(|(t, _)| t == name));
        let (fits, source_of_limit) = match runtime {
            Some((_, n)) => (*n, "DescribeHosts"),
            None => (size.instances_per_host, "the instance catalog"),
        };
        if *count > fits {
            return Err(AwsError::Capacity {
                what: format!("{name} instances"),
                requested: *count,
                fits,
                source_of_limit,
            });
        }
    }
    if let HostKind::Family(_) = kind {
        let requested: u32 = per_type.values().map(|(s, n)| s.vcpus * n).sum();
        // moto reports no HostProperties vCPUs (0): the catalog stands in for them.
        let (fits, source_of_limit) = match host.map(|h| h.total_vcpus).filter(|v| *v > 0) {
            Some(v) => (v, "DescribeHosts"),
            None => (family.host_vcpus, "the instance catalog"),
        };
        if requested > fits {
            return Err(AwsError::Capacity {
                what: format!("vCPUs of family {}", family.name),
                requested,
                fits,
                source_of_limit,
            });
        }
    }
    Ok(())
}

/// The catalog family of the host to allocate.
fn host_family<'c>(host: &HostKind, catalog: &'c Catalog) -> Result<&'c Family, AwsError> {
    match host {
        HostKind::Family(name) => catalog.family(name).ok_or_else(|| {
            AwsError::Plan(format!("instance family {name:?} is not in the catalog"))
        }),
        HostKind::Type(name) => catalog
            .size(name)
            .map(|(family, _)| family)
            .ok_or_else(|| AwsError::Plan(format!("instance type {name:?} is not in the catalog"))),
    }
}

/// The catalog size of one tenant, which must belong to the host.
fn tenant_size<'c>(
    host: &HostKind,
    family: &'c Family,
    instance_type: &str,
    tenant: &str,
) -> Result<&'c Size, AwsError> {
    if let HostKind::Type(host_type) = host {
        if host_type != instance_type {
            return Err(AwsError::Plan(format!(
                "tenant {tenant} is a {instance_type} but the host only runs {host_type}"
            )));
        }
    }
    family.size(instance_type).ok_or_else(|| {
        AwsError::Plan(format!(
            "tenant {tenant}: instance type {instance_type:?} is not a size of family {}",
            family.name
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec2::{SecurityGroupPlan, Tags};
    use nnb_format::Role;

    fn plan(host: HostKind, types: &[&str]) -> LaunchPlan {
        LaunchPlan {
            host: Some(host),
            server_host: None,
            availability_zone: "us-east-1a".into(),
            tenants: types
                .iter()
                .enumerate()
                .map(|(i, t)| TenantLaunch {
                    name: format!("t{i}"),
                    role: if i == 0 { Role::Test } else { Role::Neighbor },
                    instance_type: (*t).into(),
                    place: Place::Host,
                })
                .collect(),
            image_id: "ami-1".into(),
            subnet_id: None,
            key_name: None,
            iam_instance_profile: None,
            security_group: SecurityGroupPlan::Existing(vec![]),
            placement_group: None,
            user_data: String::new(),
            tags: Tags {
                run_id: "r".into(),
                expires_at_unix: 0,
                campaign_id: None,
            },
        }
    }

    fn catalog() -> &'static Catalog {
        Catalog::builtin()
    }

    #[test]
    fn a_full_m5_host_fits_and_one_more_does_not() {
        let per_host = catalog()
            .size("m5.large")
            .map(|(_, s)| s.instances_per_host)
            .unwrap_or(0);
        assert_eq!(per_host, 48, "thesis: 48 m5.large per m5 host");
        let full = vec!["m5.large"; 48];
        check(&plan(HostKind::Family("m5".into()), &full), catalog(), None).unwrap();
        let over = vec!["m5.large"; 49];
        for host in [
            HostKind::Family("m5".into()),
            HostKind::Type("m5.large".into()),
        ] {
            let err = check(&plan(host, &over), catalog(), None).unwrap_err();
            assert!(
                matches!(
                    err,
                    AwsError::Capacity {
                        requested: 49,
                        fits: 48,
                        ..
                    }
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn mixed_sizes_are_limited_by_the_hosts_vcpus() {
        let family = catalog().family("m5").map(|f| f.host_vcpus).unwrap_or(0);
        let xl4 = catalog()
            .size("m5.4xlarge")
            .map(|(_, s)| s.vcpus)
            .unwrap_or(0);
        assert!(family > 0 && xl4 > 0);
        // Fill the host with 4xlarge, then one large more than fits.
        let mut types = vec!["m5.4xlarge"; (family / xl4) as usize];
        check(
            &plan(HostKind::Family("m5".into()), &types),
            catalog(),
            None,
        )
        .unwrap();
        types.push("m5.large");
        let err = check(
            &plan(HostKind::Family("m5".into()), &types),
            catalog(),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, AwsError::Capacity { .. }), "{err}");
    }

    #[test]
    fn runtime_capacity_wins_over_the_catalog() {
        let p = plan(HostKind::Type("m5.large".into()), &["m5.large"; 3]);
        let mut host = HostInfo {
            host_id: "h-1".into(),
            cores: 0,
            sockets: 0,
            total_vcpus: 0,
            instance_family: None,
            instance_type: Some("m5.large".into()),
            available: vec![("m5.large".into(), 2)],
        };
        let err = check(&p, catalog(), Some(&host)).unwrap_err();
        assert!(
            matches!(
                err,
                AwsError::Capacity {
                    fits: 2,
                    source_of_limit: "DescribeHosts",
                    ..
                }
            ),
            "{err}"
        );
        host.available.clear();
        check(&p, catalog(), Some(&host)).unwrap();
    }

    #[test]
    fn wrong_or_unknown_types_are_plan_errors() {
        for (host, types) in [
            (HostKind::Family("m5".into()), vec!["m6g.large"]),
            (HostKind::Type("m5.large".into()), vec!["m5.xlarge"]),
            (HostKind::Family("zz9".into()), vec!["m5.large"]),
            (HostKind::Family("m5".into()), vec![]),
        ] {
            let err = check(&plan(host, &types), catalog(), None).unwrap_err();
            assert!(matches!(err, AwsError::Plan(_)), "{err}");
        }
    }

    #[test]
    fn the_endpoint_is_off_the_host_and_not_counted() {
        // A full host plus an endpoint of a type the catalog does not know: it fits.
        let mut p = plan(HostKind::Family("m5".into()), &["m5.large"; 48]);
        p.tenants.push(TenantLaunch {
            name: "endpoint".into(),
            role: Role::Endpoint,
            instance_type: "c5n.9xlarge".into(),
            place: Place::Default,
        });
        check(&p, catalog(), None).unwrap();
        // An endpoint alone is not a plan for a dedicated host.
        p.tenants.drain(..48);
        let err = check(&p, catalog(), None).unwrap_err();
        assert!(matches!(err, AwsError::Plan(_)), "{err}");
    }
}
