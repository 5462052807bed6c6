"""Make the front-end tests' `frontend_helpers` importable here too under
--import-mode=importlib."""
import sys
from pathlib import Path

_FRONTEND = str(Path(__file__).resolve().parent.parent / "frontend")
if _FRONTEND not in sys.path:
    sys.path.insert(0, _FRONTEND)
