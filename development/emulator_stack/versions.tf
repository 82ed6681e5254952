# The development stack stays on what the tests install (the mirrored hashicorp/aws 5.100); the module itself also
# admits 6.x (terraform/versions.tf).
terraform {
  required_version = ">= 1.7.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100.0, < 6.0.0"
    }
  }
}
