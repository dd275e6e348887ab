//! Review item 42: `nnb run` warns when a plan with network loads on aws outlasts
//! the shortest network burst window of its instance type (m5.large: 5 to 60 min,
//! nnb-catalog), and names a burstable endpoint's CPU credits; a short plan, or one
//! off aws, is not warned about.

use nnb_experiment::credits::credit_warnings;
use nnb_experiment::parse;
use nnb_experiment::plan::expand;

/// A load-steps file on an m5 host of m5.large tenants (0.75 Gbit/s baseline):
/// `reps` repetitions of 3 levels (0 to `top` in 2 steps, split between the 2
/// neighbors), each probe measuring `probe` after a 500 ms warm-up.
fn file(provider: &str, reps: u32, probe: &str, endpoint: &str, top: &str) -> String {
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
subnet_id = "subnet-0123456789abcdef0"
"#
        ),
        other => format!("kind = \"{other}\"\n"),
    };
    let half = format!("{}M", top.trim_end_matches('M').parse::<u64>().unwrap() / 2);
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
levels = "0:{top}:{half}"

[scenario.probe]
duration = "{probe}"
warmup = "500ms"
"#
    )
}

fn warnings(src: &str) -> Vec<String> {
    let exp = parse("credits.toml", src, Some(96)).unwrap_or_else(|e| panic!("{e}"));
    let plan = expand(&exp, 96);
    let (estimate, _) = plan.estimate(exp.settle);
    credit_warnings(&exp, &plan, estimate)
}

/// 3 levels x 30 repetitions x (10 s + 0.5 s) = 945 s of probes alone (the plan's
/// estimate), past the 5 minutes, the top level's 4000M split into 2000M per
/// neighbor, above the 0.75 Gbit/s baseline: one warning for the m5.large tenants,
/// one for the t3.micro endpoint.
#[test]
fn a_long_plan_on_m5_large_is_warned_about() {
    let w = warnings(&file("aws", 30, "10s", "t3.micro", "4000M"));
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(
        w[0].contains("the tenants' m5.large (5 to 60 min")
            && w[0].contains("ask up to 2.00 Gbit/s, above its 0.75 Gbit/s baseline")
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
/// endpoint without credits (not in the catalog): nothing to say. As long as above
/// but with loads within the baseline (400M: 200M per neighbor), nothing either:
/// they need no credits. Off aws nothing, however long.
#[test]
fn a_short_plan_or_a_local_one_is_not() {
    let none = Vec::<String>::new();
    assert_eq!(
        warnings(&file("aws", 1, "1s", "c5n.9xlarge", "4000M")),
        none
    );
    assert_eq!(
        warnings(&file("aws", 30, "10s", "c5n.9xlarge", "400M")),
        none
    );
    assert_eq!(warnings(&file("local", 30, "10s", "", "4000M")), none);
}
