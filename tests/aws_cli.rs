//! `nnb run` with `[provider] kind = "aws"`, `nnb aws sweep` and `nnb fetch`
//! against a real moto server per test.
//!
//! moto runs no user data, so the tenants' agents never answer: these tests drive
//! every way a launch ends without a healthy fleet (dry run, a plan that does not
//! fit, health timeout, Ctrl-C, `kill -9` then sweep, no credentials) and check
//! with boto3 that nothing is left running or allocated. The S3 round trip uses a
//! local run with `results_s3`. Skipped (with the reason) when moto is missing,
//! failing instead under `CI`.

#![cfg(feature = "aws")]

use crate::support::moto;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::moto::{Moto, ZONE};

use crate::support::cli::{signal, NNB};

/// An aws staircase: a test node and `neighbors` m5.large neighbors on an m5 host.
fn experiment(dir: &Path, moto: &Moto, neighbors: usize, health_timeout: &str) -> PathBuf {
    let subnet = moto.default_subnet();
    let text = format!(
        r#"name = "aws-moto"
repetitions = 1
settle = "0s"

[provider]
kind = "aws"
availability_zone = "{ZONE}"
host = "m5"
instance_type = "m5.large"
image_id = "ami-12c6146b"
subnet_id = "{subnet}"
allowed_cidrs = ["10.0.0.0/8"]
preinstalled = "/usr/local/bin/nnb"
health_timeout = "{health_timeout}"
expires_after = "1h"

[[tenants]]
role = "test"

[[tenants]]
role = "neighbor"
count = {neighbors}

[scenario]
kind = "neighbor-staircase"

[scenario.test]
duration = "1s"
"#
    );
    let path = dir.join("aws.toml");
    std::fs::write(&path, text).expect("write the experiment");
    path
}

/// `nnb ARGS` against `moto`, in `dir`.
fn nnb(dir: &Path, moto: &Moto, args: &[&str]) -> Command {
    let mut c = Command::new(NNB);
    c.current_dir(dir).args(args).envs(moto.env());
    c
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The run ids under `results`.
fn runs(results: &Path) -> Vec<String> {
    std::fs::read_dir(results)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every file in experiments/aws/ and experiments/thesis/ dry-runs without touching
/// AWS: the plan, the resources, the capacity check that passes and a priced estimate.
#[test]
fn every_aws_example_and_thesis_file_dry_runs_with_a_cost() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    for dir in ["aws", "thesis"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("experiments/{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        assert!(
            !files.is_empty(),
            "no experiment files in experiments/{dir}"
        );
        for file in files {
            let out = Command::new(NNB)
                .args(["run", &file.to_string_lossy(), "--dry-run"])
                .output()
                .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"));
            let (stdout, stderr) = text(&out);
            assert!(out.status.success(), "{}: {stderr}", file.display());
            assert!(
                stdout.contains("capacity: ok"),
                "{}: {stdout}",
                file.display()
            );
            // The line's total is after its last " = $" (a rate may come before).
            let usd: f64 = stdout
                .split_once("estimated cost: ")
                .and_then(|(_, cost)| cost.lines().next()?.rsplit_once(" = $"))
                .and_then(|(_, usd)| usd.split_whitespace().next()?.parse().ok())
                .unwrap_or_else(|| panic!("{}: no estimated cost in {stdout}", file.display()));
            assert!(usd > 0.0, "{}: estimated cost ${usd}", file.display());
        }
    }
}

/// The `.toml` files of directory `dir`, sorted.
fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// `nnb run FILE --dry-run` (with `--json` when `json`), which must succeed.
fn dry_run(file: &Path, json: bool) -> String {
    let mut cmd = Command::new(NNB);
    cmd.args(["run", &file.to_string_lossy(), "--dry-run"]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NNB}: {e}"));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{}: {stderr}", file.display());
    stdout
}

