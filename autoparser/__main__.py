"""`python -m autoparser` is the same as the `autoparser` console script."""

from autoparser.cli import main

raise SystemExit(main())
