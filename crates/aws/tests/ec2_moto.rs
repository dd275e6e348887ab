//! The EC2 provider against a real moto server: the full lifecycle, a plan refused before
//! anything exists, a launch failing part-way, and the sweep of a killed run's leftovers.
//!
//! moto keeps Placement.HostId but neither checks capacity nor keeps the tenancy, and reports
//! no HostProperties cores/vCPUs or AvailableCapacity: the tenancy is checked on the requests
//! (recorded by the test proxy) and capacity comes from the catalog.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::fault_proxy::{Fault, FaultProxy};
use crate::support::Moto;
use aws_config::SdkConfig;
use aws_sdk_ec2::types::{Filter, Instance, InstanceAttributeName, InstanceType, Tag};
use nnb_aws::ec2::{
    tags, AwsError, Ec2, HostKind, LaunchPlan, Lease, Place, PlacementGroupPlan, SecurityGroupPlan,
    Tags, TenantLaunch,
};
use nnb_aws::reap::{sweep, ResourceKind, SweepFilter};
use nnb_aws::userdata::{render, Install, UserDataParams};
use nnb_format::Role;

const ZONE: &str = "us-east-1a";
const AGENT_PORT: u16 = 7070;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// moto, the SDK config pointing at it, and a proxy in front of it.
async fn setup(fault: Option<Fault>) -> Option<(Moto, SdkConfig, FaultProxy)> {
    let moto = Moto::start()?;
    let direct = moto.sdk().await;
    let upstream = direct.endpoint_url().expect("moto endpoint").to_owned();
    let proxy = FaultProxy::start(&upstream, fault).await;
    let via_proxy = direct.into_builder().endpoint_url(&proxy.endpoint).build();
    Some((moto, via_proxy, proxy))
}

/// A subnet in a fresh VPC (10.0.0.0/16) in [`ZONE`].
async fn subnet(client: &aws_sdk_ec2::Client) -> String {
    let vpc = client
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id");
    let subnet = client
        .create_subnet()
        .vpc_id(vpc_id)
        .cidr_block("10.0.1.0/24")
        .availability_zone(ZONE)
        .send()
        .await
        .expect("CreateSubnet");
    subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_owned()
}

fn user_data(run_id: &str) -> String {
    render(&UserDataParams {
        install: Install::Url {
            x86_64: "https://example.com/nnb-x86_64".into(),
            aarch64: "https://example.com/nnb-aarch64".into(),
        },
        agent_port: AGENT_PORT,
        token: "0123456789abcdef".into(),
        tenant: "all".into(),
        run_id: run_id.into(),
    })
    .expect("render user data")
}

/// `n` m5.large tenants (the first is the test node) on an m5 family host.
fn plan(run_id: &str, n: usize, subnet_id: &str, expires_at_unix: u64) -> LaunchPlan {
    LaunchPlan {
        host: Some(HostKind::Family("m5".into())),
        server_host: None,
        availability_zone: ZONE.into(),
        tenants: (0..n)
            .map(|i| TenantLaunch {
                name: if i == 0 {
                    "test".into()
                } else {
                    format!("neighbor-{i}")
                },
                role: if i == 0 { Role::Test } else { Role::Neighbor },
                instance_type: "m5.large".into(),
                place: Place::Host,
            })
            .collect(),
        image_id: "ami-12c6146b".into(),
        subnet_id: Some(subnet_id.into()),
        key_name: None,
        iam_instance_profile: None,
        security_group: SecurityGroupPlan::Create {
            vpc_id: None,
            agent_port: AGENT_PORT,
            probe_ports: vec![7071, 7072],
            cidrs: vec!["10.0.0.0/16".into()],
        },
        placement_group: None,
        user_data: user_data(run_id),
        tags: Tags {
            run_id: run_id.into(),
            expires_at_unix,
            campaign_id: None,
        },
    }
}

fn tag<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Asserts the run tags on one resource.
fn assert_run_tags(what: &str, t: &[Tag], run_id: &str, expires: u64) {
    assert_eq!(tag(t, tags::MANAGED), Some("true"), "{what}: {t:?}");
    assert_eq!(tag(t, tags::RUN_ID), Some(run_id), "{what}: {t:?}");
    assert_eq!(
        tag(t, tags::EXPIRES_AT),
        Some(expires.to_string().as_str()),
        "{what}"
    );
    assert!(
        tag(t, "Name").is_some_and(|n| n.contains(run_id)),
        "{what}: {t:?}"
    );
}

