# Terraform and provider versions this module is written for.
terraform {
  required_version = ">= 1.3"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      "nnb:run-id"         = var.run_id
      "nnb:provisioned-by" = "terraform"
    }
  }
}
