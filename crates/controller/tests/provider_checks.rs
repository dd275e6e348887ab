//! What each provider says of a run before anything is started (where its tenants
//! would run, whether a real run may start, what it would create and cost), and the
//! health wait every provider uses: the provider seam that `nnb run` only shows.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use nnb_agent::{Agent, Token};
use nnb_burn::topology::Topology;
use nnb_controller::provider::{
    self, HostCpus, Preflight, Provider, ProviderContext, Role, Tenant, Verdict,
};
use nnb_experiment::plan::{self, Plan};
use nnb_experiment::Experiment;
use nnb_testkit::Staircase;

/// The tests' shared staircase with `neighbors` neighbors of the provider's size,
/// under `provider` (the lines of a `[provider]` table, or nothing: local).
fn staircase_text(provider: &str, neighbors: usize) -> String {
    Staircase::default()
        .toml()
        .replacen("[[tenants]]", &format!("{provider}\n[[tenants]]"), 1)
        .replacen("count = 2", &format!("count = {neighbors}"), 1)
        .replace("vcpus = 1\n", "")
}

/// The experiment `text` and its plan, on a pretend 64-CPU machine.
fn experiment(text: &str) -> (Experiment, Plan) {
    let exp = nnb_experiment::parse("checks.toml", text, Some(64))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let plan = plan::expand(&exp, exp.provider.host_vcpus().unwrap_or(64));
    (exp, plan)
}

/// [`staircase_text`], checked and planned.
fn staircase(provider: &str, neighbors: usize) -> (Experiment, Plan) {
    experiment(&staircase_text(provider, neighbors))
}

fn provider_of(exp: &Experiment) -> Box<dyn Provider> {
    provider::for_experiment(exp, ProviderContext::default())
        .unwrap_or_else(|e| panic!("no provider: {e}"))
}

/// The local provider places each tenant on CPUs of the host it is given; a
/// static fleet's agents are placed already.
#[test]
fn local_tenants_get_cpus_and_static_ones_run_on_their_hosts() {
    let topology = Topology::host().expect("this machine's topology");
    let allowed: Vec<usize> = topology.online().map(|c| c.id).collect();
    let host = HostCpus {
        topology: &topology,
        allowed: &allowed,
    };
    let (exp, _) = staircase("", 2);
    let specs = exp.tenant_specs();
    let local = provider_of(&exp).placement(&specs, &host).expect("placed");
    assert_eq!(local.cpus.len(), 3);
    for (spec, cpus) in specs.iter().zip(&local.cpus) {
        let cpus = cpus.as_ref().expect("a local tenant is pinned");
        assert_eq!(cpus.len(), spec.vcpus.min(allowed.len()), "{spec:?}");
        assert!(cpus.iter().all(|c| allowed.contains(c)), "{cpus:?}");
    }

    // A static fleet's neighbors stay up: the idle ones are not stopped.
    let text = staircase_text(
        "[provider]\nkind = \"static\"\nhosts = \"hosts\"\ntoken_file = \"token\"",
        2,
    )
    .replacen(
        "[scenario]\n",
        "[scenario]\nunused_neighbors = \"idle\"\n",
        1,
    );
    let (exp, _) = experiment(&text);
    let specs = exp.tenant_specs();
    let fixed = provider_of(&exp).placement(&specs, &host).expect("placed");
    assert_eq!(fixed.cpus, vec![None, None, None]);
    assert_eq!(fixed.elsewhere, "(static host)");
    assert!(fixed.warnings.is_empty());
}

/// A local run creates and costs nothing: it may start, and its dry run lists no
/// resources; only a `results_s3` that this build cannot upload to stops it.
#[test]
fn a_local_run_may_start_unless_its_results_cannot_be_uploaded() {
    let (exp, plan) = staircase("", 1);
    let p = provider_of(&exp)
        .preflight(&exp, &plan, false)
        .expect("checked");
    assert_eq!(
        p,
        Preflight {
            resources: None,
            verdict: Verdict::Go { notes: Vec::new() }
        }
    );
    let (exp, plan) = staircase(
        "[provider]\nkind = \"local\"\nresults_s3 = \"s3://bucket/runs\"",
        1,
    );
    let p = provider_of(&exp)
        .preflight(&exp, &plan, true)
        .expect("checked");
    if cfg!(feature = "aws") {
        assert_eq!(p.verdict, Verdict::Go { notes: Vec::new() });
    } else {
        assert!(
            matches!(&p.verdict, Verdict::Refused(why) if why.contains("without the aws feature")),
            "{p:?}"
        );
    }
}

