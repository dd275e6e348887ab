//! infra/terraform fills exactly the placeholders of the templates it shares with
//! nnb: `infra/cloud-init.yaml` (the tenants' user data) and `infra/iam-policy.json`
//! (the controller's policy). A placeholder renamed on one side breaks `terraform
//! apply` only at apply time, in someone's AWS account; this catches it here.

use std::collections::BTreeSet;

/// A file under the repository's `infra/`.
fn infra(path: &str) -> String {
    let full = format!("{}/../../infra/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {full}: {e}"))
}

/// The `${name}` placeholders of a template.
fn placeholders(text: &str) -> BTreeSet<String> {
    text.split("${")
        .skip(1)
        .filter_map(|rest| rest.split_once('}'))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// The keys assigned (`key = ...`) in the HCL object that follows `opening` in `text`.
fn object_keys(text: &str, opening: &str) -> BTreeSet<String> {
    let start = text
        .find(opening)
        .unwrap_or_else(|| panic!("{opening} not found"))
        + opening.len();
    let body = &text[start..];
    let body = &body[..body.find('}').expect("closing brace")];
    body.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, _)| key.trim().to_string())
        .filter(|key| !key.is_empty() && !key.starts_with('#'))
        .collect()
}

#[test]
fn terraform_fills_every_cloud_init_placeholder() {
    let template = placeholders(&infra("cloud-init.yaml"));
    assert!(
        template.contains("token") && template.contains("agent_port"),
        "{template:?}"
    );
    let main = infra("terraform/main.tf");
    let mut passed = object_keys(&main, "cloud_init = {");
    // The tenant name is merged in per instance.
    assert_eq!(
        main.matches("{ tenant = ").count(),
        3,
        "test, neighbor and endpoint instances"
    );
    passed.insert("tenant".to_string());
    assert_eq!(passed, template);
    assert!(
        !infra("cloud-init.yaml").contains("%{"),
        "no Terraform directives"
    );
}

#[test]
fn terraform_fills_every_policy_placeholder() {
    let template = placeholders(&infra("iam-policy.json"));
    assert_eq!(
        template,
        BTreeSet::from(["bucket".to_string(), "tenant_role_arn".to_string()])
    );
    let outputs = infra("terraform/outputs.tf");
    let passed = object_keys(&outputs, "iam-policy.json\", {");
    assert_eq!(passed, template);
}
