# Where each function's code comes from: a local zip, or an object in S3 (a release's zips uploaded
# by the platform team). Nothing is assumed: with neither, planning the function fails and says what
# to provide, instead of reaching for a path outside the module (a module sourced by git URL has none).
locals {
  package_inputs = {
    aggregator = {
      path = var.aggregator_package_path
      key  = var.aggregator_package_s3_key
      hash = var.aggregator_package_source_code_hash
    }
    query = {
      path = var.query_package_path
      key  = var.query_package_s3_key
      hash = var.query_package_source_code_hash
    }
  }

  packages = {
    for function, package in local.package_inputs : function => {
      given       = package.path != null || (var.package_s3_bucket != null && package.key != null)
      unambiguous = package.path == null || package.key == null
      # From S3 the hash is how Terraform notices a new package; from a path it is computed, and a
      # given hash must then match it (the zip is the one the release's manifest describes).
      hashed           = package.path != null || var.package_s3_bucket == null || package.hash != null
      matches_hash     = package.path == null || package.hash == null ? true : filebase64sha256(package.path) == package.hash
      filename         = package.path
      s3_bucket        = package.path == null ? var.package_s3_bucket : null
      s3_key           = package.path == null ? package.key : null
      source_code_hash = package.path != null ? filebase64sha256(package.path) : package.hash
    }
  }
}
