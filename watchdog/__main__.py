from watchdog.cli import main

raise SystemExit(main())
