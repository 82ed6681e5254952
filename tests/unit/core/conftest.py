"""The shared core's tests (leaderboard_core) and the one-definition checks. No fixture of their own."""
