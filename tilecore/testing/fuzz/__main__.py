"""`python -m tilecore.testing.fuzz`: see runner.py."""
import sys

from .runner import main

sys.exit(main())
