//! infra/iam-policy.json grants exactly the IAM actions of nnb's API calls
//! (`nnb_aws::actions::CALLS`), and scopes them as tightly as AWS allows.

use std::collections::BTreeSet;

use nnb_aws::actions::CALLS;
use serde_json::Value;

/// The policy, parsed.
fn policy() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../infra/iam-policy.json");
    let text = std::fs::read_to_string(path).expect("read infra/iam-policy.json");
    serde_json::from_str(&text).expect("infra/iam-policy.json is valid JSON")
}

/// A string or an array of strings (IAM allows both for Action and Resource).
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().expect("array of strings"))
            .collect(),
        other => panic!("expected a string or an array, got {other}"),
    }
}

/// The Allow statements.
fn statements(policy: &Value) -> Vec<&Value> {
    let all = policy["Statement"].as_array().expect("Statement array");
    for s in all {
        assert_eq!(s["Effect"], "Allow", "only Allow statements: {s}");
        assert!(s.get("NotAction").is_none() && s.get("NotResource").is_none());
    }
    all.iter().collect()
}

#[test]
fn policy_grants_exactly_the_actions_nnb_calls() {
    let policy = policy();
    assert_eq!(policy["Version"], "2012-10-17");
    let granted: BTreeSet<&str> = statements(&policy)
        .iter()
        .flat_map(|s| strings(&s["Action"]))
        .collect();
    let needed: BTreeSet<&str> = CALLS.iter().map(|(_, action, _)| *action).collect();
    let extra: Vec<_> = granted.difference(&needed).collect();
    let missing: Vec<_> = needed.difference(&granted).collect();
    assert!(
        extra.is_empty() && missing.is_empty(),
        "policy grants extra {extra:?}, misses {missing:?}"
    );
}

#[test]
fn mutations_are_scoped_to_nnb_resources() {
    let policy = policy();
    for s in statements(&policy) {
        let actions = strings(&s["Action"]);
        let resources = strings(&s["Resource"]);
        assert!(
            actions.iter().all(|a| !a.contains('*')),
            "wildcard action: {s}"
        );
        if resources.contains(&"*") {
            assert!(
                actions.iter().all(|a| a.starts_with("ec2:Describe")),
                "only Describe* may use Resource \"*\": {s}"
            );
        }
        // A mutation of an instance, host, volume or security group must be
        // conditioned on the nnb:managed tag (request tag or resource tag).
        // RunInstances creates only instances and volumes; the image, subnet and
        // (possibly the user's own) security groups it names are used, not changed.
        let mutates = actions
            .iter()
            .any(|a| a.starts_with("ec2:") && !a.starts_with("ec2:Describe"));
        let kinds: &[&str] = if actions == ["ec2:RunInstances"] {
            &["instance/", "volume/"]
        } else {
            &["instance/", "dedicated-host/", "volume/", "security-group/"]
        };
        let tagged_kind = resources
            .iter()
            .any(|r| kinds.iter().any(|kind| r.contains(kind)));
        if mutates && tagged_kind {
            let condition = s["Condition"].to_string();
            assert!(
                condition.contains("nnb:managed"),
                "unconditioned mutation: {s}"
            );
        }
        if actions.iter().any(|a| a.starts_with("s3:")) {
            assert!(
                resources
                    .iter()
                    .all(|r| r.starts_with("arn:aws:s3:::${bucket}")),
                "S3 only on the results bucket: {s}"
            );
        }
    }
}
