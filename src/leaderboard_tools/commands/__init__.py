"""The commands of `leaderboard-tools`, a module per command, all alike.

A command module has `register(subparsers)`, which declares its parser (help, description, flags)
and binds `run` as its handler, and `run(arguments) -> int`, which does the work, prints what it
has to say and returns the exit code. `top`, `rank`, `all`, `range`, `range-by-count`, `card` and
`score` share one module (`leaderboards`): they share their flags and their run, and differ by a flag
or two. `cli.py` lists the modules and
dispatches to them; the work itself is in the domain modules beside this package (`sizing`,
`rekey`, `reconcile`, `recover`, `query_client`, `stream_readers`).
"""

EXIT_EXACT = 0
EXIT_ERROR = 1
EXIT_DIFFERENCES = 3
"""Differences remain that waiting will not fix: reported without --repair, a TTL month, a count TTL keeps, a band
that could not be recorded in its queue, a band DynamoDB's time could not be read for. `readers`: more readers of the
stream's shards than the two DynamoDB Streams allows."""
EXIT_PENDING = 4
"""What remains waits only for the stream: downloads in flight, a checkpoint behind, a conflict, a band closed or
replaced (not known which). Run again later."""