/// The one health wait of every provider: an agent that answers is waited for
/// until it does; one that never answers fails at the deadline, with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_wait_returns_at_the_first_answer_or_at_the_deadline() {
    let token = "health-wait-secret-0123";
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let agent = Agent::new(
        Token::new(token).expect("token"),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    )
    .expect("agent");
    tokio::spawn(nnb_agent::serve(listener, agent, std::future::pending()));
    let tenant = |addr: SocketAddr| Tenant {
        name: "t".to_string(),
        role: Role::Test,
        addr,
        token: token.to_string(),
        cpus: Vec::new(),
        netns: None,
        ip: None,
        runtime: None,
    };
    let poll = Duration::from_millis(20);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let health = tenant(addr)
        .wait_healthy(deadline, poll)
        .await
        .expect("the agent answers");
    assert!(!health.cpus.is_empty());

    // Nothing listens there (the port was free a moment ago).
    let dead = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let started = tokio::time::Instant::now();
    let wait = Duration::from_millis(300);
    let why = tenant(dead)
        .wait_healthy(started + wait, poll)
        .await
        .expect_err("nothing answers");
    assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!why.is_empty() && why != "no answer", "says why: {why}");
}

/// An aws run: the dry run lists the host, the instances and the security group
/// with the capacity check and the price; a real run needs the cost accepted
/// (`--yes` or a cap above it), a cap below the estimate refuses even with `--yes`,
/// and a plan larger than the host is refused by both.
#[cfg(feature = "aws")]
#[test]
fn an_aws_run_must_fit_its_host_and_have_its_cost_accepted() {
    const AWS: &str = r#"[provider]
kind = "aws"
availability_zone = "us-east-1a"
host = "m5"
instance_type = "m5.large"
image_id = "ami-12c6146b"
subnet_id = "subnet-0123456789abcdef0"
allowed_cidrs = ["10.0.0.0/8"]
preinstalled = "/usr/local/bin/nnb"
"#;
    let (exp, plan) = staircase(AWS, 2);
    let aws = provider_of(&exp);
    let specs = exp.tenant_specs();
    let topology = Topology::host().expect("this machine's topology");
    let host = HostCpus {
        topology: &topology,
        allowed: &[],
    };
    let placed = aws.placement(&specs, &host).expect("placed");
    assert_eq!(placed.cpus, vec![None, None, None]);
    assert_eq!(placed.elsewhere, "(m5.large)");

    let p = aws.preflight(&exp, &plan, false).expect("checked");
    let resources = p.resources.as_ref().expect("an aws run creates resources");
    let rows: Vec<(&str, usize)> = resources
        .rows
        .iter()
        .map(|r| (r.resource.as_str(), r.count))
        .collect();
    assert_eq!(
        rows,
        [
            ("dedicated host", 1),
            ("instance", 3),
            ("security group", 1)
        ]
    );
    assert!(resources.heading.contains("us-east-1a"), "{resources:?}");
    assert!(
        resources.notes[0].starts_with("capacity: ok: 3 x m5.large"),
        "{resources:?}"
    );
    assert!(
        resources.notes[1].starts_with("estimated cost: m5 host at $"),
        "{resources:?}"
    );
    assert_eq!(resources.json["fits"], true);
    assert!(resources.json["cost"]["usd"]
        .as_f64()
        .is_some_and(|usd| usd > 0.0));
    match &p.verdict {
        Verdict::Refused(why) => assert!(why.contains("--yes") && why.contains("max_cost_usd")),
        other => panic!("no consent, yet {other:?}"),
    }
    match aws.preflight(&exp, &plan, true).expect("checked").verdict {
        Verdict::Go { notes } => assert!(notes[0].starts_with("estimated cost: "), "{notes:?}"),
        other => panic!("--yes, yet {other:?}"),
    }

    let capped = AWS.replace("preinstalled", "max_cost_usd = 0.01\npreinstalled");
    let (exp, plan) = staircase(&capped, 2);
    let p = provider_of(&exp)
        .preflight(&exp, &plan, true)
        .expect("checked");
    assert!(
        matches!(&p.verdict, Verdict::Refused(why) if why.contains("above max_cost_usd = $0.01")),
        "{p:?}"
    );
    let notes = &p.resources.expect("resources").notes;
    assert_eq!(
        notes.last().map(String::as_str),
        Some("max_cost_usd: $0.01")
    );

    // 1 test + 48 neighbors = 49 m5.large; an m5 host holds 48.
    let (exp, plan) = staircase(AWS, 48);
    let p = provider_of(&exp)
        .preflight(&exp, &plan, true)
        .expect("checked");
    match &p.verdict {
        Verdict::Unfit {
            refusal,
            dry_run_refusal,
        } => {
            assert!(refusal.ends_with("; nothing was created"), "{refusal}");
            assert!(
                dry_run_refusal.contains("does not fit"),
                "{dry_run_refusal}"
            );
        }
        other => panic!("49 instances on a host of 48, yet {other:?}"),
    }
    let resources = p.resources.expect("resources");
    assert!(
        resources.notes[0].starts_with("capacity: REFUSED: "),
        "{resources:?}"
    );
    assert_eq!(resources.json["fits"], false);
}

