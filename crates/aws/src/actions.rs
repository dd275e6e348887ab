//! Every AWS API call nnb makes, the IAM action it needs, and why nnb makes it.
//!
//! This table is the source of truth for `infra/iam-policy.json`: a test checks that
//! the policy grants exactly these actions, no more. A call needing several actions
//! (RunInstances with tags and an instance profile) has one row per action. Add a row
//! whenever the code calls a new API.

/// (API call, IAM action, what nnb uses it for), one row per action a call needs.
pub const CALLS: &[(&str, &str, &str)] = &[
    // EC2: dedicated hosts.
    (
        "AllocateHosts",
        "ec2:AllocateHosts",
        "allocate the run's dedicated host (auto-placement off, tagged nnb:managed)",
    ),
    (
        "AllocateHosts",
        "ec2:CreateTags",
        "tag the host at creation (TagSpecifications: nnb:run-id, nnb:expires-at, nnb:managed)",
    ),
    (
        "DescribeHosts",
        "ec2:DescribeHosts",
        "read HostProperties and AvailableCapacity; find leftover hosts in sweep",
    ),
    (
        "ReleaseHosts",
        "ec2:ReleaseHosts",
        "release the run's host at teardown and in sweep",
    ),
    // EC2: tenants.
    (
        "RunInstances",
        "ec2:RunInstances",
        "launch each tenant on the host (Placement host_id, tenancy host, user data)",
    ),
    (
        "RunInstances",
        "ec2:CreateTags",
        "tag instances and volumes at launch (TagSpecifications)",
    ),
    (
        "RunInstances",
        "iam:PassRole",
        "only with iam_instance_profile: give tenants the role that reads the nnb binary from S3",
    ),
    (
        "DescribeInstances",
        "ec2:DescribeInstances",
        "tenant addresses and states; wait until terminated; find leftovers in sweep",
    ),
    (
        "StopInstances",
        "ec2:StopInstances",
        "stop the tenants absent from the next steps (neighbors that come and go)",
    ),
    (
        "StartInstances",
        "ec2:StartInstances",
        "start stopped tenants again, on their host, when a step wants them present",
    ),
    (
        "TerminateInstances",
        "ec2:TerminateInstances",
        "terminate the run's tenants at teardown and in sweep",
    ),
    // EC2: network.
    (
        "DescribeSubnets",
        "ec2:DescribeSubnets",
        "find the VPC of the subnet for the security group",
    ),
    (
        "CreateSecurityGroup",
        "ec2:CreateSecurityGroup",
        "create the run's security group (agent and probe ports only)",
    ),
    (
        "CreateSecurityGroup",
        "ec2:CreateTags",
        "tag the security group at creation (TagSpecifications)",
    ),
    (
        "AuthorizeSecurityGroupIngress",
        "ec2:AuthorizeSecurityGroupIngress",
        "open the agent and probe ports to the VPC / controller CIDRs",
    ),
    (
        "DescribeSecurityGroups",
        "ec2:DescribeSecurityGroups",
        "find leftover nnb security groups in sweep",
    ),
    (
        "DeleteSecurityGroup",
        "ec2:DeleteSecurityGroup",
        "delete the run's security group at teardown and in sweep",
    ),
    // EC2: default tenancy.
    (
        "DescribeInstanceTypeOfferings",
        "ec2:DescribeInstanceTypeOfferings",
        "check the zone offers the default-tenancy instance types before anything is created",
    ),
    (
        "CreatePlacementGroup",
        "ec2:CreatePlacementGroup",
        "create the run's placement group (placement_group: cluster, spread or partition)",
    ),
    (
        "CreatePlacementGroup",
        "ec2:CreateTags",
        "tag the placement group at creation (TagSpecifications)",
    ),
    (
        "DescribePlacementGroups",
        "ec2:DescribePlacementGroups",
        "find leftover nnb placement groups in sweep",
    ),
    (
        "DeletePlacementGroup",
        "ec2:DeletePlacementGroup",
        "delete the run's placement group at teardown and in sweep",
    ),
    // S3: results.
    (
        "PutObject",
        "s3:PutObject",
        "upload a result file up to 8 MiB, and the checksum manifest",
    ),
    (
        "CreateMultipartUpload",
        "s3:PutObject",
        "start the upload of a result file above 8 MiB",
    ),
    (
        "UploadPart",
        "s3:PutObject",
        "upload one 8 MiB part of a large result file",
    ),
    (
        "CompleteMultipartUpload",
        "s3:PutObject",
        "assemble the parts of a large result file",
    ),
    (
        "AbortMultipartUpload",
        "s3:AbortMultipartUpload",
        "discard the parts of a failed large upload",
    ),
    (
        "HeadObject",
        "s3:GetObject",
        "verify an uploaded object's size and SHA-256 without downloading it",
    ),
    (
        "GetObject",
        "s3:GetObject",
        "download the manifest and the result files (nnb fetch)",
    ),
    (
        "ListObjectsV2",
        "s3:ListBucket",
        "list a run's objects to check them against its manifest (nnb fetch)",
    ),
];

#[cfg(test)]
mod tests {
    use super::CALLS;

    #[test]
    fn rows_are_well_formed_and_unique() {
        for (i, (call, action, purpose)) in CALLS.iter().enumerate() {
            assert!(
                call.chars().next().is_some_and(|c| c.is_ascii_uppercase()),
                "{call}"
            );
            let (service, name) = action.split_once(':').expect("service:Action");
            assert!(["ec2", "s3", "iam"].contains(&service), "{action}");
            assert!(!name.is_empty() && !name.contains('*'), "{action}");
            assert!(!purpose.is_empty(), "{call}");
            let twice = CALLS[..i].iter().any(|(c, a, _)| c == call && a == action);
            assert!(!twice, "{call} / {action} listed twice");
        }
    }
}