/// Every instance moto knows, in any state.
async fn all_instances(client: &aws_sdk_ec2::Client) -> Vec<Instance> {
    let out = client
        .describe_instances()
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances().iter().cloned())
        .collect()
}

/// Ids of instances not terminated.
async fn live_instances(client: &aws_sdk_ec2::Client) -> Vec<String> {
    all_instances(client)
        .await
        .iter()
        .filter(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str()) != Some("terminated"))
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect()
}

/// Ids of hosts still allocated (not released).
async fn allocated_hosts(client: &aws_sdk_ec2::Client) -> Vec<String> {
    let out = client.describe_hosts().send().await.expect("DescribeHosts");
    out.hosts()
        .iter()
        .filter(|h| h.state().map(|s| s.as_str()) != Some("released"))
        .filter_map(|h| h.host_id().map(str::to_owned))
        .collect()
}

async fn security_group_ids(client: &aws_sdk_ec2::Client) -> Vec<String> {
    let out = client
        .describe_security_groups()
        .send()
        .await
        .expect("DescribeSecurityGroups");
    out.security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_lifecycle_places_tags_describes_and_tears_down() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let expires = now() + 3600;
    let plan = plan("life-1", 4, &subnet_id, expires);
    let mut lease = Lease::new("life-1");

    let launched = ec2.provision(&plan, &mut lease).await.expect("provision");

    // One host, four instances in plan order, each on that host.
    assert_eq!(lease.host_ids().len(), 1);
    let host_id = lease.host_ids()[0].clone();
    assert_eq!(lease.security_group_ids().len(), 1);
    let group_id = lease.security_group_ids()[0].clone();
    let names: Vec<&str> = launched.iter().map(|l| l.tenant.as_str()).collect();
    assert_eq!(names, ["test", "neighbor-1", "neighbor-2", "neighbor-3"]);
    assert_eq!(launched[0].role, Some(Role::Test));
    assert!(launched[1..].iter().all(|l| l.role == Some(Role::Neighbor)));
    let ids: Vec<String> = launched.iter().map(|l| l.instance_id.clone()).collect();
    assert_eq!(lease.instance_ids(), ids.as_slice());
    // moto reports no host properties: the lease keeps what DescribeHosts said.
    assert_eq!(
        lease.host().map(|h| h.host_id.as_str()),
        Some(host_id.as_str())
    );

    // The requests: auto-placement off with a client token; every RunInstances placed on
    // the host with tenancy "host" (moto does not keep the tenancy), one at a time.
    let allocate = proxy.calls("AllocateHosts");
    assert_eq!(allocate.len(), 1);
    assert!(allocate[0].contains("AutoPlacement=off"), "{}", allocate[0]);
    assert!(allocate[0].contains("ClientToken=nnb-"), "{}", allocate[0]);
    assert!(allocate[0].contains("InstanceFamily=m5"), "{}", allocate[0]);
    let runs = proxy.calls("RunInstances");
    assert_eq!(runs.len(), 4);
    for body in &runs {
        assert!(body.contains("Placement.Tenancy=host"), "{body}");
        assert!(body.contains("Placement.Affinity=host"), "{body}");
        assert!(
            body.contains(&format!("Placement.HostId={host_id}")),
            "{body}"
        );
        assert!(
            body.contains("MinCount=1") && body.contains("MaxCount=1"),
            "{body}"
        );
        assert!(
            body.contains(&format!("SecurityGroupId.1={group_id}")),
            "{body}"
        );
    }

    // Through the SDK: placement, user data, tags on instances and volumes.
    let instances = all_instances(&client).await;
    assert_eq!(instances.len(), 4);
    for instance in &instances {
        let id = instance.instance_id().expect("id");
        assert_eq!(
            instance.placement().and_then(|p| p.host_id()),
            Some(host_id.as_str())
        );
        assert_eq!(instance.instance_type(), Some(&InstanceType::M5Large));
        assert_run_tags(id, instance.tags(), "life-1", expires);
        let tenant = tag(instance.tags(), tags::TENANT).expect("tenant tag");
        let role = if tenant == "test" { "test" } else { "neighbor" };
        assert_eq!(tag(instance.tags(), tags::ROLE), Some(role));
        let attribute = client
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await
            .expect("DescribeInstanceAttribute");
        let encoded = attribute
            .user_data()
            .and_then(|u| u.value())
            .expect("user data");
        let decoded = aws_smithy_types::base64::decode(encoded).expect("base64 user data");
        assert_eq!(String::from_utf8(decoded).expect("utf-8"), plan.user_data);
    }
    let volumes = client
        .describe_volumes()
        .filters(
            Filter::builder()
                .name("attachment.instance-id")
                .set_values(Some(ids.clone()))
                .build(),
        )
        .send()
        .await
        .expect("DescribeVolumes");
    assert_eq!(volumes.volumes().len(), 4);
    for volume in volumes.volumes() {
        assert_run_tags("volume", volume.tags(), "life-1", expires);
    }
    let hosts = client
        .describe_hosts()
        .host_ids(&host_id)
        .send()
        .await
        .expect("DescribeHosts");
    let host = &hosts.hosts()[0];
    assert_run_tags("host", host.tags(), "life-1", expires);
    assert_eq!(
        host.host_properties().and_then(|p| p.instance_family()),
        Some("m5")
    );
    assert_eq!(host.auto_placement().map(|a| a.as_str()), Some("off"));
    let groups = client
        .describe_security_groups()
        .group_ids(&group_id)
        .send()
        .await
        .expect("DescribeSecurityGroups");
    let group = &groups.security_groups()[0];
    assert_run_tags("security group", group.tags(), "life-1", expires);
    let mut rules: Vec<(String, i32, Vec<String>)> = group
        .ip_permissions()
        .iter()
        .map(|p| {
            let cidrs = p
                .ip_ranges()
                .iter()
                .filter_map(|r| r.cidr_ip().map(str::to_owned))
                .collect();
            (
                p.ip_protocol().unwrap_or_default().to_owned(),
                p.from_port().unwrap_or(-1),
                cidrs,
            )
        })
        .collect();
    rules.sort();
    let vpc_only = vec!["10.0.0.0/16".to_owned()];
    assert_eq!(
        rules,
        [
            ("tcp".to_owned(), 7070, vpc_only.clone()),
            // The endpoint's TCP sink listens on the UDP sink's port number.
            ("tcp".to_owned(), 7071, vpc_only.clone()),
            ("tcp".to_owned(), 7072, vpc_only.clone()),
            ("udp".to_owned(), 7071, vpc_only.clone()),
            ("udp".to_owned(), 7072, vpc_only),
        ]
    );

    // describe() reads tenants and roles back from the tags.
    let described = ec2.describe(&ids).await.expect("describe");
    let mut names: Vec<String> = described.iter().map(|l| l.tenant.clone()).collect();
    names.sort();
    assert_eq!(names, ["neighbor-1", "neighbor-2", "neighbor-3", "test"]);
    assert!(described
        .iter()
        .all(|l| l.state == "running" || l.state == "pending"));

    // Teardown: everything gone, checked through the SDK; a second teardown has nothing to do.
    let report = lease.teardown(&ec2).await.expect("teardown");
    assert_eq!(report.terminated, ids);
    assert_eq!(report.released, [host_id]);
    assert_eq!(
        report.deleted_security_groups,
        std::slice::from_ref(&group_id)
    );
    assert!(lease.is_empty());
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
    assert!(!security_group_ids(&client).await.contains(&group_id));
    let again = lease.teardown(&ec2).await.expect("second teardown");
    assert_eq!(again, Default::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_runs_beside_the_host_and_is_torn_down_with_it() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let mut plan = plan("endpoint-1", 2, &subnet_id, now() + 3600);
    // A type not in the catalog and not of the host's family: it is not on the host.
    plan.tenants.push(TenantLaunch {
        name: Role::Endpoint.name().into(),
        role: Role::Endpoint,
        instance_type: "c5n.9xlarge".into(),
        place: Place::Default,
    });
    let mut lease = Lease::new("endpoint-1");

    let launched = ec2.provision(&plan, &mut lease).await.expect("provision");

    let host_id = lease.host_ids()[0].clone();
    let roles: Vec<Option<Role>> = launched.iter().map(|l| l.role).collect();
    assert_eq!(
        roles,
        [Some(Role::Test), Some(Role::Neighbor), Some(Role::Endpoint)]
    );
    let runs = proxy.calls("RunInstances");
    assert_eq!(runs.len(), 3);
    for body in &runs[..2] {
        assert!(body.contains("Placement.Tenancy=host"), "{body}");
        assert!(
            body.contains(&format!("Placement.HostId={host_id}")),
            "{body}"
        );
    }
    let endpoint = &runs[2];
    assert!(endpoint.contains("InstanceType=c5n.9xlarge"), "{endpoint}");
    assert!(
        endpoint.contains(&format!("Placement.AvailabilityZone={ZONE}")),
        "{endpoint}"
    );
    assert!(
        !endpoint.contains("Placement.HostId") && !endpoint.contains("Placement.Tenancy"),
        "{endpoint}"
    );
    assert_eq!(launched[2].host_id, None);

    lease.teardown(&ec2).await.expect("teardown");
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
}

/// Mirrored servers (issue 27 item 1, the thesis' setup): a second dedicated host is
/// allocated, each server is launched on it (tenancy host, its host id), the clients
/// stay on the first, and teardown releases both hosts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrored_servers_run_on_a_second_dedicated_host_torn_down_with_the_first() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let mut plan = plan("servers-1", 2, &subnet_id, now() + 3600);
    plan.server_host = Some(HostKind::Family("m5".into()));
    for client in ["test", "neighbor-1"] {
        plan.tenants.push(TenantLaunch {
            name: format!("endpoint@{client}"),
            role: Role::Endpoint,
            instance_type: "m5.xlarge".into(),
            place: Place::ServerHost,
        });
    }
    let mut lease = Lease::new("servers-1");

    let launched = ec2.provision(&plan, &mut lease).await.expect("provision");

    assert_eq!(lease.host_ids().len(), 2, "{:?}", lease.host_ids());
    let (clients_host, servers_host) = (&lease.host_ids()[0], &lease.host_ids()[1]);
    assert_ne!(clients_host, servers_host);
    let hosts: Vec<(&str, Option<&str>)> = launched
        .iter()
        .map(|l| (l.tenant.as_str(), l.host_id.as_deref()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("test", Some(clients_host.as_str())),
            ("neighbor-1", Some(clients_host.as_str())),
            ("endpoint@test", Some(servers_host.as_str())),
            ("endpoint@neighbor-1", Some(servers_host.as_str())),
        ]
    );
    let runs = proxy.calls("RunInstances");
    assert_eq!(runs.len(), 4);
    for body in &runs[2..] {
        assert!(body.contains("InstanceType=m5.xlarge"), "{body}");
        assert!(body.contains("Placement.Tenancy=host"), "{body}");
        assert!(
            body.contains(&format!("Placement.HostId={servers_host}")),
            "{body}"
        );
    }
    assert_eq!(proxy.calls("AllocateHosts").len(), 2);

    lease.teardown(&ec2).await.expect("teardown");
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_larger_than_the_host_is_refused_before_anything_is_created() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    // 49 m5.large: one more than the 48 an m5 host holds.
    let plan = plan("too-big", 49, &subnet_id, now() + 3600);
    let err =
        Ec2::check_capacity(&plan, nnb_catalog::Catalog::builtin()).expect_err("must not fit");
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

    let mut lease = Lease::new("too-big");
    let err = ec2
        .provision(&plan, &mut lease)
        .await
        .expect_err("must not fit");
    assert!(matches!(err, AwsError::Capacity { .. }), "{err}");
    assert!(lease.is_empty());
    assert!(proxy.calls("AllocateHosts").is_empty());
    assert!(proxy.calls("RunInstances").is_empty());
    assert!(proxy.calls("CreateSecurityGroup").is_empty());
    let hosts = client.describe_hosts().send().await.expect("DescribeHosts");
    assert!(hosts.hosts().is_empty(), "{:?}", hosts.hosts());
    assert!(all_instances(&client).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_failing_at_tenant_k_leaves_a_lease_that_tears_down_to_nothing() {
    const K: usize = 3;
    let Some((_moto, sdk, proxy)) = setup(Some(Fault::Refuse(K))).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let plan = plan("k-of-n", 4, &subnet_id, now() + 3600);
    let mut lease = Lease::new("k-of-n");

    let err = ec2
        .provision(&plan, &mut lease)
        .await
        .expect_err("tenant 3 must fail");
    match &err {
        AwsError::Api { call, code, .. } => {
            assert_eq!(*call, "RunInstances");
            assert_eq!(code.as_deref(), Some("InsufficientInstanceCapacity"));
        }
        other => panic!("unexpected error: {other}"),
    }
    // The lease holds the host, the group and the K-1 tenants launched before the failure.
    assert_eq!(lease.instance_ids().len(), K - 1);
    assert_eq!(lease.host_ids().len(), 1);
    assert_eq!(lease.security_group_ids().len(), 1);
    let mut live = live_instances(&client).await;
    live.sort();
    let mut leased = lease.instance_ids().to_vec();
    leased.sort();
    assert_eq!(live, leased);
    assert!(proxy.calls("RunInstances").len() >= K);

    let report = lease.teardown(&ec2).await.expect("teardown");
    assert_eq!(report.terminated.len(), K - 1);
    assert_eq!(report.released.len(), 1);
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_launch_answer_was_lost_is_torn_down_by_its_run_tag() {
    const K: usize = 2;
    let Some((_moto, sdk, _proxy)) = setup(Some(Fault::LoseAnswer(K))).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let plan = plan("lost", 3, &subnet_id, now() + 3600);
    let mut lease = Lease::new("lost");

    ec2.provision(&plan, &mut lease)
        .await
        .expect_err("the answer of tenant 2 is lost");
    // moto launched tenant 2 (once per SDK attempt) but nobody got its id.
    assert_eq!(lease.instance_ids().len(), K - 1);
    let live = live_instances(&client).await;
    assert!(live.len() > K - 1, "{live:?}");

    let report = lease.teardown(&ec2).await.expect("teardown");
    let mut terminated = report.terminated.clone();
    terminated.sort();
    let mut expected = live.clone();
    expected.sort();
    assert_eq!(terminated, expected);
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_removes_a_killed_runs_leftovers_and_nothing_else() {
    let Some((_moto, sdk, _proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;

    // Run "dead" expired a minute ago; its process was killed: the lease is dropped untorn.
    let dead_plan = plan("dead", 2, &subnet_id, now() - 60);
    let mut dead = Lease::new("dead");
    ec2.provision(&dead_plan, &mut dead)
        .await
        .expect("provision dead run");
    let dead_instances = dead.instance_ids().to_vec();
    let dead_host = dead.host_ids()[0].clone();
    let dead_group = dead.security_group_ids()[0].clone();
    drop(dead);
    // Run "alive" is still within its time.
    let alive_plan = plan("alive", 2, &subnet_id, now() + 3600);
    let mut alive = Lease::new("alive");
    ec2.provision(&alive_plan, &mut alive)
        .await
        .expect("provision live run");
    // Resources nnb did not create.
    let foreign = client
        .run_instances()
        .image_id("ami-12c6146b")
        .min_count(1)
        .max_count(1)
        .subnet_id(&subnet_id)
        .send()
        .await
        .expect("RunInstances (untagged)");
    let foreign_instance = foreign.instances()[0].instance_id().expect("id").to_owned();
    let foreign_host = client
        .allocate_hosts()
        .availability_zone(ZONE)
        .instance_family("m5")
        .quantity(1)
        .send()
        .await
        .expect("AllocateHosts (untagged)")
        .host_ids()[0]
        .clone();

    // A dry run lists the dead run's resources and removes nothing.
    let listed = sweep(
        &ec2,
        &SweepFilter {
            run_id: Some("dead".into()),
            campaign_id: None,
            expired_only: false,
            dry_run: true,
        },
    )
    .await
    .expect("dry-run sweep");
    assert!(listed.teardown.is_none());
    let mut found: Vec<(ResourceKind, String)> = listed
        .found
        .iter()
        .map(|r| (r.kind, r.id.clone()))
        .collect();
    found.sort_by(|a, b| a.1.cmp(&b.1));
    let mut expected: Vec<(ResourceKind, String)> = dead_instances
        .iter()
        .map(|i| (ResourceKind::Instance, i.clone()))
        .chain([
            (ResourceKind::Host, dead_host.clone()),
            (ResourceKind::SecurityGroup, dead_group.clone()),
        ])
        .collect();
    expected.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(found, expected);
    assert!(listed
        .found
        .iter()
        .all(|r| r.run_id.as_deref() == Some("dead")));
    assert_eq!(live_instances(&client).await.len(), 5);

    // Sweeping what has expired removes the dead run only.
    let swept = sweep(
        &ec2,
        &SweepFilter {
            run_id: None,
            campaign_id: None,
            expired_only: true,
            dry_run: false,
        },
    )
    .await
    .expect("sweep expired");
    let report = swept.teardown.expect("something was removed");
    let mut terminated = report.terminated.clone();
    terminated.sort();
    let mut dead_sorted = dead_instances.clone();
    dead_sorted.sort();
    assert_eq!(terminated, dead_sorted);
    assert_eq!(report.released, std::slice::from_ref(&dead_host));
    assert_eq!(
        report.deleted_security_groups,
        std::slice::from_ref(&dead_group)
    );

    let live = live_instances(&client).await;
    assert!(dead_instances.iter().all(|i| !live.contains(i)));
    assert!(alive.instance_ids().iter().all(|i| live.contains(i)));
    assert!(live.contains(&foreign_instance));
    let hosts = allocated_hosts(&client).await;
    assert!(!hosts.contains(&dead_host));
    assert!(hosts.contains(&alive.host_ids()[0]) && hosts.contains(&foreign_host));
    let groups = security_group_ids(&client).await;
    assert!(!groups.contains(&dead_group) && groups.contains(&alive.security_group_ids()[0]));

    // Nothing else has expired: a second sweep finds nothing.
    let empty = sweep(
        &ec2,
        &SweepFilter {
            run_id: None,
            campaign_id: None,
            expired_only: true,
            dry_run: false,
        },
    )
    .await
    .expect("second sweep");
    assert!(empty.found.is_empty() && empty.teardown.is_none());
}

/// The state of each of `ids`, in order ("" when moto does not list it).
async fn states(ec2: &Ec2, ids: &[String]) -> Vec<String> {
    let described = ec2.describe(ids).await.expect("describe");
    ids.iter()
        .map(|id| {
            described
                .iter()
                .find(|l| l.instance_id == *id)
                .map(|l| l.state.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// Neighbors that come and go: one StopInstances call stops several tenants, one
/// StartInstances call brings them back, running on the same host, and
/// a lease holding stopped instances, and then a sweep of a killed run's stopped ones,
/// leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_tenants_start_again_on_their_host_and_are_torn_down_and_swept() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let mut lease = Lease::new("come-go");
    let launched = ec2
        .provision(&plan("come-go", 3, &subnet_id, now() + 3600), &mut lease)
        .await
        .expect("provision");
    let host_id = lease.host_ids()[0].clone();
    let ids: Vec<String> = launched.iter().map(|l| l.instance_id.clone()).collect();
    let neighbors = ids[1..].to_vec();

    ec2.stop(&neighbors).await.expect("stop");
    let stops = proxy.calls("StopInstances");
    assert_eq!(stops.len(), 1, "one call for both neighbors");
    assert!(
        stops[0].contains(&format!("InstanceId.1={}", neighbors[0]))
            && stops[0].contains(&format!("InstanceId.2={}", neighbors[1])),
        "{}",
        stops[0]
    );
    assert_eq!(states(&ec2, &ids).await, ["running", "stopped", "stopped"]);

    ec2.start(&neighbors).await.expect("start");
    assert_eq!(proxy.calls("StartInstances").len(), 1);
    let again = ec2.describe(&neighbors).await.expect("describe");
    for l in &again {
        assert_eq!(l.state, "running", "{l:?}");
        assert_eq!(l.host_id.as_deref(), Some(host_id.as_str()), "{l:?}");
        assert!(l.private_ip.is_some(), "{l:?}");
    }

    // A lease holding a stopped instance tears it down too.
    ec2.stop(&neighbors[..1]).await.expect("stop one");
    let report = lease.teardown(&ec2).await.expect("teardown");
    assert_eq!(report.terminated.len(), 3);
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());

    // A killed run whose neighbors were stopped: the sweep finds and removes them.
    let mut dead = Lease::new("come-go-dead");
    let launched = ec2
        .provision(
            &plan("come-go-dead", 2, &subnet_id, now() + 3600),
            &mut dead,
        )
        .await
        .expect("provision");
    ec2.stop(&[launched[1].instance_id.clone()])
        .await
        .expect("stop");
    drop(dead);
    let filter = SweepFilter {
        run_id: Some("come-go-dead".into()),
        campaign_id: None,
        expired_only: false,
        dry_run: false,
    };
    let swept = sweep(&ec2, &filter).await.expect("sweep");
    let report = swept.teardown.expect("something was removed");
    assert_eq!(report.terminated.len(), 2, "{report:?}");
    assert!(live_instances(&client).await.is_empty());
    assert!(allocated_hosts(&client).await.is_empty());
}

/// `plan` with default tenancy: no host, every tenant [`Place::Default`], in a
/// `strategy` placement group (none when `None`), tagged with `campaign`.
fn default_plan(
    run_id: &str,
    n: usize,
    subnet_id: &str,
    strategy: Option<&str>,
    campaign: Option<&str>,
) -> LaunchPlan {
    let mut p = plan(run_id, n, subnet_id, now() + 3600);
    p.host = None;
    for t in &mut p.tenants {
        t.place = Place::Default;
    }
    p.placement_group = strategy.map(|s| PlacementGroupPlan {
        strategy: s.to_string(),
        partitions: (s == "partition").then_some(2),
    });
    p.tags.campaign_id = campaign.map(str::to_owned);
    p
}

/// Names of the placement groups moto holds.
async fn placement_groups(client: &aws_sdk_ec2::Client) -> Vec<String> {
    let out = client
        .describe_placement_groups()
        .send()
        .await
        .expect("DescribePlacementGroups");
    out.placement_groups()
        .iter()
        .filter_map(|g| g.group_name().map(str::to_owned))
        .collect()
}

/// Everything moto holds that a run may leave: live instances, hosts, security
/// groups other than the VPCs' defaults, placement groups.
async fn held(client: &aws_sdk_ec2::Client) -> (usize, usize, usize, usize) {
    let out = client
        .describe_security_groups()
        .send()
        .await
        .expect("DescribeSecurityGroups");
    let nnb_groups = out
        .security_groups()
        .iter()
        .filter(|g| tag(g.tags(), tags::MANAGED).is_some())
        .count();
    (
        live_instances(client).await.len(),
        allocated_hosts(client).await.len(),
        nnb_groups,
        placement_groups(client).await.len(),
    )
}

/// Default tenancy (issue 26): three instances launched with no host, in the
/// run's spread placement group (created tagged, named by the run), each
/// recorded with its zone and subnet; the teardown leaves nothing: 0 instances,
/// 0 hosts, 0 nnb security groups, 0 placement groups.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_tenancy_launches_into_a_placement_group_and_leaves_nothing() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let plan = default_plan("dt-1", 3, &subnet_id, Some("spread"), Some("camp-1"));
    let mut lease = Lease::new("dt-1");

    let launched = ec2.provision(&plan, &mut lease).await.expect("provision");

    assert!(lease.host_ids().is_empty(), "{:?}", lease.host_ids());
    assert_eq!(lease.placement_groups(), ["nnb-dt-1"]);
    assert!(proxy.calls("AllocateHosts").is_empty());
    assert_eq!(proxy.calls("DescribeInstanceTypeOfferings").len(), 1);
    let create = proxy.calls("CreatePlacementGroup");
    assert_eq!(create.len(), 1);
    assert!(create[0].contains("Strategy=spread"), "{}", create[0]);
    for body in proxy.calls("RunInstances") {
        assert!(body.contains("Placement.GroupName=nnb-dt-1"), "{body}");
        assert!(!body.contains("Placement.HostId"), "{body}");
        assert!(!body.contains("Placement.Tenancy=host"), "{body}");
    }
    for l in &launched {
        assert_eq!(l.host_id, None, "{l:?}");
        assert_eq!(l.availability_zone.as_deref(), Some(ZONE), "{l:?}");
        assert_eq!(l.subnet_id.as_deref(), Some(subnet_id.as_str()), "{l:?}");
    }
    for instance in all_instances(&client).await {
        let placement = instance.placement().expect("placement");
        assert_eq!(placement.group_name(), Some("nnb-dt-1"));
        assert!(placement.host_id().map_or(true, str::is_empty));
        assert_eq!(tag(instance.tags(), tags::CAMPAIGN), Some("camp-1"));
    }
    let groups = client
        .describe_placement_groups()
        .send()
        .await
        .expect("DescribePlacementGroups");
    let group = &groups.placement_groups()[0];
    assert_run_tags(
        "placement group",
        group.tags(),
        "dt-1",
        plan.tags.expires_at_unix,
    );
    assert_eq!(tag(group.tags(), tags::CAMPAIGN), Some("camp-1"));
    assert_eq!(held(&client).await, (3, 0, 1, 1));

    let report = lease.teardown(&ec2).await.expect("teardown");
    assert_eq!(report.terminated.len(), 3);
    assert_eq!(report.deleted_placement_groups, ["nnb-dt-1"]);
    assert!(lease.is_empty());
    assert_eq!(held(&client).await, (0, 0, 0, 0));
}

/// A type the zone does not offer is refused before anything is created: moto
/// (like EC2) offers no m5.large in us-east-1e.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_the_zone_does_not_offer_is_refused_before_anything_is_created() {
    let Some((_moto, sdk, proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let mut plan = default_plan("dt-2", 2, &subnet_id, Some("partition"), None);
    plan.availability_zone = "us-east-1e".into();
    let mut lease = Lease::new("dt-2");
    let err = ec2
        .provision(&plan, &mut lease)
        .await
        .expect_err("m5.large is not offered in us-east-1e");
    assert!(
        matches!(&err, AwsError::NotOffered { instance_type, zone }
            if instance_type == "m5.large" && zone == "us-east-1e"),
        "{err}"
    );
    assert!(err.to_string().contains("nothing was created"), "{err}");
    assert!(lease.is_empty());
    assert!(proxy.calls("CreatePlacementGroup").is_empty());
    assert!(proxy.calls("CreateSecurityGroup").is_empty());
    assert!(proxy.calls("RunInstances").is_empty());
    assert_eq!(held(&client).await, (0, 0, 0, 0));
}

/// What a killed campaign's rounds left (two runs tagged camp-a) is swept by the
/// campaign sweep; a run of another campaign (camp-b) is left alone, and goes
/// with its own sweep after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_campaign_sweep_removes_its_rounds_leftovers_and_no_other_campaigns() {
    let Some((_moto, sdk, _proxy)) = setup(None).await else {
        return;
    };
    let client = aws_sdk_ec2::Client::new(&sdk);
    let ec2 = Ec2::new(&sdk);
    let subnet_id = subnet(&client).await;
    let mut ours = Vec::new();
    for (run, campaign) in [("a-r0", "camp-a"), ("a-r1", "camp-a"), ("b-r0", "camp-b")] {
        let plan = default_plan(run, 2, &subnet_id, Some("partition"), Some(campaign));
        // The controller dies: the lease is dropped without a teardown.
        let mut lease = Lease::new(run);
        let launched = ec2.provision(&plan, &mut lease).await.expect("provision");
        if campaign == "camp-a" {
            ours.extend(launched.into_iter().map(|l| l.instance_id));
        }
    }
    assert_eq!(held(&client).await, (6, 0, 3, 3));

    let report = nnb_aws::reap::sweep_campaign(&ec2, "camp-a")
        .await
        .expect("sweep");
    let kinds = |k| report.found.iter().filter(|r| r.kind == k).count();
    assert_eq!(kinds(ResourceKind::Instance), 4);
    assert_eq!(kinds(ResourceKind::SecurityGroup), 2);
    assert_eq!(kinds(ResourceKind::PlacementGroup), 2);
    assert!(report
        .found
        .iter()
        .all(|r| r.campaign_id.as_deref() == Some("camp-a")));
    let mut terminated = report.teardown.expect("torn down").terminated;
    terminated.sort();
    ours.sort();
    assert_eq!(terminated, ours);
    // camp-b's run is untouched: 2 instances, its group and placement group.
    assert_eq!(held(&client).await, (2, 0, 1, 1));
    assert_eq!(placement_groups(&client).await, ["nnb-b-r0"]);

    nnb_aws::reap::sweep_campaign(&ec2, "camp-b")
        .await
        .expect("sweep b");
    assert_eq!(held(&client).await, (0, 0, 0, 0));
}
