from leaderboard_tools.cli import main

raise SystemExit(main())
