"""The commands of `leaderboard-tools`, a module (or a package, where it is more than one) per command, all alike.

A command module has `register(subparsers)`, which declares its parser (help, description, flags)
and binds `run` as its handler, and `run(arguments) -> int`, which does the work, prints what it
has to say and returns the exit code. `top`, `rank`, `all`, `range`, `range-by-count`, `card` and
`score` share one package (`leaderboards`: their flags, their printing, their runs): they differ by
a flag or two. `size` is a package too (its parser and run; what it prints in `size.report`).
`cli.py` lists them and dispatches to them; the work itself is in the domain modules beside this
package (`size`, `rekey`, `reconcile`, `recover`, `backfill`, `query_client`, `reader_count`).

The exit codes are one table for every command (docs/operations.md, *Exit codes*; `EXIT_CODES` below is what `--help`
prints): scripts rely on 0, 1, 3 and 4 as they always were.
"""

EXIT_EXACT = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
"""A flag or an environment variable the command cannot use (argparse's own code for a usage error)."""
EXIT_DIFFERENCES = 3
"""Differences remain that waiting will not fix: reported without --repair, a TTL month, a count TTL keeps, a band
that could not be recorded in its queue, a band DynamoDB's time could not be read for. `readers`: more readers of the
stream's shards than the two DynamoDB Streams allows."""
EXIT_PENDING = 4
"""What remains waits only for the stream: downloads in flight, a checkpoint behind, a conflict, a band closed or
replaced (not known which). Run again later."""
EXIT_AWS = 5
"""AWS refused the request or could not be reached: no or refused credentials, no region, an unknown profile, access
denied, throttled past the retries, the endpoint unreachable or timing out."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT, what a shell reports): the line printed says what state the run left and what to run."""
EXIT_BROKEN_PIPE = 141
"""What read the output went away (`... | head -1`): 128 + SIGPIPE, what a shell reports for a tool it killed."""

EXIT_CODES = """exit codes (the same for every command; docs/operations.md, "Exit codes"):
  0    success: everything exact (nothing differs, or all repaired), the answer printed
  1    error: said on stderr (a deployment that cannot be read or contradicts a flag, a clock refusal, ...)
  2    usage: a flag or an environment variable (AWS_ENDPOINT_URL, ...) the command cannot use
  3    differences remain that waiting will not fix (reconcile without --repair, TTL, ...); readers: too many
  4    pending: what remains waits only for the stream; run again later
  5    AWS refused or unreachable: credentials, region, profile, access denied, throttled, endpoint, timeouts
  130  interrupted (Ctrl-C): the line printed says what state it left and what to run
  141  the output's reader went away (a closed pipe, `| head`): nothing more is printed"""
