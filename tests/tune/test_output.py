"""tilecore.tune.output: tuned entries written as tuning tables that the loader
accepts and the dispatch layer uses; the merge rule; atomic writes; the
environment provenance; the default user tuning directory."""
import os
import threading

import numpy as np
import pytest

import tilecore as ct
from tilecore import config
from tilecore.algorithms import DeviceReduce as R
from tilecore.dispatch.hub import policy_fields
from tilecore.dispatch.reduce_policy import select_reduce_policy
from tilecore.tune import output as O
from tilecore.tune.output import TunedEntry, environment_provenance, write_table
from tilecore.tunings import TUNING_DIR_ENV, TuningError, clear_cache, lookup, parse_table

pytestmark = pytest.mark.interpreter_only

F32 = {"value_size": 4, "accum": "float32", "op": "add", "offset_size": 4}
I32 = {"value_size": 4, "accum": "int32", "op": "max", "offset_size": 4}
PROV = {"gpu": "Test GPU", "cc": 90, "driver": "13.0", "nvrtc": "13.5", "tilecore": "0.1.0",
        "date": "2026-12-01", "method": "tilecore.tune"}
SIZES = {1 << 16: {"old_gbs": 800.0, "new_gbs": 900.0, "speedup": 1.125, "noise": 0.01},
         1 << 24: {"old_gbs": 3000.0, "new_gbs": 3090.0, "speedup": 1.03, "noise": None}}


def base(key, cc=90):
    """The complete policy the hub gives now (what the runner passes as old_params)."""
    return policy_fields(select_reduce_policy(cc, key))


def entry(key=F32, params=None, old=None, score=1.05, trials=40, sizes=SIZES, strategy="tpe"):
    return TunedEntry(dict(key), params or {"block_threads": 512, "items_per_thread": 8},
                      old if old is not None else base(key), sizes, score, trials, strategy)


def load(path, algorithm="reduce", cc=90):
    return parse_table(path.read_text(), str(path), algorithm, cc)


def row_for(table, match):
    rows = [r for r in table.rows if r.match == match]
    assert len(rows) == 1, rows
    return rows[0]


def quiet(lines=None):
    return (lines.append if lines is not None else (lambda line: None))


def test_new_table_round_trips_through_the_loader(tmp_path):
    # sm_100: no shipped table, so the file holds only what the tuner wrote
    old = base(F32, 100)
    path = write_table(tmp_path, "reduce", 100, [entry(old=old)], PROV, log=quiet())
    assert path == tmp_path / "reduce" / "sm_100.yaml"
    text = path.read_text()
    assert text.startswith(O.GENERATED_MARK) and "tilecore/tunings/schema.py" in text
    table = load(path, cc=100)
    assert table.default == {}
    assert table.provenance == {**PROV, "gain": None}
    (row,) = table.rows
    assert row.match == F32
    assert row.params == {**old, "block_threads": 512, "items_per_thread": 8}
    p = row.provenance
    assert p["method"] == "tilecore.tune, tpe, 40 trials"
    assert (p["gpu"], p["cc"], p["driver"], p["nvrtc"], p["date"]) == \
        ("Test GPU", 90, "13.0", "13.5", "2026-12-01")
    assert (p["trials"], p["score"], p["gain"]) == (40, 1.05, 0.05)
    assert p["sizes"] == {65536: {"old_gbs": 800.0, "new_gbs": 900.0, "speedup": 1.125,
                                  "noise": 0.01},
                          16777216: {"old_gbs": 3000.0, "new_gbs": 3090.0, "speedup": 1.03}}
    assert all(type(n) is int for n in p["sizes"])
    assert not [f for f in os.listdir(path.parent) if f.endswith(".tmp")]


def test_a_new_table_starts_from_the_shipped_one(tmp_path):
    shipped = lookup.find_table("reduce", 90)
    assert shipped is not None and "tuning_db" in shipped.path
    lines = []
    path = write_table(tmp_path, "reduce", 90, [entry()], PROV, log=quiet(lines))
    assert lines[0].endswith("which this table would otherwise hide") and "seeded" in lines[0]
    assert "added accum=float32,offset_size=4,op=add,value_size=4" in lines[1]
    table = load(path)
    assert table.default == shipped.default and table.provenance == shipped.provenance
    for r in shipped.rows:   # every shipped row, with its provenance (own or the table's)
        kept = row_for(table, r.match)
        assert (kept.params, kept.provenance) == (r.params, r.provenance)
    assert len(table.rows) == len(shipped.rows) + 1
    text = path.read_text()
    assert "# arg_min/arg_max carry a value and an index per item: half as many items." in text
    assert "# DeviceReduce tuning table for sm_90" in text   # the shipped header, kept


