# One dedicated host and the tenants on it, each running `nnb agent`: the noisy-neighbor
# testbed of the thesis (chapter 4), for users who provision by hand instead of letting
# `nnb run` (provider kind = "aws") create and tear down everything itself.

locals {
  test_tenant = one([for t in var.tenants : t if t.role == "test"])
  neighbors   = { for t in var.tenants : t.name => t if t.role == "neighbor" }

  ubuntu_arch = var.architecture == "arm64" ? "arm64" : "amd64"
  ami_id      = coalesce(var.ami_id, data.aws_ami.ubuntu.id)

  # The variables of ../cloud-init.yaml except the tenant name (set per instance).
  cloud_init = {
    install_method = var.install_method
    nnb_x86_64     = var.nnb_x86_64
    nnb_aarch64    = var.nnb_aarch64
    agent_port     = var.agent_port
    token          = var.agent_token
    run_id         = var.run_id
  }
}

data "aws_ami" "ubuntu" {
  most_recent = true
  owners      = ["099720109477"] # Canonical

  filter {
    name   = "name"
    values = ["ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-${local.ubuntu_arch}-server-*"]
  }

  filter {
    name   = "architecture"
    values = [var.architecture]
  }
}

# --- Network: a VPC with one public subnet; agents reachable only on their ports. ---

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = { Name = "nnb-${var.run_id}" }
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = { Name = "nnb-${var.run_id}" }
}

resource "aws_subnet" "this" {
  vpc_id                  = aws_vpc.this.id
  cidr_block              = var.subnet_cidr
  availability_zone       = var.availability_zone
  map_public_ip_on_launch = true # tenants download nnb; the controller may sit outside the VPC
  tags                    = { Name = "nnb-${var.run_id}" }
}

resource "aws_route_table" "this" {
  vpc_id = aws_vpc.this.id

  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this.id
  }

  tags = { Name = "nnb-${var.run_id}" }
}

resource "aws_route_table_association" "this" {
  subnet_id      = aws_subnet.this.id
  route_table_id = aws_route_table.this.id
}

resource "aws_security_group" "agents" {
  name_prefix = "nnb-${var.run_id}-"
  description = "nnb agents: agent port from the VPC and the controller, probe ports inside the VPC"
  vpc_id      = aws_vpc.this.id
  tags        = { Name = "nnb-${var.run_id}" }
}

resource "aws_vpc_security_group_ingress_rule" "agent" {
  for_each          = toset(concat([var.vpc_cidr], var.controller_cidrs))
  security_group_id = aws_security_group.agents.id
  description       = "nnb agent"
  ip_protocol       = "tcp"
  from_port         = var.agent_port
  to_port           = var.agent_port
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "probe" {
  security_group_id = aws_security_group.agents.id
  description       = "nnb probes and load sinks (UDP), inside the VPC"
  ip_protocol       = "udp"
  from_port         = var.probe_ports.from
  to_port           = var.probe_ports.to
  cidr_ipv4         = var.vpc_cidr
}

resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.agents.id
  description       = "downloads (nnb, packages) and replies"
  ip_protocol       = "-1"
  cidr_ipv4         = "0.0.0.0/0"
}

# --- The dedicated host: every tenant on one physical server. ---

resource "aws_ec2_host" "this" {
  availability_zone = var.availability_zone
  instance_family   = var.host_family
  instance_type     = var.host_instance_type
  auto_placement    = "off" # only instances that name this host land on it
  tags              = { Name = "nnb-${var.run_id}" }

  lifecycle {
    precondition {
      condition     = (var.host_family == null) != (var.host_instance_type == null)
      error_message = "Set exactly one of host_family and host_instance_type."
    }
  }
}

# --- Tenants: the test node first, then the neighbors (thesis 5.1). ---

resource "aws_instance" "test" {
  ami                         = local.ami_id
  instance_type               = local.test_tenant.instance_type
  host_id                     = aws_ec2_host.this.id
  tenancy                     = "host"
  availability_zone           = var.availability_zone
  subnet_id                   = aws_subnet.this.id
  vpc_security_group_ids      = [aws_security_group.agents.id]
  key_name                    = var.key_name
  iam_instance_profile        = var.tenant_instance_profile
  user_data                   = templatefile("${path.module}/../cloud-init.yaml", merge(local.cloud_init, { tenant = local.test_tenant.name }))
  user_data_replace_on_change = true

  metadata_options {
    http_tokens = "required"
  }

  tags = {
    Name       = "nnb-${var.run_id}-${local.test_tenant.name}"
    "nnb:role" = "test"
  }

  depends_on = [aws_route_table_association.this]
}

resource "aws_instance" "neighbor" {
  for_each = local.neighbors

  ami                         = local.ami_id
  instance_type               = each.value.instance_type
  host_id                     = aws_ec2_host.this.id
  tenancy                     = "host"
  availability_zone           = var.availability_zone
  subnet_id                   = aws_subnet.this.id
  vpc_security_group_ids      = [aws_security_group.agents.id]
  key_name                    = var.key_name
  iam_instance_profile        = var.tenant_instance_profile
  user_data                   = templatefile("${path.module}/../cloud-init.yaml", merge(local.cloud_init, { tenant = each.key }))
  user_data_replace_on_change = true

  metadata_options {
    http_tokens = "required"
  }

  tags = {
    Name       = "nnb-${var.run_id}-${each.key}"
    "nnb:role" = "neighbor"
  }

  # The test node is placed on the empty host first.
  depends_on = [aws_instance.test]
}

# --- Optional endpoint: the sink and reflector of network experiments, off the host. ---

resource "aws_instance" "endpoint" {
  count = var.endpoint_instance_type == null ? 0 : 1

  ami                         = local.ami_id
  instance_type               = var.endpoint_instance_type
  availability_zone           = var.availability_zone
  subnet_id                   = aws_subnet.this.id
  vpc_security_group_ids      = [aws_security_group.agents.id]
  key_name                    = var.key_name
  iam_instance_profile        = var.tenant_instance_profile
  user_data                   = templatefile("${path.module}/../cloud-init.yaml", merge(local.cloud_init, { tenant = "endpoint" }))
  user_data_replace_on_change = true

  metadata_options {
    http_tokens = "required"
  }

  tags = {
    Name       = "nnb-${var.run_id}-endpoint"
    "nnb:role" = "endpoint"
  }

  depends_on = [aws_route_table_association.this]
}
