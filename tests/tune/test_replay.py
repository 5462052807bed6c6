"""replay.py on synthetic tables (a model of run time over real tilecore
search spaces, not GPU measurements), directly and after a round trip
through save_table/load_table; benchmarks/bench_tuner_replay.py end to end
with a small budget."""
import importlib.util
import json
import math
import sys
from pathlib import Path

import optuna
import pytest

from tilecore.tune.replay import (SYNTHETIC_DEVICE, TableSpace, load_table, replay, save_table,
                                  summarize, synthetic_table, table_from_evaluations,
                                  table_optimum, trials_to_within)
from tilecore.tune.strategies import Evaluation
from tilecore.tune.space import space_for

from tune_helpers import SCAN_KEY, SCAN_BASE

optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = Path(__file__).resolve().parents[2]


def scan_space():
    """block_threads x items_per_thread x mode, with group_tiles (mode 3) and
    blocks_per_sm (mode 1) applying conditionally: 779 configs."""
    return space_for("scan", SCAN_KEY, SCAN_BASE,
                     fields=("block_threads", "items_per_thread", "mode", "blocks_per_sm",
                             "group_tiles"))


@pytest.fixture(scope="module")
def table():
    return synthetic_table(scan_space(), seed=4)


def test_synthetic_table_covers_the_space(table):
    space = scan_space()
    configs = list(space.configs())
    assert [r["config"] for r in table["results"]] == configs
    assert table["device"] == SYNTHETIC_DEVICE and table["synthetic"] is True
    assert table["dims"] == {d.name: list(d.values) for d in space.dims}
    assert table["base"] == {d.name: SCAN_BASE[d.name] for d in space.dims}
    scores = [r["score"] for r in table["results"]]
    failed = sum(s is None for s in scores)
    assert 0 < failed < len(scores) // 4
    assert table_optimum(table) == max(s for s in scores if s is not None)
    # deterministic: the same seed gives the same table, another seed another one
    assert synthetic_table(space, seed=4) == table
    assert synthetic_table(space, seed=5)["results"] != table["results"]


def test_table_space_reproduces_the_space(table):
    space, ts = scan_space(), TableSpace(table)
    assert ts.size() == space.size() == 779
    assert list(ts.configs()) == list(space.configs())
    for c in list(space.configs())[::37]:
        # which fields apply is read off the table: every dim given projects alike
        full = {**table["base"], **c}
        assert ts.project(full) == c == space.project(full)
        assert ts.valid(c)
    assert not ts.valid({"block_threads": 1024, "items_per_thread": 128, "mode": 0})
    row = table["results"][10]
    ev = ts.evaluate(row["config"], None)
    assert (ev.status, ev.score) == (("ok", row["score"]) if row["score"] is not None
                                     else ("failed", None))


def test_table_dims_out_of_order_are_rejected(table):
    swapped = dict(table, dims={"group_tiles": table["dims"]["group_tiles"],
                                **{k: v for k, v in table["dims"].items() if k != "group_tiles"}})
    with pytest.raises(ValueError, match="not a function of the fields before it"):
        TableSpace(swapped)


def test_exhaustive_trials_to_within_is_the_first_good_position(table):
    space = scan_space()
    score = {tuple(r["config"].items()): r["score"] for r in table["results"]}
    base = tuple(space.project(SCAN_BASE).items())
    order = [base] + [tuple(c.items()) for c in space.configs() if tuple(c.items()) != base]
    best = table_optimum(table)
    for tol in (0.0, 0.01, 0.05):
        want = next(i + 1 for i, c in enumerate(order)
                    if score[c] is not None and score[c] >= (1 - tol) * best)
        assert trials_to_within(table, "exhaustive", 0, 1000, tol) == want
        assert trials_to_within(table, "exhaustive", 0, want - 1, tol) is None \
            if want > 1 else True


def test_cold_replay_enqueues_nothing(table):
    """warm=False: the exhaustive order without the base policy first; when the
    base is the optimum, warm finds it at once and cold only at its place in
    the space's order."""
    space = scan_space()
    configs = [tuple(c.items()) for c in space.configs()]
    base = tuple(space.project(SCAN_BASE).items())
    best = dict(table, results=[dict(r, score=2.0 * table_optimum(table))
                                if tuple(r["config"].items()) == base else r
                                for r in table["results"]])
    assert trials_to_within(best, "exhaustive", 0, 1000, 0.0) == 1
    assert trials_to_within(best, "exhaustive", 0, 1000, 0.0, warm=False) == \
        configs.index(base) + 1


