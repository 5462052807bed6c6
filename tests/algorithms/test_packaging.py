"""The shipped tuning tables are found from a wheel, not only from the
checkout: build a wheel of a copy of the sources (`pip wheel`, as
`pip install .` does), check that it holds every table of `tuning_db/` as
`tilecore/tuning_db/`, install it into a fresh directory and look the tables
up from a process that imports that copy.

Slow for a unit test (about 10 s: pip builds in an isolated environment, and
compiles the C extension); pip needs setuptools from an index (or its local
mirror). Skipped when the build cannot get it."""
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = sorted(p.relative_to(ROOT / "tuning_db").as_posix()
                for p in (ROOT / "tuning_db").glob("*/*.yaml"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    shutil.copytree(ROOT / "tilecore", src / "tilecore", ignore=ignore)
    shutil.copytree(ROOT / "tuning_db", src / "tuning_db", ignore=ignore)
    env = dict(os.environ, PIP_NO_INPUT="1")
    # With setuptools and wheel installed here the wheel builds without an isolated
    # environment, so without network access.
    local = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))
    isolation = ["--no-build-isolation"] if local else []
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q",
                        "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True,
                       env=env, timeout=300)
    if r.returncode != 0:
        if not isolation and ("No matching distribution" in r.stderr or
                              "Could not find a version" in r.stderr):
            # no setuptools here and no index to fetch it from: nothing can build a wheel
            pytest.skip("pip cannot get the build requirements (setuptools) here")
        raise AssertionError(f"pip wheel failed:\n{r.stdout}\n{r.stderr}")
    (whl,) = (tmp / "dist").glob("tilecore-*.whl")
    return whl


def test_wheel_holds_every_table(wheel):
    assert TABLES, "no tables in tuning_db/"
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [t for t in TABLES if f"tilecore/tuning_db/{t}" not in names]
    assert not missing, f"tables missing from the wheel: {missing}"


def test_installed_copy_finds_the_shipped_tables(wheel, tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                        "--target", str(target), str(wheel)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    probe = (
        "import tilecore, sys\n"
        "from tilecore.tunings import lookup\n"
        f"assert tilecore.__file__.startswith({str(target)!r}), tilecore.__file__\n"
        "d = lookup.shipped_dir()\n"
        f"assert d is not None and str(d).startswith({str(target)!r}), d\n"
        "t = lookup.find_table('reduce', 90)\n"
        "assert t is not None and t.path.startswith(str(d)), t\n"
        "r = lookup.resolve('reduce', 100, {'value_size': 4, 'accum': 'float32', 'op': 'add',"
        " 'offset_size': 4})\n"
        "assert 'sm_90.yaml' in r.source and r.params, r\n"
        "print('ok', r.source)\n")
    env = {k: v for k, v in os.environ.items() if k != "TILECORE_TUNING_DIR"}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