KEYS = [F32, I32, {**F32, "op": "arg"}, {**F32, "value_size": 1, "accum": "int32"},
        {**F32, "value_size": 8, "accum": "float64"}, {**I32, "offset_size": 8}]


def test_dispatch_uses_a_fresh_table_and_keeps_the_other_shipped_rows(user_dir, monkeypatch):
    monkeypatch.setenv(TUNING_DIR_ENV, "")          # shipped tables only: the reference
    clear_cache()
    before = {i: select_reduce_policy(90, k) for i, k in enumerate(KEYS)}
    monkeypatch.setenv(TUNING_DIR_ENV, str(user_dir))
    clear_cache()
    write_table(user_dir, "reduce", 90, [entry()], PROV, log=quiet())
    for i, k in enumerate(KEYS):
        p = select_reduce_policy(90, k)
        assert str(user_dir) in p.source
        if k == F32:
            assert (p.block_threads, p.items_per_thread) == (512, 8)
        else:
            assert policy_fields(p) == policy_fields(before[i]), k


def test_the_process_that_writes_a_table_rebuilds_its_cached_plans(user_dir, monkeypatch):
    grids = []
    monkeypatch.setattr(ct, "launch", lambda stream, grid, kernel, args: grids.append(grid))
    x = np.arange(3001, dtype=np.float32)
    out = np.zeros(1, np.float32)
    temp = np.zeros(1 << 16, np.uint8)
    R.sum(temp, x, out, x.size)
    assert tuple(grids[-1]) == (1,)        # 3001 items: one single-block launch
    small = {"block_threads": 32, "items_per_thread": 1, "single_block_max_items": 0}
    write_table(user_dir, "reduce", 90, [entry(params=small)], PROV, log=quiet())
    grids.clear()
    R.sum(temp, x, out, x.size)            # the same call signature: a cached plan before
    assert len(grids) == 2 and tuple(grids[0]) != (1,)


def write_rows(d, rows_yaml, prov="{gpu: none, date: '2026-01-01', method: hand-set, gain: null}"):
    path = d / "reduce" / "sm_100.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"schema: 1\nalgorithm: reduce\narch: sm_100\nprovenance: {prov}\n"
                    f"default: {{blocks_per_sm: 4}}\ntunings:\n{rows_yaml}")
    return path


F32_MATCH = "{value_size: 4, accum: float32, op: add, offset_size: 4}"
MEASURED = (f"  - match: {F32_MATCH}\n"
            "    params: {block_threads: 128, items_per_thread: 16}\n"
            "    provenance: {gpu: X, date: '2026-01-01', method: tilecore.tune, gain: 0.05,"
            " score: 1.05}\n")


def test_a_measured_entry_replaces_a_hand_set_row(tmp_path):
    path = write_rows(tmp_path, f"  # hand-set comment\n  - match: {F32_MATCH}\n"
                                "    params: {block_threads: 128}\n")
    lines = []
    write_table(tmp_path, "reduce", 100, [entry(score=0.99, old={})], PROV, log=quiet(lines))
    assert lines == [f"{path}: replaced accum=float32,offset_size=4,op=add,value_size=4: a "
                     f"measured row replaces a hand-set one; {{block_threads: 512, "
                     f"items_per_thread: 8}}, score 0.99, 40 trials"]
    row = row_for(load(path, cc=100), F32)
    assert row.params["block_threads"] == 512 and row.provenance["score"] == 0.99
    assert "hand-set comment" not in path.read_text()   # the replaced row's comment goes


