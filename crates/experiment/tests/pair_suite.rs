//! The pair suite (Wang & Ng, seed 003, §III.C): its file keys, the seed's defaults,
//! its steps in order with stable ids, and its refusals.

use std::time::Duration;

use nnb_agent::jobs::{JobSpec, LoadOptions, StealOptions};
use nnb_experiment::plan::{expand, Plan, REFLECTOR, SINK, TCP_SINK};
use nnb_experiment::{parse, Scenario};
use nnb_format::StepGroup;

fn plan(src: &str) -> Plan {
    let exp = parse("p.toml", src, Some(64)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exp.scenario.kind(), nnb_format::Scenario::PairSuite);
    expand(&exp, 64)
}

fn error(src: &str) -> String {
    match parse("p.toml", src, Some(64)) {
        Ok(_) => panic!("accepted:\n{src}"),
        Err(e) => e.to_string(),
    }
}

const TEST: &str = "[[tenants]]\nname = \"a\"\nrole = \"test\"\n";

/// Only the kind: every measurement at the seed's settings, in the seed's order,
/// CPUTest on the test tenant and then on the endpoint, `repetitions` rounds one
/// after another.
#[test]
fn the_seeds_suite_by_default() {
    let src = format!(
        "name = \"p\"\nrepetitions = 2\nstep_timeout = \"10m\"\n{TEST}[scenario]\nkind = \"pair-suite\"\n"
    );
    let p = plan(&src);
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    let round = |r: u32| {
        [
            format!("cputest/on=a/rep={r}"),
            format!("cputest/on=endpoint/rep={r}"),
            format!("rtt/pair=a,endpoint/rep={r}"),
            format!("tcp/pair=a,endpoint/rep={r}"),
            format!("udp/pair=a,endpoint/rep={r}"),
            format!("badabing/pair=a,endpoint/rep={r}"),
        ]
    };
    let want: Vec<String> = round(1).into_iter().chain(round(2)).collect();
    assert_eq!(ids, want);
    // Stable: the same file expands to the same ids; one job per step.
    assert_eq!(plan(&src), p);
    assert!(p
        .steps
        .iter()
        .all(|s| s.measure.len() == 1 && s.background.is_empty() && s.present == ["a"]));
    assert!(p.needs_endpoint());
    let groups: Vec<StepGroup> = p.steps[..6].iter().map(|s| s.group).collect();
    use StepGroup::*;
    assert_eq!(groups, [Cputest, Cputest, Rtt, Tcp, Udp, Badabing]);
    let levels: Vec<f64> = p.steps[6..].iter().map(|s| s.level).collect();
    assert_eq!(levels, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(p.steps[7].rep, 2);

    let job = |i: usize| {
        (
            &p.steps[i].measure[0].tenant[..],
            &p.steps[i].measure[0].job,
        )
    };
    let steal = |tenant| {
        (
            tenant,
            &JobSpec::Steal {
                cpus: None,
                duration_ms: 3000,
                threshold_ns: 1_000_000,
                options: StealOptions { trace: true },
            },
        )
    };
    assert_eq!(job(0), steal("a"));
    assert_eq!(job(1), steal("endpoint"));
    assert_eq!(
        job(2),
        (
            "a",
            &JobSpec::Rtt {
                target: REFLECTOR.into(),
                probes: 5000,
                rate_hz: 10.0,
                skip: 50,
                msg_size: 64,
                icmp: false,
            }
        )
    );
    assert_eq!(
        job(3),
        (
            "a",
            &JobSpec::Load {
                target: TCP_SINK.into(),
                rate_bps: 10e9,
                streams: 1,
                msg_size: 1400,
                duration_ms: Some(60_000),
                sampling: None,
                options: LoadOptions {
                    tcp: true,
                    bytes: Some(800_000_000),
                    pacing_chunk: None,
                    send_buffer: Some(262_144),
                    recv_buffer: Some(262_144),
                    tcp_info_ms: Some(10),
                    quiet_us: Some(10_000),
                    grain: Some(262_144),
                    link_bps: Some(1e9),
                },
            }
        )
    );
    assert_eq!(
        job(4),
        (
            "a",
            &JobSpec::Load {
                target: SINK.into(),
                rate_bps: 1e9,
                streams: 1,
                msg_size: 1472,
                duration_ms: Some(60_000),
                sampling: None,
                options: LoadOptions {
                    tcp: false,
                    bytes: Some(800_000_000),
                    pacing_chunk: Some(131_072),
                    send_buffer: Some(131_072),
                    recv_buffer: Some(131_072),
                    tcp_info_ms: None,
                    quiet_us: None,
                    grain: Some(262_144),
                    link_bps: Some(1e9),
                },
            }
        )
    );
    assert_eq!(
        job(5),
        (
            "a",
            &JobSpec::Badabing {
                target: REFLECTOR.into(),
                duration_ms: 60_000,
                slot_us: 5000,
                probability: 0.3,
                packets: 3,
                msg_size: 600,
                tau_us: 50_000,
                alpha: 0.005,
            }
        )
    );
    // Estimates: 3 s CPUTests, 5000 probes at 10/s, 800 MB at 1 Gbit/s (6.4 s) for
    // both transfers, one minute of Badabing.
    let est: Vec<Option<Duration>> = p.steps[..6].iter().map(|s| s.estimate).collect();
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    assert_eq!(
        est,
        [s(3), s(3), s(500), ms(6400), ms(6400), s(60)].map(Some)
    );
}

/// Every setting is a key; an emulated network's host_bw is the default link (and
/// UDP rate); `measurements` picks and orders; warm-up rounds come first.
#[test]
fn keys_override_the_seeds_settings() {
    let src = format!(
        r#"name = "p"
repetitions = 1
warmup = 1
[network]
mode = "emulated"
host_bw = "100M"
{TEST}
[scenario]
kind = "pair-suite"
measurements = ["udp", "cputest", "rtt"]
[scenario.cputest]
duration = "500ms"
threshold = "2ms"
trace = false
[scenario.rtt]
probes = 200
rate = 100
skip = 5
msg_size = 100
icmp = true
[scenario.udp]
bytes = "10MB"
duration = "5s"
msg_size = 1400
pacing_chunk = "64K"
socket_buffer = "256K"
grain = "128K"
"#
    );
    let p = plan(&src);
    let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "udp/pair=a,endpoint/warmup=1",
            "cputest/on=a/warmup=1",
            "cputest/on=endpoint/warmup=1",
            "rtt/pair=a,endpoint/warmup=1",
            "udp/pair=a,endpoint/rep=1",
            "cputest/on=a/rep=1",
            "cputest/on=endpoint/rep=1",
            "rtt/pair=a,endpoint/rep=1",
        ]
    );
    assert!(p.steps[..4].iter().all(|s| s.warmup));
    match &p.steps[4].measure[0].job {
        JobSpec::Load {
            rate_bps,
            msg_size,
            duration_ms,
            options,
            ..
        } => {
            assert_eq!(
                (*rate_bps, *msg_size, *duration_ms),
                (100e6, 1400, Some(5000))
            );
            assert_eq!(options.bytes, Some(10_000_000));
            assert_eq!(options.pacing_chunk, Some(65_536));
            assert_eq!(options.send_buffer, Some(262_144));
            assert_eq!(options.grain, Some(131_072));
            assert_eq!(options.link_bps, Some(100e6));
        }
        other => panic!("{other:?}"),
    }
    // 10 MB at 100 Mbit/s: 0.8 s, before the 5 s bound.
    assert_eq!(p.steps[4].estimate, Some(Duration::from_millis(800)));
    assert!(matches!(
        p.steps[5].measure[0].job,
        JobSpec::Steal {
            duration_ms: 500,
            threshold_ns: 2_000_000,
            options: StealOptions { trace: false },
            ..
        }
    ));
    assert!(matches!(
        p.steps[7].measure[0].job,
        JobSpec::Rtt {
            probes: 200,
            skip: 5,
            msg_size: 100,
            icmp: true,
            ..
        }
    ));
    assert_eq!(p.steps[7].estimate, Some(Duration::from_secs(2)));
}

