"""The facts the aggregator, the query function and the operator tools share, defined once.

`build.py` copies this package into both Lambda zips; the operator distribution ships it beside
`leaderboard_tools`. It imports nothing but the standard library. What Terraform must agree on
(variable names, defaults, validations) is held equal by tests/unit/core/test_one_definition.py.
"""
