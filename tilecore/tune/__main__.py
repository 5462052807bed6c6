"""`python -m tilecore.tune`: see tilecore/tune/cli.py and docs/tuning.md."""
from .cli import main

raise SystemExit(main())
