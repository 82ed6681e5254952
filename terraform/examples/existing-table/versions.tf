# hashicorp/aws 5.x (from 5.100.0) and 6.x, as the module admits: see ../../versions.tf.
terraform {
  required_version = ">= 1.7.0, < 2.0.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100.0, < 7.0.0"
    }
  }
}
