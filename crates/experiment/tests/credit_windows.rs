//! Review item 42: `nnb run` warns when a plan with network loads on aws outlasts
//! the shortest network burst window of its instance type (m5.large: 5 to 60 min,
//! nnb-catalog), and names a burstable endpoint's CPU credits; a short plan, or one
//! off aws, is not warned about.

use nnb_experiment::credits::credit_warnings;
use nnb_experiment::parse;
use nnb_experiment::plan::expand;

/// A load-steps file on an m5 host of m5.large tenants: `reps` repetitions of 3
/// levels (0, 100M, 200M), each probe measuring `probe` after a 500 ms warm-up.
fn file(provider: &str, reps: u32, probe: &str, endpoint: &str) -> String {
    let provider = match provider {
        "aws" => format!(
            r#"kind = "aws"
availability_zone = "us-east-2a"
host = "m5"
instance_type = "m5.large"
endpoint_instance_type = "{endpoint}"
image_id = "ami-0123456789abcdef0"
install = {{ x86_64 = "https://example.com/nnb" }}
allowed_cidrs = ["10.0.0.0/16"]
"#
        ),
        other => format!("kind = \"{other}\"\n"),
    };
    format!(
        r#"name = "credits"
repetitions = {reps}
settle = "5s"

[provider]
{provider}
[[tenants]]
name = "test"
role = "test"
vcpus = 2

[[tenants]]
name = "neighbor"
count = 2
role = "neighbor"
vcpus = 2

[scenario]
kind = "load-steps"
levels = "0:200M:100M"

[scenario.probe]
duration = "{probe}"
warmup = "500ms"
"#
    )
}

fn warnings(src: &str) -> Vec<String> {
    let exp = parse("credits.toml", src, Some(96)).unwrap_or_else(|e| panic!("{e}"));
    let plan = expand(&exp, 96);
    credit_warnings(&exp, &plan)
}

/// 3 levels x 30 repetitions x (10 s + 0.5 s) = 945 s of probes alone, past the
/// 5 minutes: one warning for the m5.large tenants, one for the t3.micro endpoint.
#[test]
fn a_long_plan_on_m5_large_is_warned_about() {
    let w = warnings(&file("aws", 30, "10s", "t3.micro"));
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(
        w[0].contains("the tenants' m5.large (5 to 60 min")
            && w[0].contains("0.75 Gbit/s baseline")
            && w[0].contains("credits table"),
        "{}",
        w[0]
    );
    assert!(
        w[1].contains("the endpoint's t3.micro is burstable: it earns 12 CPU credits per hour"),
        "{}",
        w[1]
    );
}

/// 3 levels x 1 repetition x 1.5 s and a few settles: well inside 5 minutes, and an
/// endpoint without credits (not in the catalog): nothing to say. Off aws nothing
/// either, however long.
#[test]
fn a_short_plan_or_a_local_one_is_not() {
    assert_eq!(
        warnings(&file("aws", 1, "1s", "c5n.9xlarge")),
        Vec::<String>::new()
    );
    assert_eq!(
        warnings(&file("local", 30, "10s", "")),
        Vec::<String>::new()
    );
}
