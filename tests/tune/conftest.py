"""Fixtures of the tuner's tests."""
import pytest

from tilecore.tunings import TUNING_DIR_ENV, clear_cache


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
