"""Make the algorithm tests' helpers (`algo_helpers`) importable under
`--import-mode=importlib`, which does not put test folders on sys.path; the
`launches` fixture (tilecore.launch recorded, nothing run)."""
import sys
from pathlib import Path

import pytest

import tilecore as ct

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from algo_helpers import Recorder  # noqa: E402


@pytest.fixture
def launches(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(ct, "launch", rec)
    return rec
