"""Shared helpers of the front-end tests: run a kernel on the interpreter,
catch a compile error and check its message and location."""
from __future__ import annotations

import importlib.util
import linecache
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilecore as ct

__all__ = ["run", "expect_error", "line_of", "RNG", "write_module", "import_module"]

RNG = np.random.default_rng(1234)


def run(kernel, args, grid=(1,)):
    """Launch `kernel` on the interpreter; returns the args for convenience."""
    ct.launch(None, grid, kernel, tuple(args))
    return args


def line_of(filename: str, marker: str) -> int:
    """1-based line of `filename` whose text contains `marker` (unique)."""
    pattern = re.compile(rf"# {re.escape(marker)}(\s|$)")
    lines = [i + 1 for i, text in enumerate(linecache.getlines(filename)) if pattern.search(text)]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def expect_error(kernel, args, cls, message: str, marker: str = None, grid=(1,)):
    """Launch and expect `cls` with exactly `message`; with `marker`, also check that
    str(error) shows the kernel file and the marked line followed by a caret line."""
    with pytest.raises(cls) as info:
        ct.launch(None, grid, kernel, tuple(args))
    err = info.value
    text = getattr(err, "message", str(err))
    assert text == message, f"\n got: {text!r}\nwant: {message!r}"
    if marker is not None:
        filename = kernel.pyfunc.__code__.co_filename
        line = line_of(filename, marker)
        s = str(err)
        assert f'File "{filename}", line {line},' in s, s
        frame = s.splitlines()
        i = next(k for k, t in enumerate(frame) if f"line {line}," in t)
        assert frame[i + 1].strip() == linecache.getline(filename, line).strip()
        assert re.fullmatch(r" *\^+", frame[i + 2]), frame[i + 2]
    return err


def write_module(path: Path, text: str) -> Path:
    """Write `text` (dedented) to `path`; returns the path."""
    path.write_text(textwrap.dedent(text))
    return path


def import_module(path: Path, name: str):
    """Import the file `path` as module `name` with Python's standard source
    loader (as `import` does; pytest's assertion rewriting is not involved)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