def test_random_trials_to_within_respects_the_budget(table):
    got = trials_to_within(table, "random", 3, 400)
    assert got is not None and 1 < got <= 400
    # the random strategy's draws do not depend on the budget
    assert trials_to_within(table, "random", 3, got) == got
    assert trials_to_within(table, "random", 3, got - 1) is None


def test_save_load_round_trip_replays_alike(table, tmp_path):
    path = tmp_path / "sub" / "scan.json"
    save_table(path, table)
    assert [p.name for p in path.parent.iterdir()] == ["scan.json"]   # no temporary left
    loaded = load_table(path)
    assert loaded == json.loads(json.dumps(table))
    rows = replay({"t": table}, ("exhaustive", "tpe+polish"), seeds=(0, 1), budget=60)
    assert rows == replay({"t": loaded}, ("exhaustive", "tpe+polish"), seeds=(0, 1),
                          budget=60)
    assert [(r["strategy"], r["seed"]) for r in rows] == [
        ("exhaustive", 0), ("tpe+polish", 0), ("tpe+polish", 1)]
    (tmp_path / "bad.json").write_text('{"algorithm": "scan"}')
    with pytest.raises(ValueError, match="not a replay table"):
        load_table(tmp_path / "bad.json")


def test_gbs_tables_and_failures(tmp_path):
    space = space_for("scan", SCAN_KEY, SCAN_BASE, fields=("mode", "group_tiles"))
    evs = [Evaluation(c, None, "failed") if c.get("group_tiles") == 8 else
           Evaluation(c, 100.0 * (1 + len(c)) + c.get("group_tiles", 0), "ok")
           for c in space.configs()]
    t = table_from_evaluations(space, evs + evs[:2], {"device": "model", "date": "x"})
    assert len(t["results"]) == space.size() == 10 and t["date"] == "x"
    for r in t["results"]:
        r["gbs"] = r.pop("score")
    assert table_optimum(t) == 300.0 + 256
    assert TableSpace(t).evaluate({"mode": 3, "group_tiles": 8}, None).status == "failed"
    assert trials_to_within(t, "exhaustive", 0, 100, 0.0) == 10   # the last config
    with pytest.raises(ValueError, match="device"):
        table_from_evaluations(space, evs, {})
    with pytest.raises(ValueError, match="no successful config"):
        table_optimum({"results": [{"config": {}, "score": None}]})


def test_summarize_counts_misses_as_infinite():
    rows = [{"table": "a", "strategy": "s", "seed": 0, "trials": 4},
            {"table": "a", "strategy": "s", "seed": 1, "trials": None},
            {"table": "b", "strategy": "s", "seed": 0, "trials": 10},
            {"table": "a", "strategy": "r", "seed": 0, "trials": None}]
    s, r = summarize(rows)
    assert s == {"strategy": "s", "tables": 2, "runs": 3, "within_budget": 2,
                 "median_trials": 10, "mean_trials": 7.0}
    assert r["median_trials"] == math.inf and r["mean_trials"] is None


def test_bench_tuner_replay_runs_on_synthetic_tables(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location(
        "bench_tuner_replay", ROOT / "benchmarks" / "bench_tuner_replay.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(sys, "argv", [
        "bench_tuner_replay.py", "--tables", str(tmp_path / "none"), "--models", "1",
        "--seeds", "2", "--budget", "25", "--strategies", "exhaustive,tpe+polish,random",
        "--out", str(tmp_path)])
    assert bench.main() == 0
    out = capsys.readouterr().out
    assert "synthetic tables only" in out and "| tpe+polish |" in out
    data = json.loads((tmp_path / "bench_tuner_replay.json").read_text())
    names = {f"synthetic:{s[0]}:m0" for s in bench.SYNTHETIC_SPACES}
    assert set(data["tables"]) == names
    assert all(t["synthetic"] for t in data["tables"].values())
    # exhaustive once per table, the others once per seed
    assert len(data["runs"]) == len(names) * (1 + 2 + 2)
    assert all(r["trials"] is None or 1 <= r["trials"] <= 25 for r in data["runs"])
    assert [s["strategy"] for s in data["summary"]] == ["exhaustive", "tpe+polish", "random"]
