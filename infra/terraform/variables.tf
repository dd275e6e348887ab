# Inputs of the nnb Terraform module: where the host goes, what runs on it, and how
# the tenants install and start `nnb agent` (the same cloud-init template nnb's own
# aws provider renders: ../cloud-init.yaml).

variable "region" {
  description = "AWS region, e.g. us-east-1 (the thesis used us-east-2)."
  type        = string
  default     = "us-east-1"
}

variable "availability_zone" {
  description = "Availability zone of the dedicated host and the subnet, e.g. us-east-1a. Pick one that offers the host family."
  type        = string
}

variable "run_id" {
  description = "Label of this deployment: tagged on every resource (nnb:run-id) and passed to the agents."
  type        = string
  default     = "terraform"
}

variable "vpc_cidr" {
  description = "CIDR of the VPC created for the tenants."
  type        = string
  default     = "10.42.0.0/16"
}

variable "subnet_cidr" {
  description = "CIDR of the tenants' subnet (inside vpc_cidr)."
  type        = string
  default     = "10.42.1.0/24"
}

variable "controller_cidrs" {
  description = "Where the nnb controller runs (e.g. [\"203.0.113.7/32\"]): the only addresses outside the VPC that may reach the agent port."
  type        = list(string)

  validation {
    condition     = alltrue([for c in var.controller_cidrs : can(cidrnetmask(c))])
    error_message = "controller_cidrs must be CIDR blocks such as 203.0.113.7/32."
  }
}

variable "agent_port" {
  description = "TCP port of `nnb agent` (nnb's default 7700)."
  type        = number
  default     = 7700
}

variable "probe_ports" {
  description = "UDP port range of the latency probes and load sinks, open inside the VPC only. nnb binds them to ephemeral ports, hence the Linux ephemeral range by default."
  type = object({
    from = number
    to   = number
  })
  default = {
    from = 32768
    to   = 60999
  }
}

variable "host_family" {
  description = "Dedicated host family, e.g. m5 (any size of the family fits). Set this or host_instance_type."
  type        = string
  default     = null
}

variable "host_instance_type" {
  description = "Dedicated host for one instance type only, e.g. m5.large. Set this or host_family."
  type        = string
  default     = null
}

variable "tenants" {
  description = "The tenants on the host. The one with role \"test\" is launched first, the neighbors after it. Sizes must fit the host (see crates/catalog/catalog.toml: e.g. 48 m5.large per m5 host)."
  type = list(object({
    name          = string
    role          = string
    instance_type = string
  }))

  validation {
    condition     = length([for t in var.tenants : t if t.role == "test"]) == 1
    error_message = "Exactly one tenant must have role = \"test\"."
  }

  validation {
    condition     = alltrue([for t in var.tenants : contains(["test", "neighbor"], t.role)])
    error_message = "A tenant's role is \"test\" or \"neighbor\"."
  }

  validation {
    condition     = length(distinct([for t in var.tenants : t.name])) == length(var.tenants)
    error_message = "Tenant names must be unique."
  }
}

variable "architecture" {
  description = "CPU architecture of the host family: x86_64 (m5, m6i, m6a, m7i) or arm64 (m6g, c7g, m7g). Picks the Ubuntu image when ami_id is not set."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture is x86_64 or arm64."
  }
}

variable "ami_id" {
  description = "AMI of the tenants. Default: the latest Ubuntu Server 24.04 LTS of `architecture` (the thesis' OS)."
  type        = string
  default     = null
}

variable "key_name" {
  description = "EC2 key pair for SSH (debugging only: the security group does not open SSH). Default: none."
  type        = string
  default     = null
}

variable "tenant_instance_profile" {
  description = "Instance profile of the tenants, needed when install_method = \"s3\" (read access to the nnb binaries). Default: none."
  type        = string
  default     = null
}

variable "install_method" {
  description = "How the tenants get nnb: url (https download), s3 (aws s3 cp; needs the AWS CLI in the image and tenant_instance_profile) or preinstalled (a path in the image)."
  type        = string
  default     = "url"

  validation {
    condition     = contains(["url", "s3", "preinstalled"], var.install_method)
    error_message = "install_method is url, s3 or preinstalled."
  }
}

variable "nnb_x86_64" {
  description = "nnb for x86_64 tenants: an https URL, an s3:// object or a path, matching install_method."
  type        = string
  default     = ""
}

variable "nnb_aarch64" {
  description = "nnb for arm64 tenants: an https URL, an s3:// object or a path, matching install_method."
  type        = string
  default     = ""
}

variable "agent_token" {
  description = "Bearer token the agents require; give the controller the same one (e.g. `openssl rand -hex 32`)."
  type        = string
  sensitive   = true

  validation {
    condition     = length(var.agent_token) >= 16
    error_message = "agent_token must be at least 16 characters."
  }
}

variable "results_bucket" {
  description = "S3 bucket for results; only used to render the controller's IAM policy output. Default: none."
  type        = string
  default     = null
}

variable "tenant_role_arn" {
  description = "ARN of the role behind tenant_instance_profile; only used to render the controller's IAM policy output (iam:PassRole)."
  type        = string
  default     = null
}

variable "endpoint_instance_type" {
  description = "Instance type of the endpoint agent that network experiments (load-steps, load neighbors) send to, launched OFF the host (default tenancy), e.g. c5n.9xlarge (50 Gbit/s, so it is never the bottleneck). Default: none (CPU experiments need no endpoint)."
  type        = string
  default     = null
}
