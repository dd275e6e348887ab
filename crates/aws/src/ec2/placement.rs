//! Default tenancy's own EC2 calls: whether the zone offers the plan's instance
//! types (before anything is created), and the run's placement group (created,
//! tagged, deleted at teardown, found by the sweep).

use std::collections::BTreeSet;

use aws_sdk_ec2::types::{Filter, LocationType, PlacementGroup, PlacementStrategy, ResourceType};

use super::{AwsError, Ec2, LaunchPlan, Place};

impl Ec2 {
    /// Refuses, before anything is created, a plan with a default-tenancy instance
    /// type the zone does not offer (DescribeInstanceTypeOfferings, location type
    /// availability-zone): EC2 would otherwise fail the launch half-way through.
    pub async fn check_offered(&self, plan: &LaunchPlan) -> Result<(), AwsError> {
        let wanted: BTreeSet<&str> = plan
            .tenants
            .iter()
            .filter(|t| t.place == Place::Default)
            .map(|t| t.instance_type.as_str())
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let filters = vec![
            filter("location", vec![plan.availability_zone.clone()]),
            filter(
                "instance-type",
                wanted.iter().map(|t| (*t).to_owned()).collect(),
            ),
        ];
        let mut offered = BTreeSet::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .describe_instance_type_offerings()
                .location_type(LocationType::AvailabilityZone)
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstanceTypeOfferings", e))?;
            for o in out.instance_type_offerings() {
                if let Some(t) = o.instance_type() {
                    offered.insert(t.as_str().to_owned());
                }
            }
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        match wanted.iter().find(|t| !offered.contains(**t)) {
            Some(t) => Err(AwsError::NotOffered {
                instance_type: (*t).to_owned(),
                zone: plan.availability_zone.clone(),
            }),
            None => Ok(()),
        }
    }

    /// CreatePlacementGroup named `name` with the plan's strategy, tagged like
    /// every resource of the run.
    pub(crate) async fn create_placement_group(
        &self,
        plan: &LaunchPlan,
        name: &str,
    ) -> Result<(), AwsError> {
        let Some(group) = &plan.placement_group else {
            return Ok(());
        };
        self.client
            .create_placement_group()
            .group_name(name)
            .strategy(PlacementStrategy::from(group.strategy.as_str()))
            .set_partition_count(group.partitions.and_then(|n| i32::try_from(n).ok()))
            .tag_specifications(plan.tags.spec(ResourceType::PlacementGroup, name, &[]))
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("CreatePlacementGroup", e))
    }

    /// DeletePlacementGroup of `name` (its instances must be terminated first); a
    /// group that no longer exists counts as deleted.
    pub(crate) async fn delete_placement_group(&self, name: &str) -> Result<(), AwsError> {
        match self
            .client
            .delete_placement_group()
            .group_name(name)
            .send()
            .await
            .map_err(|e| AwsError::api("DeletePlacementGroup", e))
        {
            // EC2 names an unknown group InvalidPlacementGroup.Unknown.
            Err(AwsError::Api { code: Some(c), .. }) if c.ends_with(".Unknown") => Ok(()),
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// DescribePlacementGroups of the groups matching `filters` (one page: the call
    /// has none).
    pub(crate) async fn find_placement_groups(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<PlacementGroup>, AwsError> {
        let out = self
            .client
            .describe_placement_groups()
            .set_filters(Some(filters))
            .send()
            .await
            .map_err(|e| AwsError::api("DescribePlacementGroups", e))?;
        Ok(out.placement_groups().to_vec())
    }
}

/// The name of the placement group of run `run_id`.
pub(crate) fn group_name(run_id: &str) -> String {
    format!("nnb-{run_id}")
}

/// A filter of `name` matching `values`.
fn filter(name: &str, values: Vec<String>) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values))
        .build()
}
