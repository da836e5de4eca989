from anatomy.cli import main

raise SystemExit(main())
