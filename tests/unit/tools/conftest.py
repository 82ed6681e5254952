"""The operator tools' tests. Their fixtures (`aws`, `dynamodb`) are those of tests/unit/conftest.py; operator_stack.py
deploys the module's resources on moto and holds the helpers the files share. A fixture only one file uses stays in
that file (test_operator_tools.py's autouse `quick_bands` applies to that file's commands only).
"""
