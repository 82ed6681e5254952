"""The Terraform module's tests (policies, contract, interface, validations, examples, the stream filter). Their
fixtures are those of tests/unit/conftest.py; lambda_environment.py reads what lambda.tf gives each function.
"""