/// The checked suite is the typed scenario the plan is built from.
#[test]
fn the_typed_suite_names_its_measurements() {
    let src = format!(
        "name = \"p\"\nstep_timeout = \"10m\"\n{TEST}[scenario]\nkind = \"pair-suite\"\n[scenario.tcp]\nlink = \"10G\"\nrate = \"5G\"\n"
    );
    let exp = parse("p.toml", &src, Some(4)).unwrap_or_else(|e| panic!("{e}"));
    let Scenario::PairSuite(s) = &exp.scenario else {
        panic!("{:?}", exp.scenario)
    };
    assert_eq!(s.measurements.len(), 5);
    assert_eq!((s.tcp.link_bps, s.tcp.rate_bps), (10e9, 5e9));
    // The UDP link is its own key: still the seed's 1 Gbit/s.
    assert_eq!((s.udp.link_bps, s.udp.rate_bps), (1e9, 1e9));
}

#[test]
fn a_suite_longer_than_the_step_timeout_is_refused() {
    // The RTT series alone takes 5000 / 10 = 500 s, beyond the default 5 minutes.
    let e = error(&format!(
        "name = \"p\"\n{TEST}[scenario]\nkind = \"pair-suite\"\n"
    ));
    assert!(e.contains("rtt/pair=a,endpoint/rep=1 takes"), "{e}");
    assert!(e.contains("step_timeout"), "{e}");
    let e = error(&format!(
        "name = \"p\"\nstep_timeout = \"1m\"\n{TEST}[scenario]\nkind = \"pair-suite\"\nmeasurements = [\"badabing\"]\n"
    ));
    assert!(e.contains("p.toml:2"), "points at step_timeout: {e}");
}

