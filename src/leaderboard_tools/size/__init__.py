"""What `leaderboard-tools size` computes: the leaderboard shards a workload needs and whether any number fits
(`sizing`), what the load costs a month (`monthly_cost`) at the prices AWS charges, each with its source (`prices`).
The command's parser and output are `leaderboard_tools.commands.size`; the arithmetic: docs/sizing.md."""
