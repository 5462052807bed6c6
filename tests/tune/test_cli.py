"""`python -m tilecore.tune` on the CPU: --help, one-line usage errors (exit
2), the refusals before any sweep (no GPU, an architecture tilecore cannot
compile for, --plot without matplotlib), and whole runs of the command line
with the GPU replaced by a stand-in device and `RunTimeModel` (a model of run
time, see test_sweep.py): tables, report, progress line, --resume."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import tilecore.runtime as runtime
from tilecore.runtime.driver import NoDeviceError
from tilecore.tune import cli
from tilecore.tune.report import INSTALL_PLOT
from tilecore.tunings import TUNING_DIR_ENV, clear_cache, parse_table


def _sibling(name: str):
    """A module of this folder (tests are imported without packages)."""
    spec = importlib.util.spec_from_file_location(f"tune_{name}", Path(__file__).with_name(
        f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_model = _sibling("test_sweep")
PROV, Models = _model.PROV, _model.Models

pytestmark = pytest.mark.interpreter_only

MODEL_GPU = cli.DeviceFacts(0, "Model GPU", 90, 132, PROV)
FAST = ["--algorithm", "reduce", "--dtype", "float32", "--sizes", "2^16:2^20", "--trials", "8"]


def model_gpu(ordinal):
    return MODEL_GPU


def no_probe(ordinal):
    raise AssertionError("the device was probed: the command should have stopped before")


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    d = tmp_path / "user_tunings"
    d.mkdir()
    monkeypatch.setenv(TUNING_DIR_ENV, str(d))
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    clear_cache()
    yield d
    clear_cache()


def one_line_error(capsys, argv, probe=no_probe) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(argv, probe=probe)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tilecore.tune: error: ")
    return err.strip()


def test_help_explains_every_option_and_gives_an_example(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for option in ("--algorithm", "--dtype", "--op", "--sizes", "--trials", "--timeout",
                   "--storage", "--out", "--device", "--resume", "--report", "--plot", "--quiet"):
        assert f"  {option}" in text, option
    assert "examples:" in text and "python -m tilecore.tune --algorithm reduce" in text
    assert "optuna-dashboard" in text and "2^16:2^28" in text


@pytest.mark.parametrize("argv, message", [
    (["--algorithm", "sort"], "argument --algorithm: expected a comma-separated list of reduce, "
                              "scan, segmented_reduce or 'all', got 'sort'"),
    (["--dtype", "float32,complex64"], "argument --dtype: expected a comma-separated list of"),
    (["--op", "mul"], "argument --op: expected a comma-separated list of add, min, max, got 'mul'"),
    (["--sizes", "2^16:3000"], "argument --sizes: a range's ends must be powers of two, got 3000"),
    (["--sizes", "2^20:2^16"], "argument --sizes: expected A <= B in A:B, got '2^20:2^16'"),
    (["--sizes", "2^31"], "argument --sizes: sizes must be below 2^31"),
    (["--trials", "0"], "argument --trials: expected a positive int, got '0'"),
    (["--timeout", "soon"], "argument --timeout: expected a positive number of seconds or "
                            "'none', got 'soon'"),
    (["--timeout", "0"], "argument --timeout: expected a positive number of seconds or "
                         "'none', got '0'"),
    (["--device", "-1"], "argument --device: expected a CUDA device ordinal (0, 1, ...), "
                         "got '-1'"),
    (["--storage", "studies.db"], "argument --storage: expected an Optuna storage URL such as "
                                  "sqlite:///path.db, got 'studies.db'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_a_bad_value_is_a_one_line_error(capsys, argv, message):
    assert message in one_line_error(capsys, argv)


def test_no_gpu_exits_2_with_one_line(capsys, monkeypatch):
    def no_driver():
        raise NoDeviceError("No NVIDIA driver was found (cannot load libcuda.so.1). The NumPy "
                            "interpreter still works without a GPU.")
    monkeypatch.setattr(runtime, "device_count", no_driver)
    err = one_line_error(capsys, ["--trials", "1"], probe=cli.probe_device)
    assert err == ("tilecore.tune: error: no GPU to tune on: No NVIDIA driver was found "
                   "(cannot load libcuda.so.1).")


def test_no_gpu_exits_2_from_the_shell(tmp_path):
    # no visible device whether or not this machine has a GPU
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TILECORE_CACHE_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, "-m", "tilecore.tune", "--trials", "1"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("tilecore.tune: error: no GPU to tune on: ")


class _Device:
    def __init__(self, cc):
        self.name, self.compute_capability, self.sm_count = "Old GPU", cc, 10


@pytest.mark.parametrize("cc, archs, message", [
    ((6, 0), None, "Old GPU is sm_60; tilecore compiles for sm_70 and newer"),
    ((8, 9), [75, 80, 90], "Old GPU is sm_89, which NVRTC"),
])
def test_an_architecture_tilecore_cannot_compile_for_exits_2(capsys, monkeypatch, cc, archs,
                                                             message):
    monkeypatch.setattr(runtime, "device_count", lambda: 1)
    monkeypatch.setattr(runtime, "get_device", lambda ordinal: _Device(cc))
    monkeypatch.setattr(cli, "_nvrtc_archs", lambda: archs)
    err = one_line_error(capsys, ["--trials", "1"], probe=cli.probe_device)
    assert message in err


def test_plot_without_matplotlib_fails_before_any_sweep(capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib fails
    err = one_line_error(capsys, ["--plot", str(tmp_path / "speedup.png")])
    assert err == f"tilecore.tune: error: {INSTALL_PLOT}"
    assert not (tmp_path / "speedup.png").exists()


def test_a_run_writes_tables_and_a_report_and_resumes(capsys, user_dir, tmp_path):
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    report = tmp_path / "report.md"
    argv = FAST + ["--storage", storage, "--report", str(report)]
    models = Models()
    assert cli.main(argv, bench=models, probe=model_gpu) == 0
    out, err = capsys.readouterr()
    path = user_dir / "reduce" / "sm_90.yaml"
    assert f"tables: {path}" in out and "1 studies, 8 trials" in out
    assert out.startswith("algorithm") and "score" in out        # the final table
    assert f"optuna-dashboard {storage}" in out
    assert "[1/1] reduce float32 add  trial 0/8  best -\n" in err       # the progress line
    assert "[1/1] reduce float32 add  trial 8/8  best 1.0" in err
    assert re.search(r"done in \d+s: score 1\.0", err)      # seconds: however long it took
    table = parse_table(path.read_text(), str(path), "reduce", 90)
    assert any(r.provenance.get("trials") == 8 for r in table.rows)
    text = report.read_text()
    assert "# tilecore.tune results" in text and "Model GPU" in text and "2^20" in text

    (name,) = optuna.get_all_study_names(storage)
    assert cli.main(argv + ["--resume", "--trials", "16", "--quiet"], bench=models,
                    probe=model_gpu) == 0
    out, err = capsys.readouterr()
    assert "[1/1]" not in err                                      # --quiet: no progress
    assert optuna.get_all_study_names(storage) == [name]            # the same study, continued
    study = optuna.load_study(study_name=name, storage=storage)
    assert len([t for t in study.trials if "status" in t.user_attrs
                and "duplicate_of" not in t.user_attrs]) == 16
    assert "1 studies, 16 trials" in out


def test_a_study_without_any_passing_candidate_exits_1(capsys, user_dir, tmp_path):
    broken = Models(wrong=lambda p: True)        # even the current policy: a bug to report
    assert cli.main(FAST + ["--out", str(tmp_path / "db"), "--quiet"], bench=broken,
                    probe=model_gpu) == 1
    out, _ = capsys.readouterr()
    assert "reduce float32 add: nothing written: the current policy fails its check" in out
    assert not (tmp_path / "db").exists()
