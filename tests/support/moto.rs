//! A real moto server per test (`moto_server -H 127.0.0.1 -p PORT`), killed on drop,
//! and an independent look at what it holds through boto3 (the AWS SDK for Python,
//! installed with moto), so a test checks nnb's cleanup with another SDK than the
//! one nnb uses.
//!
//! When `moto_server` is missing the test is skipped with a printed reason, unless
//! the environment variable `CI` is set: then it fails (`./scripts/test.sh`
//! installs moto first).

use std::process::Command;

#[path = "../../crates/aws/tests/support/server.rs"]
mod server;

pub(crate) use server::{free_port, Moto};

/// The region every test uses.
pub(crate) const REGION: &str = "us-east-1";
/// The availability zone every test uses.
pub(crate) const ZONE: &str = "us-east-1a";

/// What moto holds that nnb must have cleaned up.
#[derive(Debug, PartialEq, Eq, Default)]
pub(crate) struct Leftovers {
    /// Instances not terminated.
    pub instances: Vec<String>,
    /// Dedicated hosts not released.
    pub hosts: Vec<String>,
    /// Security groups tagged nnb:managed.
    pub security_groups: Vec<String>,
    /// Placement groups tagged nnb:managed.
    pub placement_groups: Vec<String>,
}

impl Leftovers {
    /// Whether nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.instances.is_empty()
            && self.hosts.is_empty()
            && self.security_groups.is_empty()
            && self.placement_groups.is_empty()
    }
}

/// Python that prints one JSON line describing the moto server at argv[1].
const STATE_PY: &str = r#"
import json, sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="testing", aws_secret_access_key="testing")
if sys.argv[2] == "subnet":
    print(next(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"]
               if s["AvailabilityZone"] == sys.argv[3] and s.get("DefaultForAz")))
elif sys.argv[2] == "zones":
    print(json.dumps({i["InstanceId"]: i["Placement"]["AvailabilityZone"]
                      for r in ec2.describe_instances()["Reservations"]
                      for i in r["Instances"]}))
elif sys.argv[2] == "bucket":
    s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=sys.argv[3])
    print(sys.argv[3])
else:
    inst = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] != "terminated"]
    hosts = [h["HostId"] for h in ec2.describe_hosts()["Hosts"]
             if not h["State"].startswith("released")]
    groups = [g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]
              if any(t["Key"] == "nnb:managed" for t in g.get("Tags", []))]
    placement = [g["GroupName"] for g in ec2.describe_placement_groups()["PlacementGroups"]
                 if any(t["Key"] == "nnb:managed" for t in g.get("Tags", []))]
    print(json.dumps({"instances": inst, "hosts": hosts, "groups": groups,
                      "placement": placement}))
"#;

impl Moto {
    /// Environment pointing an nnb process at this server with test credentials
    /// (which win over the user's own AWS configuration files).
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
    }

    /// Runs the boto3 helper with `args`, returning its stdout.
    fn python(&self, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg("-c")
            .arg(STATE_PY)
            .arg(&self.endpoint)
            .args(args)
            .output()
            .expect("run python3 (installed with moto)");
        assert!(
            out.status.success(),
            "boto3 helper failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The default subnet of [`ZONE`].
    pub(crate) fn default_subnet(&self) -> String {
        self.default_subnet_of(ZONE)
    }

    /// The default subnet of availability zone `zone`.
    pub(crate) fn default_subnet_of(&self, zone: &str) -> String {
        self.python(&["subnet", zone])
    }

    /// Creates S3 bucket `name`.
    pub(crate) fn create_bucket(&self, name: &str) {
        self.python(&["bucket", name]);
    }

    /// The availability zone of every instance moto knows (terminated ones too),
    /// read with boto3: instance id → zone.
    pub(crate) fn instance_zones(&self) -> std::collections::BTreeMap<String, String> {
        serde_json::from_str(&self.python(&["zones"])).expect("boto3 helper prints JSON")
    }

    /// Instances, hosts and nnb security and placement groups still there, read
    /// with boto3.
    pub(crate) fn leftovers(&self) -> Leftovers {
        let v: serde_json::Value =
            serde_json::from_str(&self.python(&["state"])).expect("boto3 helper prints JSON");
        let ids = |k: &str| -> Vec<String> {
            v[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        Leftovers {
            instances: ids("instances"),
            hosts: ids("hosts"),
            security_groups: ids("groups"),
            placement_groups: ids("placement"),
        }
    }
}