#[test]
fn bad_pair_suites_are_refused_at_their_key() {
    let base =
        format!("name = \"p\"\nstep_timeout = \"10m\"\n{TEST}[scenario]\nkind = \"pair-suite\"\n");
    for (extra, want) in [
        ("measurements = [\"ping\"]\n", "unknown measurement `ping`"),
        ("measurements = [\"rtt\", \"rtt\"]\n", "listed twice"),
        ("measurements = []\n", "the list is empty"),
        (
            "[scenario.rtt]\nprobes = 50\n",
            "drops every one of the 50 probes",
        ),
        ("[scenario.rtt]\nrate = 0.0\n", "rate is probes per second"),
        (
            "[scenario.badabing]\nprobability = 1.5\n",
            "probability is a share",
        ),
        ("[scenario.badabing]\nalpha = -0.1\n", "alpha is a share"),
        (
            "[scenario.udp]\nsocket_buffer = \"0\"\n",
            "socket_buffer = 0 bytes: between 4096",
        ),
        (
            "[scenario.tcp]\nwindow = \"1G\"\n",
            "window = 1073741824 bytes: between",
        ),
        (
            "[scenario.udp]\ngrain = \"1000\"\n",
            "a grain of 1000 bytes",
        ),
        (
            "[scenario.tcp]\nbytes = \"0\"\n",
            "bytes = 0 bytes: between 1",
        ),
        ("[scenario.udp]\nrate = \"fast\"\n", "fast"),
        (
            "[scenario.udp]\nwindow = \"256K\"\n",
            "unknown field `window`",
        ),
        ("[scenario.tcp]\nwindow = \"256Q\"\n", "256Q"),
        (
            "[scenario.cputest]\nthreshold = \"0ms\"\n",
            "threshold must be above zero",
        ),
    ] {
        let e = error(&format!("{base}{extra}"));
        assert!(e.contains(want), "{extra}: {e}");
    }
    let with_neighbor = format!(
        "name = \"p\"\nstep_timeout = \"10m\"\n{TEST}[[tenants]]\nname = \"b\"\nrole = \"neighbor\"\n\
         [scenario]\nkind = \"pair-suite\"\n"
    );
    let e = error(&with_neighbor);
    assert!(
        e.contains("remove the tenants with role = \"neighbor\""),
        "{e}"
    );
}

/// The two pair files: the local one short (a minute of measuring), the aws one at
/// the seed's settings (the defaults, written out), both one round of six steps.
#[test]
fn the_pair_files_expand_to_one_round() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let load = |f: &str| {
        let exp = nnb_experiment::load(&root.join(f), Some(2)).unwrap_or_else(|e| panic!("{e}"));
        (expand(&exp, 2), exp)
    };
    let (local, _) = load("local-wang-ng-pair.toml");
    let ids: Vec<&str> = local.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "cputest/on=test/rep=1",
            "cputest/on=endpoint/rep=1",
            "rtt/pair=test,endpoint/rep=1",
            "tcp/pair=test,endpoint/rep=1",
            "udp/pair=test,endpoint/rep=1",
            "badabing/pair=test,endpoint/rep=1",
        ]
    );
    let measuring: Duration = local.steps.iter().filter_map(|s| s.estimate).sum();
    assert!(measuring < Duration::from_secs(60), "{measuring:?}");
    let (aws, exp) = load("aws/wang-ng-pair.toml");
    let Scenario::PairSuite(s) = &exp.scenario else {
        panic!("{:?}", exp.scenario)
    };
    let defaults =
        format!("name = \"p\"\nstep_timeout = \"15m\"\n{TEST}[scenario]\nkind = \"pair-suite\"\n");
    let seed = parse("p.toml", &defaults, Some(2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        exp.scenario, seed.scenario,
        "the aws file is the seed's settings"
    );
    assert_eq!(s.rtt.probes, 5000);
    assert_eq!(aws.steps.len(), 6);
}
