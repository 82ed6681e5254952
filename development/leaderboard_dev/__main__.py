from leaderboard_dev.cli import main

raise SystemExit(main())
