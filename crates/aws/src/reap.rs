//! `nnb aws sweep`: finds what runs that died left behind and removes it.
//!
//! Every resource nnb creates carries `nnb:managed=true`, `nnb:run-id` and
//! `nnb:expires-at` (and a campaign's rounds `nnb:campaign`; see [`crate::ec2::tags`]);
//! the sweep finds live instances, unreleased hosts, security groups and placement
//! groups by those tags and tears them down like a [`Lease`]. [`sweep_campaign`]
//! removes what a campaign's dead controller left.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_ec2::types::{Filter, Tag};
use serde::Serialize;

use crate::ec2::{tags, AwsError, Ec2, Lease, TeardownReport};

/// Which leftovers to sweep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepFilter {
    /// Only this run's resources; `None` for every nnb run.
    pub run_id: Option<String>,
    /// Only the resources of this campaign's rounds (tag `nnb:campaign`); `None`:
    /// any campaign's or none.
    pub campaign_id: Option<String>,
    /// Only resources whose `nnb:expires-at` lies in the past (resources without a readable
    /// expiry are left alone then).
    pub expired_only: bool,
    /// List only, remove nothing.
    pub dry_run: bool,
}

/// The kind of a swept resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceKind {
    /// An EC2 instance.
    Instance,
    /// A dedicated host.
    Host,
    /// A security group.
    SecurityGroup,
    /// A placement group (its id is its name: EC2 deletes it by name).
    PlacementGroup,
}

/// One resource the sweep found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SweptResource {
    /// What it is.
    pub kind: ResourceKind,
    /// Its id.
    pub id: String,
    /// Its `nnb:run-id` tag.
    pub run_id: Option<String>,
    /// Its `nnb:campaign` tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign_id: Option<String>,
    /// Its `nnb:expires-at` tag, unix seconds.
    pub expires_at_unix: Option<u64>,
}

/// What a sweep found and, unless it was a dry run, what it removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Every resource matching the filter.
    pub found: Vec<SweptResource>,
    /// The teardown of `found`; `None` for a dry run or when nothing was found.
    pub teardown: Option<TeardownReport>,
}

/// Finds non-terminated instances, unreleased hosts and security groups tagged
/// `nnb:managed=true` (and the filter's run / expiry), then, unless `dry_run`, terminates,
/// waits, releases and deletes them. A teardown that leaves something behind is an
/// [`AwsError::Teardown`] listing it.
pub async fn sweep(ec2: &Ec2, filter: &SweepFilter) -> Result<SweepReport, AwsError> {
    let found = find(ec2, filter).await?;
    for r in &found {
        tracing::info!(kind = ?r.kind, id = %r.id, run = ?r.run_id, "found nnb resource");
    }
    if filter.dry_run || found.is_empty() {
        return Ok(SweepReport {
            found,
            teardown: None,
        });
    }
    let ids = |kind| {
        found
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.id.clone())
            .collect()
    };
    let mut lease = Lease::adopt(
        "sweep",
        ids(ResourceKind::Instance),
        ids(ResourceKind::Host),
        ids(ResourceKind::SecurityGroup),
        ids(ResourceKind::PlacementGroup),
    );
    let teardown = lease.teardown(ec2).await?;
    Ok(SweepReport {
        found,
        teardown: Some(teardown),
    })
}

/// Tears down everything tagged with campaign `campaign_id` (`nnb:campaign`):
/// instances, dedicated hosts, security groups and placement groups of any of its
/// rounds, and nothing of another campaign or run. What a resumed campaign calls
/// before its next round, so no instance of a dead controller runs unowned.
pub async fn sweep_campaign(ec2: &Ec2, campaign_id: &str) -> Result<SweepReport, AwsError> {
    let filter = SweepFilter {
        campaign_id: Some(campaign_id.to_owned()),
        ..SweepFilter::default()
    };
    sweep(ec2, &filter).await
}

/// The live resources the filter selects (its `dry_run` is ignored): non-terminated
/// instances, unreleased hosts, security groups and placement groups, tagged
/// `nnb:managed=true`.
pub async fn find(ec2: &Ec2, filter: &SweepFilter) -> Result<Vec<SweptResource>, AwsError> {
    let mut filters = vec![tag_filter(tags::MANAGED, "true")];
    if let Some(run) = &filter.run_id {
        filters.push(tag_filter(tags::RUN_ID, run));
    }
    if let Some(campaign) = &filter.campaign_id {
        filters.push(tag_filter(tags::CAMPAIGN, campaign));
    }
    // moto's DescribeHosts ignores `tag:KEY` filters (its Host answers only tag-key, state,
    // zone and type), so hosts are narrowed by tag-key here and every resource is matched
    // on its tags below as well.
    let host_filters = vec![Filter::builder()
        .name("tag-key")
        .values(tags::MANAGED)
        .build()];
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut found = Vec::new();
    for i in ec2.find_live_instances(filters.clone()).await? {
        found.extend(matching(
            filter,
            now,
            ResourceKind::Instance,
            i.instance_id(),
            i.tags(),
        ));
    }
    for h in ec2.find_hosts(host_filters).await? {
        found.extend(matching(
            filter,
            now,
            ResourceKind::Host,
            h.host_id(),
            h.tags(),
        ));
    }
    for g in ec2.find_security_groups(filters.clone()).await? {
        found.extend(matching(
            filter,
            now,
            ResourceKind::SecurityGroup,
            g.group_id(),
            g.tags(),
        ));
    }
    for g in ec2.find_placement_groups(filters).await? {
        let live = g
            .state()
            .map_or(true, |s| !matches!(s.as_str(), "deleting" | "deleted"));
        if live {
            found.extend(matching(
                filter,
                now,
                ResourceKind::PlacementGroup,
                g.group_name(),
                g.tags(),
            ));
        }
    }
    Ok(found)
}

/// A `tag:KEY = value` filter.
fn tag_filter(key: &str, value: &str) -> Filter {
    Filter::builder()
        .name(format!("tag:{key}"))
        .values(value)
        .build()
}

/// The resource `id` with tags `tags` when the filter selects it: tagged
/// `nnb:managed=true`, of the filter's run and campaign, and expired before `now` if
/// asked.
fn matching(
    filter: &SweepFilter,
    now: u64,
    kind: ResourceKind,
    id: Option<&str>,
    tags: &[Tag],
) -> Option<SweptResource> {
    let id = id.filter(|id| !id.is_empty())?;
    let run_id = tags::value(tags, tags::RUN_ID).map(str::to_owned);
    let campaign_id = tags::value(tags, tags::CAMPAIGN).map(str::to_owned);
    let expires_at_unix = tags::value(tags, tags::EXPIRES_AT).and_then(|v| v.parse().ok());
    let selected = tags::value(tags, tags::MANAGED) == Some("true")
        && filter
            .run_id
            .as_ref()
            .map_or(true, |run| run_id.as_ref() == Some(run))
        && filter
            .campaign_id
            .as_ref()
            .map_or(true, |c| campaign_id.as_ref() == Some(c))
        && (!filter.expired_only || expires_at_unix.is_some_and(|t: u64| t < now));
    selected.then(|| SweptResource {
        kind,
        id: id.to_owned(),
        run_id,
        campaign_id,
        expires_at_unix,
    })
}
