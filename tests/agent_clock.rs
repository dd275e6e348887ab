//! An agent calibrates its clock before it answers, so that a tenant's first
//! measured job costs what its later ones do: the calibration spins for 100 ms
//! (5 windows of 20 ms, `nnb_burn::clock`), which a host-side meter counting the
//! tenant's CPU time would add to whatever job came first (an isolation matrix's b
//! alone undercommitted, b's first job, read 32 % of a CPU for a 25 % demand).
//!
//! The agent's own CPU time (`/proc/PID/stat` utime + stime, in clock ticks) is read
//! around two identical 1 s burns of one thread at a 25 % duty: each should cost
//! about 250 ms of CPU time, the first as much as the second. CPU time, unlike a
//! runtime, does not stretch when other processes share the CPUs.

use std::time::Duration;

use nnb_agent::jobs::{BurnScope, JobRequest, JobSpec, JobState};
use nnb_controller::provider::{LocalProvider, Network, Provider, Role, Serving, TenantSpec};
use nnb_format::EventPool;

use crate::support::agents::local_options;

/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// Process `pid`'s CPU time so far (user + system), seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/stat: {e}"));
    // Fields after the command's closing parenthesis: state is field 3, utime 14,
    // stime 15 (1-based), so 11 and 12 after the state.
    let rest: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = rest[11].parse::<f64>().unwrap() + rest[12].parse::<f64>().unwrap();
    ticks / USER_HZ
}

fn quarter_cpu_burn() -> JobSpec {
    JobSpec::Burn {
        workload: "int".into(),
        threads: 1,
        ops: None,
        duration_ms: Some(1000),
        pin: "none".into(),
        cpus: None,
        scope: BurnScope::Tenant,
        duty: Some(0.25),
        pool: EventPool::PerThread,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_first_job_costs_what_its_second_does() {
    let mut p = LocalProvider::new(local_options(Network::None));
    let specs = [TenantSpec {
        name: "a".into(),
        role: Role::Test,
        vcpus: 1,
        runtime: Default::default(),
    }];
    let fleet = p.launch(&specs, &Serving::None).await.expect("launch");
    // The tenants' agents are started first: the first pid is a's.
    let pid = fleet.pids()[0];
    let client = fleet.tenants[0].client();
    let mut costs = Vec::new();
    for _ in 0..2 {
        let before = cpu_s(pid);
        let id = client
            .start(&JobRequest {
                spec: quarter_cpu_burn(),
                deadline_ms: 30_000,
            })
            .await
            .expect("start the burn");
        let st = client
            .wait(&id, Duration::from_secs(30))
            .await
            .expect("the burn's end");
        assert_eq!(st.state, JobState::Done, "{st:?}");
        costs.push(cpu_s(pid) - before);
    }
    p.shutdown(fleet).await.expect("shutdown");
    let (first, second) = (costs[0], costs[1]);
    // Each ~0.25 s; the ticks are 10 ms. Without the calibration up front the
    // first costs ~0.35 s, 40 % more than the second.
    assert!((0.18..0.32).contains(&second), "{costs:?}");
    assert!(
        (first - second).abs() <= 0.05,
        "the first job cost {first:.2} s of CPU, the second {second:.2} s"
    );
}
