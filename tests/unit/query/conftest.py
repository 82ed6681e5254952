"""The query function's tests. Their fixtures (moto's tables, the Lambda context) are those of tests/unit/conftest.py;
aggregates_on_moto.py holds the helpers they share with the policy and board-command tests. A fixture only one file
uses stays in that file.
"""