@pytest.mark.parametrize("score, replaced", [(1.06, True), (1.05, False), (1.01, False)])
def test_a_measured_row_is_replaced_only_by_a_higher_score(tmp_path, score, replaced):
    path = write_rows(tmp_path, MEASURED)
    before = path.read_bytes()
    lines = []
    write_table(tmp_path, "reduce", 100, [entry(score=score)], PROV, log=quiet(lines))
    row = row_for(load(path, cc=100), F32)
    assert row.params["block_threads"] == (512 if replaced else 128)
    assert lines[0].split(" ")[1] == ("replaced" if replaced else "kept")
    if not replaced:
        assert path.read_bytes() == before           # nothing to write: untouched
        assert "measured score 1.0500 >= the new" in lines[0]


@pytest.mark.parametrize("score, replaced", [(1.01, True), (1.0, False), (0.97, False)])
def test_a_retune_against_the_row_wins_when_it_beats_it(tmp_path, score, replaced):
    """The search's baseline was the row's own policy (it was current): its score is
    measured against the row, so any score above 1 beats it, even below the row's 1.05."""
    path = write_rows(tmp_path, MEASURED)
    old = {**base(F32, 100), "blocks_per_sm": 4, "block_threads": 128, "items_per_thread": 16}
    lines = []
    write_table(tmp_path, "reduce", 100, [entry(score=score, old=old)], PROV, log=quiet(lines))
    row = row_for(load(path, cc=100), F32)
    assert row.params["block_threads"] == (512 if replaced else 128)
    assert ("head-to-head" if replaced else "found nothing faster") in lines[0]


def test_a_search_that_confirms_a_hand_set_row_adds_its_measurements(tmp_path):
    path = write_rows(tmp_path, f"  - match: {F32_MATCH}\n    params: {{block_threads: 128}}\n")
    old = {**base(F32, 100), "block_threads": 128}
    write_table(tmp_path, "reduce", 100, [entry(params={"block_threads": 128}, old=old,
                                                score=1.0)], PROV, log=quiet())
    row = row_for(load(path, cc=100), F32)
    assert row.params == old and row.provenance["sizes"]


def test_rows_ordered_by_specificity_file_order_kept_new_sorted(tmp_path):
    path = write_rows(tmp_path, "  - match: {op: max, value_size: 4}\n    params: {block_threads: 64}\n"
                                "  - match: {value_size: 8}\n    params: {block_threads: 64}\n"
                                "  - match: {value_size: 2}\n    params: {block_threads: 64}\n")
    keys = [I32, F32, {**F32, "value_size": 8, "accum": "float64"}]
    write_table(tmp_path, "reduce", 100, [entry(k) for k in keys], PROV, log=quiet())
    table = load(path, cc=100)
    assert [r.match for r in table.rows] == [
        {"value_size": 8}, {"value_size": 2}, {"value_size": 4, "op": "max"},
        F32, I32, {**F32, "value_size": 8, "accum": "float64"}]   # new: by key, schema order
    text = path.read_text()
    write_table(tmp_path, "reduce", 100, [entry(k) for k in keys], PROV, log=quiet())
    assert path.read_text() == text                       # equal scores: kept, unchanged


def test_invalid_input_is_refused_naming_it(tmp_path):
    with pytest.raises(TuningError, match=r"key field 'dtype'='float32': expected a field in"):
        write_table(tmp_path, "reduce", 100, [entry({**F32, "dtype": "float32"})], PROV)
    with pytest.raises(TuningError, match=r"field 'block_threads': expected a power of two"):
        write_table(tmp_path, "reduce", 100, [entry(params={"block_threads": 100})], PROV)
    with pytest.raises(TuningError, match=r"score: expected a positive finite number"):
        write_table(tmp_path, "reduce", 100, [entry(score=float("nan"))], PROV)
    with pytest.raises(TuningError, match=r"sizes\[65536\]: expected the fields"):
        write_table(tmp_path, "reduce", 100, [entry(sizes={65536: {"speedup": 1.0}})], PROV)
    with pytest.raises(TuningError, match=r"argument provenance: expected 'gpu'"):
        write_table(tmp_path, "reduce", 100, [entry()], {**PROV, "colour": "red"})
    with pytest.raises(TuningError, match=r"two entries for key"):
        write_table(tmp_path, "reduce", 100, [entry(), entry()], PROV)
    with pytest.raises(TuningError, match=r"unknown algorithm 'sort'"):
        write_table(tmp_path, "sort", 100, [entry()], PROV)
    assert not (tmp_path / "reduce" / "sm_100.yaml").exists()
    path = write_rows(tmp_path, "  - match: {value_size: 3}\n    params: {block_threads: 64}\n")
    text = path.read_text()
    with pytest.raises(TuningError, match=rf"{path}:7: field match.value_size.*fix it or move"):
        write_table(tmp_path, "reduce", 100, [entry()], PROV)
    assert path.read_text() == text


