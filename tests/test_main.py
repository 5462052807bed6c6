"""`python -m tilecore`, the README's first command: the tour runs (on the GPU
when there is one, else on the interpreter) and every check passes, the
device-scope algorithms included."""
import subprocess
import sys
from pathlib import Path


def test_tour_passes(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tilecore"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all checks passed" in r.stdout
    assert "DeviceReduce.sum (two-phase)" in r.stdout
    assert "tilecore.algorithms.sum / argmax" in r.stdout


def test_readme_quick_start_is_two_commands():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    assert block.strip().splitlines() == ['pip install -e ".[test]" && python -m tilecore',
                                          'pip install -e ".[test]" && python -m pytest']
