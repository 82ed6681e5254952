"""The development tooling's tests (build, release, emulators, stacks, provider proxy, benchmark). A fixture only one
file uses stays in that file; the shared ones are in tests/unit/conftest.py.
"""
