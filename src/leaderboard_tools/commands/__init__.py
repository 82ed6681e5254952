"""The commands of `leaderboard-tools`, one module each, all alike.

A command module has `register(subparsers)`, which declares its parser (help, description, flags)
and binds `run` as its handler, and `run(arguments) -> int`, which does the work, prints what it
has to say and returns the exit code. `cli.py` lists the modules and dispatches to them; the work
itself is in the domain modules beside this package (`sizing`, `rekey`, `reconcile`, `recover`,
`query_client`).
"""
