//! The local provider with the real `nnb` binary: agents start pinned and healthy,
//! run jobs, and leave no process behind, even when their controller is killed
//! with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nnb_agent::jobs::{BurnScope, JobRequest, JobSpec, JobState};
use nnb_controller::provider::{launch_local, LocalOptions, Network, TenantSpec};

use crate::support::agents;
use crate::support::agents::process_gone;
use crate::support::cli::signal;

/// Env var that turns [`helper_parent_of_an_agent`] into the helper process.
const HELPER_ENV: &str = "NNB_TEST_PDEATHSIG_HELPER";

fn options() -> LocalOptions {
    agents::local_options(Network::None)
}

fn specs() -> Vec<TenantSpec> {
    agents::three_tenants(2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_pinned_agents_run_jobs_and_shutdown_leaves_no_process() {
    let fleet = launch_local(&specs(), &options()).await.unwrap();
    assert_eq!(fleet.tenants.len(), 3);
    let pids = fleet.pids();
    assert_eq!(pids.len(), 4, "three tenants and the endpoint");
    for &pid in &pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let at = args.iter().position(|a| a == "--token-file").unwrap();
        assert!(
            !Path::new(&args[at + 1]).exists(),
            "token file {} outlives the agents' start",
            args[at + 1]
        );
    }
    let host_cpus = nnb_burn::placement::allowed_cpus();
    for t in &fleet.tenants {
        let health = t.client().health().await.unwrap();
        assert_eq!(
            health.cpus, t.cpus,
            "agent {} runs on its carved CPUs",
            t.name
        );
        let want = specs().iter().find(|s| s.name == t.name).unwrap().vcpus;
        assert_eq!(
            t.cpus.len(),
            want.min(host_cpus.len()),
            "{}: {:?}",
            t.name,
            t.cpus
        );
    }
    if host_cpus.len() < 4 {
        assert!(
            fleet.warnings.iter().any(|w| w.contains("shared")),
            "4 vCPUs on {} CPUs must be recorded as shared: {:?}",
            host_cpus.len(),
            fleet.warnings
        );
    }
    // A busy neighbor left running: shutdown must stop it and kill its agent.
    let n1 = fleet.neighbors().next().unwrap().client();
    let busy = JobRequest {
        spec: JobSpec::Busy {
            workload: "fpadd".into(),
            threads: 1,
        },
        deadline_ms: 600_000,
    };
    let busy_id = n1.start(&busy).await.unwrap();
    let test = fleet.test().unwrap().client();
    let burn = JobSpec::Burn {
        workload: "int".into(),
        threads: 1,
        ops: Some(50_000),
        duration_ms: None,
        pin: "cores".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: None,
        pool: nnb_format::EventPool::PerThread,
    };
    let id = test
        .start(&JobRequest {
            spec: burn,
            deadline_ms: 60_000,
        })
        .await
        .unwrap();
    let st = test.wait(&id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    let cpu = st.result.unwrap()["placement"]["slots"][0]["cpu"]
        .as_u64()
        .unwrap() as usize;
    assert!(fleet.test().unwrap().cpus.contains(&cpu));
    assert_eq!(n1.status(&busy_id).await.unwrap().state, JobState::Running);

    fleet.shutdown().await.unwrap();
    for pid in pids {
        assert!(process_gone(pid), "agent {pid} still exists after shutdown");
    }
    assert!(n1.health().await.unwrap_err().agent_is_down());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_fleet_kills_the_agents() {
    let fleet = launch_local(&specs()[..1], &options()).await.unwrap();
    let pids = fleet.pids();
    drop(fleet);
    for pid in pids {
        assert!(process_gone(pid), "agent {pid} survived the fleet's drop");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_binary_is_a_clear_error() {
    let opts = LocalOptions {
        nnb_bin: Some("/nonexistent/nnb".into()),
        ..LocalOptions::default()
    };
    let err = launch_local(&specs(), &opts).await.unwrap_err().to_string();
    assert!(err.contains("/nonexistent/nnb"), "{err}");
}

/// Not a test on its own, so ignored: the helper process of
/// `agents_die_when_their_controller_is_killed_with_sigkill`, which runs this test
/// binary with `--ignored` and [`HELPER_ENV`] set. It launches one agent, prints
/// `agent PID` and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the helper process of agents_die_when_their_controller_is_killed_with_sigkill"]
async fn helper_parent_of_an_agent() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let fleet = launch_local(&specs()[..1], &options()).await.unwrap();
    for pid in fleet.pids() {
        println!("agent {pid}");
    }
    println!("ready");
    tokio::time::sleep(Duration::from_secs(120)).await;
    drop(fleet);
}

#[test]
fn agents_die_when_their_controller_is_killed_with_sigkill() {
    let me = std::env::current_exe().unwrap();
    let mut helper = Command::new(&me)
        .args([
            "agent_local::helper_parent_of_an_agent",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(HELPER_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(helper.stdout.take().unwrap());
    let mut agents = Vec::new();
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(pid) = line.strip_prefix("agent ") {
            agents.push(pid.trim().parse::<u32>().unwrap());
        }
        if line.trim() == "ready" {
            break;
        }
    }
    assert!(!agents.is_empty(), "the helper started no agent");
    for &pid in &agents {
        assert!(Path::new(&format!("/proc/{pid}")).exists() && !process_gone(pid));
    }
    // SIGKILL: no destructor, no signal handler runs in the controller.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let alive = agents::still_alive_after(&agents, Duration::from_secs(5));
    assert!(
        alive.is_empty(),
        "agents {alive:?} outlived their SIGKILLed parent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nnb_agent_prints_its_address_serves_and_exits_on_sigterm() {
    let mut agent = CliAgent::start("", &["--cpus", "0"]);
    let addr = agent.addr;
    assert!(addr.ip().is_loopback(), "127.0.0.1 by default: {addr}");
    let client = nnb_controller::client::AgentClient::new(addr, CLI_TOKEN.into());
    assert_eq!(
        client.health().await.unwrap().cpus,
        vec![0],
        "--cpus pins the agent"
    );
    signal(agent.child.id(), "TERM");
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = agent.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "the agent ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn nnb_agent_without_a_readable_token_file_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_nnb"))
        .args(["agent", "--token-file", "/nonexistent/token"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/token"), "{err}");
    assert!(out.stdout.is_empty(), "nothing may be listening");
}

#[test]
fn nnb_agent_on_a_cpu_it_may_not_use_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{CLI_TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nnb"))
        .args(["agent", "--cpus", "4095", "--token-file"])
        .arg(&token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--cpus: CPU 4095 is not available"), "{err}");
    assert!(out.stdout.is_empty(), "nothing may be listening");
}

/// The token every `nnb agent` these tests start reads from its token file.
const CLI_TOKEN: &str = "cli-token-0123456";

/// An `nnb agent` child process, killed when dropped.
struct CliAgent {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl CliAgent {
    /// Starts `nnb agent` on a loopback port with `extra` arguments, through `sh -c`
    /// with `shell_prefix` run first (e.g. `ulimit -n 1024`), and reads the address
    /// it prints.
    fn start(shell_prefix: &str, extra: &[&str]) -> CliAgent {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, format!("{CLI_TOKEN}\n")).unwrap();
        std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("{shell_prefix} exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_nnb"))
            .args(["agent", "--token-file"])
            .arg(&token)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("first line {first:?}"))
            .parse()
            .unwrap();
        CliAgent {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for CliAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// This process's soft limit on open files (`/proc/self/limits`).
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `GET /health` on a new connection, within `timeout`: the answer's status line.
async fn health_on_a_new_connection(
    addr: std::net::SocketAddr,
    timeout: Duration,
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        s.write_all(
            format!(
                "GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {CLI_TOKEN}\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .map_err(|e| format!("send: {e}"))?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let text = String::from_utf8_lossy(&answer);
        Ok(text.lines().next().unwrap_or("").to_string())
    };
    tokio::time::timeout(timeout, probe)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

/// NM8 (reliability review, K2): an agent whose open-files limit is at or below its
/// connection cap (`ulimit -n 1024`, soft and hard, as `prlimit --nofile=1024:1024`)
/// still answers `/health` while 1,100 idle connections are held. Before, accept()
/// failed with EMFILE before the cap's eviction of the oldest began, and a probe
/// waited in the accept backlog until the 10 s header timeout freed connections:
/// here 3 probes of 2 s each all went unanswered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_at_its_open_files_limit_answers_health_under_1100_idle_connections() {
    const IDLE: usize = 1100;
    // Both the idle connections and the probes' ends live in this process.
    let limit = open_files_limit().unwrap_or(0);
    if !nnb_testkit::require(
        limit >= IDLE + 200,
        &format!(
            "needs an open-files limit of {} here, it is {limit}",
            IDLE + 200
        ),
    ) {
        return;
    }
    let agent = CliAgent::start("ulimit -n 1024 &&", &[]);
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(tokio::net::TcpStream::connect(agent.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(health_on_a_new_connection(agent.addr, Duration::from_secs(2)).await);
    }
    assert!(
        answers
            .iter()
            .all(|a| matches!(a, Ok(line) if line.starts_with("HTTP/1.1 200"))),
        "health under {IDLE} idle connections at the fd limit: {answers:?}"
    );
    drop(idle);
}

/// A fake `ethtool` (there is no ENA NIC here): `ethtool -S IFACE` prints an ENA's
/// statistics whose allowance counters rise at every call: on the n-th call
/// bw_in 10n, bw_out 3n, pps 0, conntrack n, linklocal 5.
const FAKE_ETHTOOL: &str = r#"#!/bin/sh
[ "$1" = "-S" ] || exit 64
n=$(cat "$0.calls" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$0.calls"
printf 'NIC statistics:\n     tx_timeout: 0\n     interface_up: 1\n'
printf '     bw_in_allowance_exceeded: %d\n     bw_out_allowance_exceeded: %d\n' $((n * 10)) $((n * 3))
printf '     pps_allowance_exceeded: 0\n     conntrack_allowance_exceeded: %d\n' "$n"
printf '     linklocal_allowance_exceeded: 5\n     queue_0_tx_cnt: 123\n'
"#;

/// Runs a short steal job on an `nnb agent` started with `path` as its PATH and
/// returns the job's result.
async fn steal_job_result(path: &str) -> serde_json::Value {
    let agent = CliAgent::start(&format!("PATH={path};"), &["--cpus", "0"]);
    let client = nnb_controller::client::AgentClient::new(agent.addr, CLI_TOKEN.into());
    let spec = JobSpec::Steal {
        cpus: None,
        duration_ms: 100,
        threshold_ns: 1_000_000,
        options: Default::default(),
    };
    let id = client
        .start(&JobRequest {
            spec,
            deadline_ms: 30_000,
        })
        .await
        .unwrap();
    let st = client.wait(&id, Duration::from_secs(30)).await.unwrap();
    assert_eq!(st.state, JobState::Done, "{st:?}");
    st.result.expect("a steal job's result")
}

/// Review item 42: the agent reads the ENA allowance counters of the
/// default-route interfaces (m of them) around every job. With the fake first on
/// PATH the before and after readings are calls 1..m and m+1..2m, so the counters
/// rose by 10 m², 3 m², 0, m² and 0 while the job ran, and the sample's conditions
/// carry those rises. Without any `ethtool` the job still succeeds, `ena` null.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_records_how_much_the_ena_allowance_counters_rose() {
    let route = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    let default_route = route.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 8 && f[1] == "00000000" && f[7] == "00000000"
    });
    if !nnb_testkit::require(default_route, "the ENA counters are read on a default-route interface; this machine has no IPv4 default route") {
        return;
    }
    let fake = tempfile::tempdir().unwrap();
    let ethtool = fake.path().join("ethtool");
    std::fs::write(&ethtool, FAKE_ETHTOOL).unwrap();
    std::fs::set_permissions(
        &ethtool,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let result = steal_job_result(&format!("{}:{path}", fake.path().display())).await;
    let ena = &result["ena"];
    let m = ena["interfaces"].as_array().map_or(0, Vec::len) as u64;
    assert!(m >= 1, "the default-route interface is read: {ena}");
    let sum = |from: u64, to: u64| (from..=to).sum::<u64>();
    assert_eq!(
        ena["before"]["bw_in_allowance_exceeded"],
        10 * sum(1, m),
        "{ena}"
    );
    assert_eq!(
        ena["after"]["bw_in_allowance_exceeded"],
        10 * sum(m + 1, 2 * m),
        "{ena}"
    );
    let c = nnb_format::StepConditions::of(&result);
    let rose = [
        c.ena_bw_in_allowance_exceeded,
        c.ena_bw_out_allowance_exceeded,
        c.ena_pps_allowance_exceeded,
        c.ena_conntrack_allowance_exceeded,
        c.ena_linklocal_allowance_exceeded,
    ];
    let m2 = m * m;
    assert_eq!(
        rose,
        [Some(10 * m2), Some(3 * m2), Some(0), Some(m2), Some(0)]
    );
    assert!(c.cpu_busy_s.is_some_and(|s| s > 0.0), "{result}");

    let empty = tempfile::tempdir().unwrap();
    let result = steal_job_result(&empty.path().display().to_string()).await;
    assert_eq!(
        result["ena"],
        serde_json::Value::Null,
        "no ethtool: {result}"
    );
    assert!(result["uptime_s"].as_f64().is_some(), "{result}");
}