/// Every seed campaign file (experiments/wang-ng/, the thesis files with a
/// `[campaign]`) dry-runs with its rounds, instance-hours and cost printed, and its
/// header comment gives the same numbers (the rounds, the instance-hours and the
/// dollars to the cent); the local campaign file (experiments/local-campaign.toml)
/// parses into its 2 lanes of 4 rounds.
#[test]
fn every_campaign_file_dry_runs_with_rounds_instance_hours_and_cost() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let mut files = toml_files(&root.join("wang-ng"));
    assert_eq!(
        files.len(),
        4,
        "spatial and temporal, t3.small and m5.large"
    );
    files.extend(toml_files(&root.join("thesis")).into_iter().filter(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| t.lines().any(|l| l == "[campaign]"))
    }));
    assert_eq!(
        files.len(),
        6,
        "the thesis' default-tenancy sample, cpu_burn and primes"
    );
    for file in files {
        let name = file.display();
        let stdout = dry_run(&file, false);
        for want in ["total rounds", "instance-hours", "estimated cost"] {
            assert!(stdout.contains(want), "{name}: no {want:?} in {stdout}");
        }
        let v: serde_json::Value =
            serde_json::from_str(&dry_run(&file, true)).expect("dry-run JSON");
        let c = &v["campaign"];
        let rounds = c["total_rounds"].as_u64().unwrap_or(0);
        let hours = c["instance_hours"].as_f64().unwrap_or(0.0);
        let usd = c["usd"].as_f64().unwrap_or(0.0);
        assert!(rounds > 0 && hours > 0.0 && usd > 0.0, "{name}: {c}");
        // The header's comment lines as one text.
        let header: String = std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| l.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ");
        for want in [
            format!("{rounds} rounds"),
            format!("{hours:.2} instance-hours"),
            format!("${usd:.2}"),
        ] {
            assert!(
                header.contains(&want),
                "{name}: the header does not say {want:?}"
            );
        }
    }
    let v: serde_json::Value =
        serde_json::from_str(&dry_run(&root.join("local-campaign.toml"), true))
            .expect("dry-run JSON");
    let c = &v["campaign"];
    assert_eq!(
        (
            &c["kind"],
            &c["zones"],
            &c["rounds_per_zone"],
            &c["total_rounds"]
        ),
        (
            &serde_json::json!("spatial"),
            &serde_json::json!(["a", "b"]),
            &serde_json::json!(4),
            &serde_json::json!(8)
        ),
        "{c}"
    );
}

