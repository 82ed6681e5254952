# What the module is tested with: its plan-level tests use mock_provider (Terraform 1.7), and the
# provider is hashicorp/aws 5.100.0 (the version mirrored for the tests); a new major version of either
# is untested until this file says otherwise.
terraform {
  required_version = ">= 1.7.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100.0, < 6.0.0"
    }
  }
}
