"""Differential fuzzer of the tile language.

`generate(seed)` writes a random well-typed kernel with its inputs (a
`Program`); `run_program` runs it in the interpreter and compiled (or on the
GPU) and compares; `python -m tilecore.testing.fuzz --count N --seed S
[--gpu] [--jobs J] [--out report.json]` runs many. docs/fuzzing.md says how
the oracle decides what agrees.
"""
from .execute import Outcome, run_program
from .generate import GenConfig, generate
from .model import Program

__all__ = ["generate", "GenConfig", "Program", "run_program", "Outcome"]