def test_a_failed_write_leaves_the_old_table_and_no_temporary_file(tmp_path, monkeypatch):
    path = write_rows(tmp_path, MEASURED)
    text = path.read_text()

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(O.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_table(tmp_path, "reduce", 100, [entry(I32)], PROV, log=quiet())
    assert path.read_text() == text
    assert sorted(os.listdir(path.parent)) == [".sm_100.yaml.lock", "sm_100.yaml"]


def test_concurrent_writers_lose_no_rows(tmp_path):
    ops = ["add", "mul", "min", "max", "and", "or", "xor"]

    def tune(op):
        k = {**I32, "op": op}
        write_table(tmp_path, "reduce", 100, [entry(k)], PROV, log=quiet())
    threads = [threading.Thread(target=tune, args=(op,)) for op in ops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    table = load(tmp_path / "reduce" / "sm_100.yaml", cc=100)
    assert sorted(r.match["op"] for r in table.rows) == sorted(ops)


def test_environment_provenance_without_a_gpu():
    p = environment_provenance(None, 90)
    assert (p["gpu"], p["cc"], p["driver"]) == ("none", 90, None)
    assert p["tilecore"] == ct.__version__ and len(p["date"]) == 10
    assert environment_provenance(None)["cc"] is None
    from tilecore.backend import nvrtc_version
    assert p["nvrtc"] == nvrtc_version()


def test_environment_provenance_reads_the_device(monkeypatch):
    class Dev:
        name, compute_capability = "NVIDIA H100 80GB HBM3", (9, 0)
    import tilecore.runtime
    monkeypatch.setattr(tilecore.runtime, "get_device", lambda ordinal: Dev())
    monkeypatch.setattr(O, "_driver_version", lambda: "13.0")
    p = environment_provenance(0)
    assert (p["gpu"], p["cc"], p["driver"]) == ("NVIDIA H100 80GB HBM3", 90, "13.0")
    with pytest.raises(ValueError, match=r"argument cc=80 is not device 0's compute "
                                         r"capability 90"):
        environment_provenance(0, 80)


def test_the_default_user_tuning_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(TUNING_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert config.user_tuning_dir() == tmp_path / "data" / "tilecore" / "tuning_db"
    assert O.default_directory() == config.user_tuning_dir()
    assert lookup.table_dirs()[0] == config.user_tuning_dir()     # read before the shipped
    monkeypatch.setenv("XDG_DATA_HOME", "relative/path")          # ignored (XDG rule)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.user_tuning_dir() == tmp_path / "home/.local/share/tilecore/tuning_db"
    monkeypatch.setenv(TUNING_DIR_ENV, str(tmp_path))
    assert config.user_tuning_dir() == tmp_path
    for off in ("", "0", "off"):
        monkeypatch.setenv(TUNING_DIR_ENV, off)
        assert config.user_tuning_dir() is None and config.tuning_dir() is None
        assert [d.name for d in lookup.table_dirs()] == ["tuning_db"]
        with pytest.raises(ValueError, match="no user tuning directory"):
            O.default_directory()


def test_tables_written_to_the_default_directory_are_read(tmp_path, monkeypatch):
    monkeypatch.delenv(TUNING_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    clear_cache()
    try:
        path = write_table(O.default_directory(), "reduce", 90, [entry()], PROV, log=quiet())
        assert path.is_relative_to(tmp_path)
        p = select_reduce_policy(90, F32)
        assert p.block_threads == 512 and str(path) in p.source
    finally:
        clear_cache()


def test_key_and_size_text():
    assert O.key_text({"op": "add", "by_key": True, "accum": "int32"}) == \
        "accum=int32,by_key=true,op=add"
    assert [O.size_text(n) for n in (1, 65536, 1000)] == ["2^0", "2^16", "1000"]
