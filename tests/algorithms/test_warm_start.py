"""A warm start of the device-scope algorithms (CPU side, no timing): the
validated tuning tables are cached as JSON beside the kernel cache
(tunings/table_cache.py), so a second process's first call neither imports
PyYAML nor parses a table; any change of a table re-parses it, with its
errors."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilecore.tunings import table_cache
from tilecore.tunings.schema import TuningError

pytestmark = pytest.mark.interpreter_only

_FIRST_CALL = r"""
import json, sys
import numpy as np
from tilecore.algorithms import DeviceReduce as R
from tilecore.tunings import table_cache
x = np.ones(3000, np.float32)
out = np.zeros(1, np.float32)
n = R.sum(None, x, out, x.size)
R.sum(np.zeros(n, np.uint8), x, out, x.size)
print(json.dumps({"yaml": "yaml" in sys.modules, "parses": table_cache.loads[0],
                  "sum": float(out[0])}))
"""


def _first_call(cache: Path) -> dict:
    env = dict(os.environ, TILECORE_CACHE_DIR=str(cache))
    env.pop("TILECORE_TUNING_DIR", None)
    r = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_warm_process_does_not_import_yaml(tmp_path):
    cold = _first_call(tmp_path)
    assert cold["yaml"] and cold["parses"] >= 1 and cold["sum"] == 3000.0
    assert list((tmp_path / "tunings").glob("*.json"))
    warm = _first_call(tmp_path)
    assert not warm["yaml"] and warm["parses"] == 0 and warm["sum"] == 3000.0


_TABLE = """schema: 1
algorithm: reduce
arch: sm_90
provenance: {gpu: none, date: "2026-11-25", method: test, gain: null}
default:
  block_threads: 128
tunings:
  - match: {value_size: 4}
    params: {items_per_thread: 8}
    provenance: {gpu: H100, date: "2026-11-25", method: test row, gain: 0.04,
                 sizes: {65536: {old_gbs: 80.0, new_gbs: 83.2, speedup: 1.04}}}
"""


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "reduce" / "sm_90.yaml"
    path.parent.mkdir()
    path.write_text(_TABLE)
    return path


def _load(path):
    before = table_cache.loads[0]
    t = table_cache.load(path, "reduce", 90)
    return t, table_cache.loads[0] - before


def test_the_cached_table_equals_the_parsed_one(table):
    parsed, n1 = _load(table)
    cached, n2 = _load(table)
    assert (n1, n2) == (1, 0)
    assert cached == parsed
    assert cached.rows[0].provenance["gain"] == 0.04 and cached.rows[0].line == 8
    assert list(cached.rows[0].provenance["sizes"]) == [65536]    # an int, as in the YAML
    assert cached.default == {"block_threads": 128}


def test_a_changed_table_is_parsed_again(table):
    _load(table)
    table.write_text(_TABLE.replace("block_threads: 128", "block_threads: 64"))
    t, parses = _load(table)
    assert parses == 1 and t.default == {"block_threads": 64}
    table.write_text(_TABLE.replace("block_threads: 128", "block_threads: 100"))
    with pytest.raises(TuningError, match="block_threads"):  # not a power of two
        _load(table)


def test_a_damaged_entry_is_ignored(table, tmp_path):
    first, _ = _load(table)
    (entry,) = (tmp_path / "cache" / "tunings").glob("*.json")
    entry.write_text("{not json")
    again, parses = _load(table)
    assert parses == 1 and again == first
    entry.write_text(json.dumps({"sha256": "0", "table": {}}))
    assert _load(table)[1] == 1


def test_no_cache_root_parses_every_time(table, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", "0")
    assert _load(table)[1] == 1 and _load(table)[1] == 1
