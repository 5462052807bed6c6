"""Saving a failing program as a standalone reproducer and loading it back.

A reproducer directory holds kernel.py (the kernel module, minimized when
possible), inputs.npz (every array parameter's base array), meta.json (grid,
parameters with their views, scalar and constant values, output tolerances,
the scans and folds the NumPy model checks, the failure) and README.txt with
the command that replays it: `python -m tilecore.testing.fuzz --replay DIR [--gpu]`.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ...language import dtypes as D
from ...language.dtypes import DType, from_numpy
from ...language.enums import PaddingMode
from .execute import Outcome
from .model import Check, OutputSpec, Param, Program
from .tolerance import Tol

__all__ = ["save", "load"]

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _encode(value: Any) -> Any:
    if isinstance(value, DType):
        return {"dtype": value.name}
    if isinstance(value, PaddingMode):
        return {"padding": value.name}
    if isinstance(value, np.generic):
        return {"numpy": np.dtype(value.dtype).name, "value": repr(value.item())}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "dtype" in value:
            return D.lookup(value["dtype"])
        if "padding" in value:
            return PaddingMode[value["padding"]]
        dt = np.dtype(value["numpy"])
        text = value["value"]
        return dt.type(float(text) if dt.kind == "f" else text == "True" if dt.kind == "b"
                       else int(text))
    return value


def _slice(s: slice) -> list:
    return [s.start, s.stop, s.step]


def save(prog: Program, outcome: Outcome, directory: Path, drop: frozenset = frozenset(),
         gpu: bool = False) -> Path:
    """Write the reproducer of `prog` (without the statements in `drop`)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kernel.py").write_text(prog.source(drop))
    # raw bits: .npz does not keep the ml_dtypes dtypes (meta.json names them)
    np.savez(directory / "inputs.npz", **{p.name: p.base.view(_UINT[p.base.itemsize])
                                          for p in prog.params if p.is_array})
    meta = {
        "seed": prog.seed, "grid": list(prog.grid), "name": prog.name,
        "params": [{"name": p.name, "role": p.role, "value": _encode(p.value),
                    "dtype": from_numpy(p.base.dtype).name if p.is_array else None,
                    "view": None if p.view is None else [_slice(s) for s in p.view],
                    "transpose": p.transpose} for p in prog.params],
        "outputs": {k: {"tol": vars(v.tol), "shadow": v.shadow, "must_be_true": v.must_be_true}
                    for k, v in prog.outputs.items()},
        "checks": [asdict(c) for c in prog.checks],
        "status": outcome.status, "stage": outcome.stage, "error": outcome.error,
        "detail": outcome.detail[-4000:], "statements_dropped": len(drop),
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    command = f"python -m tilecore.testing.fuzz --replay {directory}" + (" --gpu" if gpu else "")
    (directory / "README.txt").write_text(
        f"tilecore fuzzer reproducer: seed {prog.seed}, {outcome.status} at stage "
        f"{outcome.stage}\n{outcome.error}\n\nReplay: {command}\n"
        f"Unminimized program: python -m tilecore.testing.fuzz --seed {prog.seed} --count 1"
        f"{' --gpu' if gpu else ''}\n\n{outcome.detail[-4000:]}\n")
    return directory


def load(directory: Path) -> Program:
    """The Program saved in `directory` (its kernel source as written there)."""
    meta = json.loads((directory / "meta.json").read_text())
    arrays = np.load(directory / "inputs.npz")
    params = []
    for p in meta["params"]:
        view = None if p["view"] is None else tuple(slice(*s) for s in p["view"])
        base = None
        if p["dtype"] is not None:
            base = arrays[p["name"]].view(D.lookup(p["dtype"]).numpy_dtype)
        params.append(Param(p["name"], p["role"], _decode(p["value"]), base, view,
                            p["transpose"]))
    outputs = {k: OutputSpec(Tol(**v["tol"]), v["shadow"], v["must_be_true"])
               for k, v in meta["outputs"].items()}
    checks = [Check(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})
              for c in meta.get("checks", ())]
    return Program(meta["seed"], params, [], tuple(meta["grid"]), outputs, name=meta["name"],
                   text=(directory / "kernel.py").read_text(), checks=checks)
