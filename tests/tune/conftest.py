"""Fixtures of the tuner's tests; makes `tune_helpers` importable under
`--import-mode=importlib`, which does not put test folders on sys.path."""
import sys
from pathlib import Path

import pytest

from tilecore.tunings import TUNING_DIR_ENV, clear_cache

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """The user tuning directory (TILECORE_TUNING_DIR, where the tuner writes by
    default) in a temporary folder, with the table cache cleared around the test."""
    d = tmp_path / "user_tunings"
    d.mkdir()
    monkeypatch.setenv(TUNING_DIR_ENV, str(d))
    clear_cache()
    yield d
    clear_cache()
