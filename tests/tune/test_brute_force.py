"""benchmarks/brute_force_space.py end to end in the interpreter (its smoke
mode: the timings mean nothing): a complete table of every config of the
space, loadable by the replay, and a cut-off run that the same command
continues."""
import importlib.util
import json
from pathlib import Path

import pytest

from tilecore.tune.replay import TableSpace, load_table
from tilecore.tune.space import space_for
from tilecore.tune.workloads import Workload, current_policy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location(
        "brute_force_space", ROOT / "benchmarks" / "brute_force_space.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def argv(table, *extra):
    return ["--algorithm", "reduce", "--dtype", "float32", "--fields", "block_threads",
            "--sizes", "2^10", "--table", str(table), "--interpreter", *extra]


def test_a_complete_table_of_every_config(script, tmp_path, user_dir):
    table = tmp_path / "t.json"
    assert script.main(argv(table)) == 0
    t = load_table(table)
    w = Workload("reduce", "float32", "add")
    space = space_for("reduce", w.key, current_policy("reduce", 90, w.key),
                      fields=("block_threads",))
    assert t["complete"] is True
    assert [r["config"] for r in t["results"]] == list(space.configs())
    assert all(r["score"] is not None and r["score"] > 0 for r in t["results"])
    base = [r for r in t["results"] if r["config"] == {"block_threads": t["base"]["block_threads"]}]
    assert base[0]["score"] == 1.0                      # the current policy scores 1
    assert TableSpace(t).size() == space.size()
    assert t["sizes"] == [1024] and "--interpreter" in t["command"]


def test_a_cut_off_run_is_continued_by_the_same_command(script, tmp_path, user_dir, capsys):
    table = tmp_path / "t.json"
    assert script.main(argv(table, "--timeout", "1e-9")) == 3      # stops after one config
    first = json.loads(table.read_text())
    assert first["complete"] is False and len(first["results"]) == 1
    assert script.main(argv(table)) == 0
    assert "1 already measured" in capsys.readouterr().out
    t = load_table(table)
    assert t["complete"] is True and t["results"][0] == first["results"][0]


def test_another_space_in_the_file_is_refused(script, tmp_path, user_dir):
    table = tmp_path / "t.json"
    assert script.main(argv(table)) == 0
    other = ["--algorithm", "reduce", "--dtype", "float32", "--fields", "items_per_thread",
             "--sizes", "2^10", "--table", str(table), "--interpreter"]
    with pytest.raises(SystemExit, match="holds another space"):
        script.main(other)


@pytest.mark.parametrize("flag, value, message", [
    ("--fields", "block_threads,tile", "unknown reduce fields ['tile']"),
    ("--algorithm", "sort", 'Invalid argument "algorithm"'),
])
def test_a_bad_argument_is_a_one_line_error(script, tmp_path, flag, value, message):
    args = argv(tmp_path / "t.json")
    args[args.index(flag) + 1] = value
    with pytest.raises(SystemExit, match=message.replace("[", r"\[").replace("]", r"\]")):
        script.main(args)
    assert not (tmp_path / "t.json").exists()
