# What the module runs with. Terraform: its plan-level tests use mock_provider (1.7). hashicorp/aws: 5.x from
# 5.100.0, which the tests plan and apply with (the version mirrored for them), and 6.x, whose published schema
# (tests/unit/terraform/hashicorp-aws-6.json, from the package pinned in development/provider-schema-requirements.txt)
# holds every resource, data source, argument, block and attribute the module and its examples use, with the same
# types as 5.100 (tests/unit/terraform/test_provider_schema.py). A new major version of either is unchecked until
# this file says otherwise.
terraform {
  required_version = ">= 1.7.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100.0, < 7.0.0"
    }
  }
}