/// The seed pair file (test m5.large + endpoint) with its dedicated host swapped
/// for `provider_lines` (the lines from `host` to `endpoint_instance_type`).
fn pair_file(provider_lines: &str) -> (Experiment, Plan) {
    experiment(&pair_text(provider_lines))
}

/// The text of [`pair_file`].
fn pair_text(provider_lines: &str) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/aws/wang-ng-pair.toml"
    );
    let text = std::fs::read_to_string(path).expect("experiments/aws/wang-ng-pair.toml");
    let dedicated = "host = \"m5\"\ninstance_type = \"m5.large\"\n# The pair's other instance.\n\
                     endpoint_instance_type = \"m5.large\"";
    assert!(text.contains(dedicated), "the pair file's provider changed");
    text.replace(dedicated, provider_lines)
}

/// Default tenancy is priced per instance-hour from the catalog, by hand: the test
/// m5.large and the m5.large endpoint at $0.096/h each (AWS on-demand, us-east-1)
/// are $0.192/h; with a t3.micro endpoint ($0.0104/h) $0.1064/h; on the dedicated
/// host the host's $5.069/h plus the endpoint's $0.096/h are $5.165/h. The dry run
/// says so, the estimate is that rate times its hours, and `Resources` carries the
/// fleet's rate and instance count for a campaign's dry run.
#[test]
fn default_tenancy_is_priced_per_instance_hour() {
    let cases = [
        (
            "tenancy = \"default\"\ninstance_type = \"m5.large\"\nendpoint_instance_type = \"m5.large\"\nplacement_group = \"spread\"",
            0.192,
            "2 x m5.large at $0.096/h (us-east-1",
        ),
        (
            "tenancy = \"default\"\ninstance_type = \"m5.large\"\nendpoint_instance_type = \"t3.micro\"",
            0.1064,
            "1 x m5.large at $0.096/h + 1 x t3.micro at $0.0104/h = $0.1064/h (",
        ),
        (
            "host = \"m5\"\ninstance_type = \"m5.large\"\nendpoint_instance_type = \"m5.large\"",
            5.069 + 0.096,
            "m5 host at $5.069/h + 1 x m5.large at $0.096/h = $5.165/h (",
        ),
    ];
    for (lines, hourly, said) in cases {
        let (exp, plan) = pair_file(lines);
        let p = provider_of(&exp)
            .preflight(&exp, &plan, false)
            .expect("checked");
        let r = p.resources.expect("resources");
        assert_eq!(r.instances, 2, "{lines}");
        let got = r.hourly_usd.expect("priced");
        assert!((got - hourly).abs() < 1e-9, "{got} != {hourly}");
        let cost = r.notes.iter().find(|n| n.starts_with("estimated cost: "));
        let cost = cost.expect("a cost note");
        assert!(cost.contains(said), "{said:?} not in {cost}");
        let hours = r.json["cost"]["hours"].as_f64().expect("hours");
        let usd = r.json["cost"]["usd"].as_f64().expect("usd");
        assert!(
            (usd - hourly * hours).abs() < 1e-9,
            "{usd} != {hourly} x {hours}"
        );
        let rows: Vec<&str> = r.rows.iter().map(|r| r.resource.as_str()).collect();
        if lines.starts_with("tenancy") {
            assert!(!rows.contains(&"dedicated host"), "{rows:?}");
            let capped = pair_text(lines).replace("max_cost_usd = 10.0", "max_cost_usd = 0.0001");
            let (exp, plan) = experiment(&capped);
            let p = provider_of(&exp)
                .preflight(&exp, &plan, false)
                .expect("checked");
            assert!(
                matches!(&p.verdict, Verdict::Refused(why) if why.contains("above max_cost_usd")),
                "{:?}",
                p.verdict
            );
        }
        if lines.contains("spread") {
            assert!(rows.contains(&"placement group"), "{rows:?}");
        }
    }
}
