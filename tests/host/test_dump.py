"""TILECORE_DUMP_DIR that cannot be created or written: one ValueError naming
the variable, its value and the OS's reason, raised before anything is
compiled; never a raw OS traceback."""
import errno
import os
from pathlib import Path

import numpy as np
import pytest

import tilecore as ct


@ct.kernel
def negate(x, y, TILE: ct.Constant[int]):
    bid = ct.bid(0)
    ct.store(y, index=(bid,), tile=-ct.load(x, index=(bid,), shape=(TILE,)))


ARGS = (np.zeros(64, np.float32), np.zeros(64, np.float32), 64)
EXPECTED = "a directory that tilecore can create and write"


def _compile_error(monkeypatch, value: str) -> ValueError:
    monkeypatch.setenv("TILECORE_DUMP_DIR", value)
    with pytest.raises(ValueError) as e:
        ct.compile(negate, ARGS, arch="sm_80")
    assert e.value.__cause__ is None and e.value.__suppress_context__
    return e.value


def test_dump_dir_is_a_file(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    error = _compile_error(monkeypatch, str(blocker))
    assert str(error) == (f"Invalid value of TILECORE_DUMP_DIR: expected {EXPECTED}, got "
                          f"{str(blocker)!r} ([Errno {errno.EEXIST}] File exists: "
                          f"{str(blocker)!r})")
    assert blocker.read_text() == "x"


def test_dump_dir_below_a_file(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "dumps"
    error = _compile_error(monkeypatch, str(target))
    assert str(error).startswith(f"Invalid value of TILECORE_DUMP_DIR: expected {EXPECTED}, "
                                 f"got {str(target)!r} ([Errno {errno.ENOTDIR}] Not a directory")


def test_dump_dir_not_writable(monkeypatch, tmp_path):
    """As chmod 555 would be for a user other than root (tests may run as root)."""
    def denied(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
    monkeypatch.setattr(Path, "write_text", denied)
    error = _compile_error(monkeypatch, str(tmp_path))
    assert str(error).startswith(f"Invalid value of TILECORE_DUMP_DIR: expected {EXPECTED}, "
                                 f"got {str(tmp_path)!r} ([Errno {errno.EACCES}] Permission "
                                 f"denied: '{tmp_path}{os.sep}negate_")
