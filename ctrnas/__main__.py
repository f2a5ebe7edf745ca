from ctrnas.cli import main

raise SystemExit(main())
