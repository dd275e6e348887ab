# What the nnb controller needs: the agents' addresses (for a `provider.kind = "static"`
# hosts file), the host, and the controller's IAM policy rendered for this setup.

output "host_id" {
  description = "The dedicated host's id."
  value       = aws_ec2_host.this.id
}

output "agent_addresses" {
  description = "Private address:port of each tenant's agent, by tenant name."
  value = merge(
    { (local.test_tenant.name) = "${aws_instance.test.private_ip}:${var.agent_port}" },
    { for name, i in aws_instance.neighbor : name => "${i.private_ip}:${var.agent_port}" },
  )
}

output "agent_public_addresses" {
  description = "Public address:port of each tenant's agent, for a controller outside the VPC (reachable from controller_cidrs only)."
  value = merge(
    { (local.test_tenant.name) = "${aws_instance.test.public_ip}:${var.agent_port}" },
    { for name, i in aws_instance.neighbor : name => "${i.public_ip}:${var.agent_port}" },
  )
}

output "hosts_file" {
  description = "A hosts file for nnb's static provider (name role address), public addresses; save it and point `[provider] hosts` at it."
  value = join("\n", concat(
    ["${local.test_tenant.name} test ${aws_instance.test.public_ip}:${var.agent_port}"],
    [for name, i in aws_instance.neighbor : "${name} neighbor ${i.public_ip}:${var.agent_port}"],
    [for i in aws_instance.endpoint : "endpoint endpoint ${i.public_ip}:${var.agent_port}"],
  ))
}

output "endpoint_address" {
  description = "Private address:port of the endpoint's agent (null without endpoint_instance_type)."
  value       = one([for i in aws_instance.endpoint : "${i.private_ip}:${var.agent_port}"])
}

output "instance_ids" {
  description = "Instance id of each tenant, by tenant name."
  value = merge(
    { (local.test_tenant.name) = aws_instance.test.id },
    { for name, i in aws_instance.neighbor : name => i.id },
  )
}

output "vpc_id" {
  description = "The VPC's id."
  value       = aws_vpc.this.id
}

output "subnet_id" {
  description = "The subnet's id (also usable as `[provider] subnet_id` for nnb's own aws provider)."
  value       = aws_subnet.this.id
}

output "security_group_id" {
  description = "The agents' security group id (usable as `[provider] security_group_ids`)."
  value       = aws_security_group.agents.id
}

output "controller_policy_json" {
  description = "../iam-policy.json for the controller with results_bucket and tenant_role_arn filled in (null until both are set)."
  value = (var.results_bucket == null || var.tenant_role_arn == null ? null :
    templatefile("${path.module}/../iam-policy.json", {
      bucket          = var.results_bucket
      tenant_role_arn = var.tenant_role_arn
  }))
}
