# moto with EC2 placement groups: moto (5.2) answers CreatePlacementGroup,
# DescribePlacementGroups and DeletePlacementGroup with "not implemented" and
# drops RunInstances' Placement.GroupName. The tests run this instead of
# `moto_server` (same arguments): it adds the three calls (tags, tag filters, the
# group of each instance in DescribeInstances, a group in use not deletable, an
# unknown group refused by RunInstances, as EC2 does) and starts moto's server.
import sys
import threading
import uuid

from moto.core.responses import ActionResult
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.instances import Instance
from moto.ec2.responses import EC2Response
from moto.ec2.responses.instances import InstanceResponse
from moto.server import main

GROUPS = {}
LOCK = threading.Lock()
LAUNCH = threading.local()


def _matches(group, filters):
    for name, values in filters.items():
        tags = group["Tags"]
        if name.startswith("tag:"):
            key = name[4:]
            if not any(t["Key"] == key and t["Value"] in values for t in tags):
                return False
        elif name == "tag-key":
            if not any(t["Key"] in values for t in tags):
                return False
        elif name == "group-name":
            if group["GroupName"] not in values:
                return False
        elif name == "strategy":
            if group["Strategy"] not in values:
                return False
        elif name == "state":
            if group["State"] not in values:
                return False
    return True


def create_placement_group(self):
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy")
    partitions = self._get_param("PartitionCount")
    tags = self._parse_tag_specification().get("placement-group", {})
    with LOCK:
        if name in GROUPS:
            raise EC2ClientError(
                "InvalidPlacementGroup.Duplicate",
                f"The Placement Group '{name}' already exists.",
            )
        group = {
            "GroupName": name,
            "GroupId": "pg-" + uuid.uuid4().hex[:17],
            "State": "available",
            "Strategy": strategy,
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
        }
        if partitions:
            group["PartitionCount"] = int(partitions)
        GROUPS[name] = group
    return ActionResult({"PlacementGroup": group})


def describe_placement_groups(self):
    filters = self._filters_from_querystring()
    names = self._get_param("GroupNames", [])
    with LOCK:
        found = [
            g
            for g in GROUPS.values()
            if (not names or g["GroupName"] in names) and _matches(g, filters)
        ]
    return ActionResult({"PlacementGroups": found})


def delete_placement_group(self):
    name = self._get_param("GroupName")
    with LOCK:
        if name not in GROUPS:
            raise EC2ClientError(
                "InvalidPlacementGroup.Unknown",
                f"The Placement Group '{name}' is unknown.",
            )
        in_use = [
            i.id
            for r in self.ec2_backend.reservations.values()
            for i in r.instances
            if i.placement.group_name == name and i._state.name != "terminated"
        ]
        if in_use:
            raise EC2ClientError(
                "InvalidPlacementGroup.InUse",
                f"The Placement Group '{name}' is in use by {', '.join(in_use)}.",
            )
        del GROUPS[name]
    return ActionResult({})


_run_instances = InstanceResponse.run_instances


def run_instances(self):
    name = self._get_param("Placement.GroupName") or ""
    with LOCK:
        if name and name not in GROUPS:
            raise EC2ClientError(
                "InvalidPlacementGroup.Unknown",
                f"The Placement Group '{name}' is unknown.",
            )
    LAUNCH.group = name
    try:
        return _run_instances(self)
    finally:
        LAUNCH.group = ""


_instance_init = Instance.__init__


def instance_init(self, *args, **kwargs):
    _instance_init(self, *args, **kwargs)
    self.placement.group_name = getattr(LAUNCH, "group", "") or ""


EC2Response.create_placement_group = create_placement_group
EC2Response.describe_placement_groups = describe_placement_groups
EC2Response.delete_placement_group = delete_placement_group
EC2Response.run_instances = run_instances
Instance.__init__ = instance_init

if __name__ == "__main__":
    main(sys.argv[1:])