#[test]
fn dry_run_prints_resources_and_cost_and_creates_nothing() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path(), &moto, 2, "3s");
    let out = nnb(dir.path(), &moto, &["run", "--dry-run"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in [
        "dedicated host",
        "m5 (family host)",
        "m5.large (2 vCPUs)",
        "security group",
        "capacity: ok: 3 x m5.large",
        "estimated cost: m5 host at $",
        "+ 3 changes of the tenants present x 90 s",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    let out = nnb(dir.path(), &moto, &["run", "--dry-run", "--json"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("dry-run JSON");
    assert_eq!(v["cloud"]["fits"], true);
    assert_eq!(v["cloud"]["instances"]["count"], 3);
    let usd = v["cloud"]["cost"]["usd"].as_f64().unwrap_or(0.0);
    let per_hour = v["cloud"]["cost"]["usd_per_hour"].as_f64().unwrap_or(0.0);
    // At least the 10 minutes of launch and teardown are priced.
    assert!(per_hour > 0.0 && usd >= per_hour / 6.0, "{v}");
    // The neighbors come and go: step 1 stops both (0 neighbors), levels 1 and 2
    // start one each.
    assert_eq!(v["cloud"]["cost"]["level_changes"], 3, "{v}");
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
    assert!(runs(&dir.path().join("results")).is_empty());
}

#[test]
fn a_plan_larger_than_the_host_is_refused_before_anything_is_created() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    // 1 test + 48 neighbors = 49 m5.large; an m5 host holds 48.
    let exp = experiment(dir.path(), &moto, 48, "3s");
    let out = nnb(dir.path(), &moto, &["run", "--yes"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("does not fit"), "{stderr}");
    assert!(stderr.contains("nothing was created"), "{stderr}");
    let dry = nnb(dir.path(), &moto, &["run", "--dry-run"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    assert_eq!(dry.status.code(), Some(2));
    assert!(
        text(&dry).0.contains("capacity: REFUSED"),
        "{}",
        text(&dry).0
    );
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
    assert!(runs(&dir.path().join("results")).is_empty());
}

#[test]
fn a_run_without_accepted_cost_is_refused() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path(), &moto, 1, "3s");
    let out = nnb(dir.path(), &moto, &["run"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    assert!(stderr.contains("max_cost_usd"), "{stderr}");
    // A cap below the estimate refuses too, even with --yes.
    let capped = std::fs::read_to_string(&exp)
        .expect("read")
        .replace("expires_after", "max_cost_usd = 0.01\nexpires_after");
    std::fs::write(&exp, capped).expect("write");
    let out = nnb(dir.path(), &moto, &["run", "--yes"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("above max_cost_usd"),
        "{}",
        text(&out).1
    );
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
}

#[test]
fn agents_that_never_answer_fail_the_run_and_everything_is_torn_down() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path(), &moto, 1, "3s");
    let out = nnb(dir.path(), &moto, &["run", "--yes", "--quiet"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("did not answer their health check within 3s"),
        "{stderr}"
    );
    assert!(stderr.contains("2 instance(s) launched"), "{stderr}");
    assert!(
        stderr.contains("torn down: 2 instance(s) terminated, 1 host(s) released"),
        "{stderr}"
    );
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
    // The manifest says what ran where.
    let results = dir.path().join("results");
    let ids = runs(&results);
    assert_eq!(ids.len(), 1);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join(&ids[0]).join("manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    let session = &manifest["sessions"][0];
    assert_eq!(session["status"], "failed");
    let cloud = &session["cloud"];
    assert_eq!(cloud["availability_zone"], ZONE);
    assert_eq!(cloud["instances"].as_array().map(Vec::len), Some(2));
    assert_eq!(cloud["instances"][0]["role"], "test");
    assert_eq!(cloud["instances"][0]["instance_type"], "m5.large");
    let host = cloud["host"]["host_id"].as_str().unwrap_or("");
    assert!(host.starts_with("h-"), "{cloud}");
    assert_eq!(cloud["instances"][1]["host_id"], host);
}

/// Starts `nnb run` on an experiment whose agents get 60 s to answer, and returns
/// the child once it is waiting for them (every resource exists by then).
fn run_until_health_wait(dir: &Path, moto: &Moto) -> std::process::Child {
    let exp = experiment(dir, moto, 1, "60s");
    let mut child = nnb(dir, moto, &["run", "--yes", "--quiet"])
        .arg(&exp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nnb");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Keep draining after the test stops listening: nnb must not block on a
        // full pipe while it tears down.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("nnb: {line}");
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("waiting up to") => return child,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                panic!("nnb never reached the health wait: {e}");
            }
        }
    }
}

/// Waits for `child` to exit within `limit`.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for nnb") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nnb did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_during_the_health_wait_tears_everything_down() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = run_until_health_wait(dir.path(), &moto);
    let held = moto.leftovers();
    assert_eq!((held.instances.len(), held.hosts.len()), (2, 1), "{held:?}");
    signal(child.id(), "INT");
    let status = wait_exit(&mut child, Duration::from_secs(20));
    assert!(!status.success(), "an interrupted run reports it");
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
}

#[test]
fn sweep_removes_what_a_killed_run_left() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = run_until_health_wait(dir.path(), &moto);
    child.kill().expect("kill -9 nnb");
    let _ = child.wait();
    let held = moto.leftovers();
    assert_eq!(
        (
            held.instances.len(),
            held.hosts.len(),
            held.security_groups.len()
        ),
        (2, 1, 1),
        "{held:?}"
    );
    let ids = runs(&dir.path().join("results"));
    assert_eq!(ids.len(), 1);
    let run_id = &ids[0];
    let dry = nnb(
        dir.path(),
        &moto,
        &["aws", "sweep", "--run-id", run_id, "--dry-run"],
    )
    .output()
    .expect("run nnb");
    assert!(dry.status.success(), "{:?}", text(&dry));
    assert!(
        text(&dry).0.contains("would be removed"),
        "{}",
        text(&dry).0
    );
    assert_eq!(moto.leftovers(), held, "a dry run removes nothing");
    let out = nnb(dir.path(), &moto, &["aws", "sweep", "--run-id", run_id])
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("swept 4 resource(s)"), "{stdout}");
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
    let again = nnb(
        dir.path(),
        &moto,
        &["aws", "sweep", "--run-id", run_id, "--json"],
    )
    .output()
    .expect("run nnb");
    assert!(again.status.success());
    let v: serde_json::Value = serde_json::from_slice(&again.stdout).expect("sweep JSON");
    assert_eq!(v["found"].as_array().map(Vec::len), Some(0), "{v}");
}

#[test]
fn no_credentials_or_a_dead_endpoint_give_clear_errors() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path(), &moto, 1, "3s");
    let no_creds = |args: &[&str]| {
        let mut c = nnb(dir.path(), &moto, args);
        c.env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .env("HOME", dir.path());
        c.output().expect("run nnb")
    };
    let out = no_creds(&["aws", "sweep", "--all", "--dry-run"]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("credentials"), "{}", text(&out).1);
    let mut run = vec!["run", "--yes"];
    let exp_s = exp.display().to_string();
    run.push(&exp_s);
    let out = no_creds(&run);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("credentials"), "{}", text(&out).1);
    assert!(moto.leftovers().is_empty());

    let dead = format!("http://127.0.0.1:{}", moto::free_port());
    let out = nnb(dir.path(), &moto, &["aws", "sweep", "--all", "--dry-run"])
        .env("AWS_ENDPOINT_URL", &dead)
        .env("AWS_MAX_ATTEMPTS", "1")
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    assert!(
        stderr.contains("Describe"),
        "names the failed call: {stderr}"
    );
}

