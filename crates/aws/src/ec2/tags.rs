//! The tags on every resource nnb creates: how a dead run's leftovers are found and swept.

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};

/// Tag marking a resource as created by nnb (value "true").
pub const MANAGED: &str = "nnb:managed";
/// Tag holding the run id.
pub const RUN_ID: &str = "nnb:run-id";
/// Tag holding the unix time (seconds) after which `nnb aws sweep --expired` may remove it.
pub const EXPIRES_AT: &str = "nnb:expires-at";
/// Tag holding the tenant name of an instance.
pub const TENANT: &str = "nnb:tenant";
/// Tag holding the role of an instance ("test" or "neighbor").
pub const ROLE: &str = "nnb:role";
/// Tag holding the campaign id of a campaign's round: a resumed campaign finds what
/// a dead controller left by it.
pub const CAMPAIGN: &str = "nnb:campaign";

/// The tags every resource of one run gets: `nnb:run-id`, `nnb:expires-at`,
/// `nnb:managed=true` and `Name`, and `nnb:campaign` in a campaign's round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    /// The run id, also the base of the client tokens and names.
    pub run_id: String,
    /// Unix time (s) after which the resources count as leaked.
    pub expires_at_unix: u64,
    /// The campaign the run is a round of; `None` for a run of its own.
    pub campaign_id: Option<String>,
}

impl Tags {
    /// One tag specification for `resource`: the run's tags, `Name` = `name`, plus `extra`.
    pub(crate) fn spec(
        &self,
        resource: ResourceType,
        name: &str,
        extra: &[(&str, &str)],
    ) -> TagSpecification {
        let expires = self.expires_at_unix.to_string();
        let base = [
            (MANAGED, "true"),
            (RUN_ID, self.run_id.as_str()),
            (EXPIRES_AT, expires.as_str()),
            ("Name", name),
        ];
        let campaign = self.campaign_id.as_deref().map(|c| (CAMPAIGN, c));
        let tags = base
            .iter()
            .chain(campaign.iter())
            .chain(extra)
            .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
            .collect();
        TagSpecification::builder()
            .resource_type(resource)
            .set_tags(Some(tags))
            .build()
    }
}

/// The value of tag `key` in `tags`, if present.
pub(crate) fn value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// A client token (EC2 idempotency key, at most 64 ASCII characters) for `what` of run
/// `run_id`: retrying the same run with the same token returns the resource already created
/// instead of a second one. A readable prefix plus a hash of the full pair keeps long run
/// ids distinct.
pub(crate) fn client_token(run_id: &str, what: &str) -> String {
    // FNV-1a, 64 bit: stable across builds and platforms (unlike std's RandomState).
    let hash = run_id
        .bytes()
        .chain([0])
        .chain(what.bytes())
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let readable: String = format!("{run_id}-{what}")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(40)
        .collect();
    format!("nnb-{readable}-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_tokens_are_short_stable_and_distinct() {
        let long = "r".repeat(200);
        let a = client_token(&long, "host");
        assert!(a.len() <= 64 && a.is_ascii(), "{a}");
        assert_eq!(a, client_token(&long, "host"));
        assert_ne!(a, client_token(&long, "test-0"));
        assert_ne!(client_token("ab", "c"), client_token("a", "bc"));
    }

    #[test]
    fn spec_carries_run_tags_name_and_extras() {
        let tags = Tags {
            run_id: "run-1".into(),
            expires_at_unix: 42,
            campaign_id: Some("camp-1".into()),
        };
        let spec = tags.spec(ResourceType::Instance, "nnb-run-1-t0", &[(ROLE, "test")]);
        assert_eq!(spec.resource_type(), Some(&ResourceType::Instance));
        let t = spec.tags();
        assert_eq!(value(t, MANAGED), Some("true"));
        assert_eq!(value(t, RUN_ID), Some("run-1"));
        assert_eq!(value(t, EXPIRES_AT), Some("42"));
        assert_eq!(value(t, "Name"), Some("nnb-run-1-t0"));
        assert_eq!(value(t, ROLE), Some("test"));
        assert_eq!(value(t, CAMPAIGN), Some("camp-1"));
    }
}
