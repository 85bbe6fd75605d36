from profilectl.cli import main

raise SystemExit(main())