#[test]
fn a_run_uploaded_to_s3_comes_back_with_fetch() {
    let Some(moto) = Moto::start() else { return };
    moto.create_bucket("nnb-results");
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = dir.path().join("local.toml");
    std::fs::write(
        &exp,
        r#"name = "s3-round-trip"
repetitions = 2
settle = "0s"

[provider]
kind = "local"
results_s3 = "s3://nnb-results/runs"

[[tenants]]
role = "test"

[scenario]
kind = "thread-sweep"
threads = [1]

[scenario.test]
ops = 20000
"#,
    )
    .expect("write the experiment");
    let out = nnb(dir.path(), &moto, &["run", "--quiet"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let ids = runs(&dir.path().join("results"));
    assert_eq!(ids.len(), 1);
    let run_id = &ids[0];
    let url = format!("s3://nnb-results/runs/{run_id}");
    assert!(
        stdout.contains(&format!("to {url}")),
        "says where it went: {stdout}"
    );
    let out = nnb(dir.path(), &moto, &["fetch", &url, "--into", "fetched"])
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for file in ["manifest.json", "samples.jsonl"] {
        let local = std::fs::read(dir.path().join("results").join(run_id).join(file));
        let fetched = std::fs::read(dir.path().join("fetched").join(run_id).join(file));
        assert!(local.is_ok());
        assert_eq!(
            local.ok(),
            fetched.ok(),
            "{file} differs after the round trip"
        );
    }
    let bad = nnb(dir.path(), &moto, &["fetch", "nnb-results/runs"])
        .output()
        .expect("run nnb");
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a malformed URL is a usage error"
    );
}

/// Default tenancy through the command line (issue 26 item 1): a t3.micro test node
/// and neighbor in a spread placement group; moto's instances run no agent, so the
/// health wait fails and teardown removes the instances, the security group and
/// the placement group, no host ever allocated. The manifest records no host and
/// each instance's zone and subnet. `nnb aws sweep --campaign` of another campaign
/// then finds nothing.
#[test]
fn a_default_tenancy_run_launches_no_host_and_leaves_nothing() {
    let Some(moto) = Moto::start() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path(), &moto, 1, "3s");
    let text_of = std::fs::read_to_string(&exp).expect("read");
    let default = text_of.replace(
        "host = \"m5\"\ninstance_type = \"m5.large\"",
        "tenancy = \"default\"\ninstance_type = \"t3.micro\"\nplacement_group = \"spread\"",
    );
    assert_ne!(default, text_of);
    std::fs::write(&exp, default).expect("write");
    let dry = nnb(dir.path(), &moto, &["run", "--dry-run"])
        .arg(&exp)
        .output()
        .expect("dry run");
    let (stdout, stderr) = text(&dry);
    assert!(dry.status.success(), "{stdout}\n{stderr}");
    // 2 x t3.micro at the catalog's $0.0104/h.
    assert!(stdout.contains("2 x t3.micro at $0.0104/h"), "{stdout}");
    assert!(stdout.contains("placement group"), "{stdout}");
    assert!(!stdout.contains("dedicated host"), "{stdout}");

    let out = nnb(dir.path(), &moto, &["run", "--yes", "--quiet"])
        .arg(&exp)
        .output()
        .expect("run nnb");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("2 default-tenancy instance(s)"), "{stderr}");
    assert!(
        stderr.contains(
            "torn down: 2 instance(s) terminated, 0 host(s) released, 1 security group(s) and 1 placement group(s) deleted"
        ),
        "{stderr}"
    );
    assert!(moto.leftovers().is_empty(), "{:?}", moto.leftovers());
    let results = dir.path().join("results");
    let ids = runs(&results);
    assert_eq!(ids.len(), 1);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.join(&ids[0]).join("manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    let cloud = &manifest["sessions"][0]["cloud"];
    assert!(cloud["host"].is_null(), "{cloud}");
    let subnet = moto.default_subnet();
    for i in cloud["instances"].as_array().expect("instances") {
        assert!(i["host_id"].is_null(), "{i}");
        assert_eq!(i["instance_type"], "t3.micro");
        assert_eq!(i["availability_zone"], ZONE);
        assert_eq!(i["subnet_id"], subnet.as_str());
    }

    let sweep = nnb(
        dir.path(),
        &moto,
        &["aws", "sweep", "--campaign", "none-such"],
    )
    .output()
    .expect("sweep");
    let (stdout, stderr) = text(&sweep);
    assert!(sweep.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("nothing to sweep"), "{stdout}");
}
