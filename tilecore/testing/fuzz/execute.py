"""Running one generated program: load its kernel from a real file (the front
end reads kernel source), lower it, run it in the interpreter (twice: in
block order and in a random block order, which must agree since no two blocks
write one element; its scans and folds checked against the NumPy model of
reference.py in between), then compile it for sm_80/sm_90 (CPU machines) or run it
on the GPU and compare every array with the interpreter's under the
tolerances of tolerance.py.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ... import config
from ...errors import TileError
from . import reference
from .model import Program
from .tolerance import EXACT, compare

__all__ = ["Outcome", "Timeout", "run_program", "load_kernel", "lower", "ir_coverage"]

STAGES = ("lower", "interp", "model", "order", "compile", "gpu")
# The stage that failed -> the outcome's status.
_STATUS = {"lower": "rejected", "interp": "interp_error", "model": "model_error",
           "order": "order_dependent", "compile": "compile_error", "gpu": "gpu_error"}


@dataclass
class Outcome:
    """What happened to one program. status: ok, rejected (the front end
    refused a program the generator believes valid), interp_error,
    fold_mismatch (constant folding disagrees with run time), model_mismatch (a
    scan or fold disagrees with the NumPy model, reference.py; model_error: the
    model failed), order_dependent,
    compile_error, gpu_error, mismatch."""

    seed: int
    status: str = "ok"
    stage: str = ""
    error: str = ""
    detail: str = ""
    seconds: dict = field(default_factory=dict)
    ops: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    def key(self) -> tuple:
        """What identifies this failure while minimizing (its kind and, for
        mismatches, the arrays that differ)."""
        if self.status == "mismatch":
            return (self.status, tuple(sorted(line.split(":")[0]
                                              for line in self.detail.splitlines())))
        return (self.status, self.error)


def load_kernel(prog: Program, workdir: Path, drop: frozenset = frozenset()):
    """Write the program's module to `workdir` and import it (not into sys.modules)."""
    src = prog.source(drop)
    digest = hashlib.sha1(src.encode()).hexdigest()[:12]
    path = workdir / f"fuzz_{prog.seed}_{digest}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"_tilecore_fuzz_{prog.seed}_{digest}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, prog.name), path


def _host_args(prog: Program) -> tuple[dict, list]:
    bases = {p.name: p.base.copy() for p in prog.params if p.is_array}
    return bases, [p.array(bases[p.name]) if p.is_array else p.value for p in prog.params]


def _kinds(kernel, args: list) -> list:
    """The specialization kinds of a launch with these host arguments."""
    from ...frontend.specialize import ArrayArg
    from ...host.classify import classify_non_array, param_names
    from ...language.dtypes import from_numpy
    kinds = []
    for name, value in zip(param_names(kernel), args):
        kind = classify_non_array(kernel, name, value)
        kinds.append(ArrayArg(from_numpy(value.dtype), value.ndim) if kind is None else kind)
    return kinds


def lower(prog: Program, workdir: Path):
    """The typed IR of the program's kernel for its arguments."""
    kernel, path = load_kernel(prog, workdir)
    try:
        return kernel.ir_for(_kinds(kernel, _host_args(prog)[1]))
    finally:
        path.unlink()


def ir_coverage(fn) -> dict:
    """Counts of IR ops in a Function, keyed 'op' and 'op:fn'."""
    counts: dict[str, int] = {}
    for op in fn.walk():
        for key in (op.name, f"{op.name}:{op.attrs['fn']}" if "fn" in op.attrs else None):
            if key:
                counts[key] = counts.get(key, 0) + 1
    return counts


class Timeout(BaseException):
    """A program ran past its deadline (a BaseException: no stage reports it as
    its own error)."""


@contextlib.contextmanager
def _deadline(seconds: Optional[float]):
    """Raise Timeout in this (main) thread after `seconds`; no limit for None or
    where there is no SIGALRM. Programs loop forever when the minimizer drops
    a while loop's counter update."""
    if not seconds or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise Timeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _error(e: BaseException) -> tuple[str, str]:
    """(short kind, full text) of an exception."""
    first = str(e).splitlines()[0] if str(e) else ""
    kind = type(e).__name__
    if not isinstance(e, TileError):
        tb = traceback.extract_tb(e.__traceback__)
        where = tb[-1] if tb else None
        if where is not None:
            kind += f"@{Path(where.filename).name}:{where.lineno}"
    return kind, f"{type(e).__name__}: {first}\n" + "".join(
        traceback.format_exception(type(e), e, e.__traceback__))[-3000:]


def _same_arrays(a: dict, b: dict) -> Optional[str]:
    for name in a:
        x, y = a[name], b[name]
        if x.dtype.kind == "f" or x.dtype.kind == "V":
            ui = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize]
            xb, yb = x.view(ui), y.view(ui)
            nan = np.isnan(x.astype(np.float64)) & np.isnan(y.astype(np.float64))
            if ((xb != yb) & ~nan).any():
                return name
        elif (x != y).any():
            return name
    return None


def run_program(prog: Program, workdir: Path, *, gpu: bool = False,
                archs: tuple[str, ...] = ("sm_80", "sm_90"), check_order: bool = True,
                drop: frozenset = frozenset(), timeout: Optional[float] = None) -> Outcome:
    """Run `prog` through every stage; the first failure ends it. Past
    `timeout` seconds the outcome is 'timeout' (the program hung, or NVRTC did)."""
    out = Outcome(prog.seed)
    try:
        with _deadline(timeout):
            _run_stages(prog, workdir, out, gpu, archs, check_order, drop)
    except Timeout:
        out.status, out.error = "timeout", f"over {timeout} s"
    return out


def _run_stages(prog: Program, workdir: Path, out: Outcome, gpu: bool, archs: tuple,
                check_order: bool, drop: frozenset) -> None:
    """The stages in order; `out.stage` names the one running (or that failed)."""
    path = None
    out.stage = stage = "lower"
    try:
        t0 = time.perf_counter()
        kernel, path = load_kernel(prog, workdir, drop)
        bases, args = _host_args(prog)
        fn = kernel.ir_for(_kinds(kernel, args))
        out.ops = ir_coverage(fn)
        out.seconds["lower"] = time.perf_counter() - t0

        import tilecore
        out.stage = stage = "interp"
        t0 = time.perf_counter()
        grid = prog.grid
        tilecore.launch(None, grid, kernel, tuple(args))
        out.seconds["interp"] = time.perf_counter() - t0

        refuted = [n for n, spec in prog.outputs.items()
                   if spec.must_be_true and not bases[n].all()]
        if refuted:
            out.status, out.stage, out.error = "fold_mismatch", stage, refuted[0]
            out.detail = (f"constant folding and run time disagree in {refuted} (blocks "
                          f"{np.flatnonzero(~bases[refuted[0]]).tolist()})")
            return

        out.stage = stage = "model"
        bad = reference.check(prog, bases)
        if bad is not None:
            out.status, out.error, out.detail = "model_mismatch", bad[0], bad[1]
            return

        if check_order and np.prod(grid) > 1:
            out.stage = stage = "order"
            again, args2 = _host_args(prog)
            with config.override("TILECORE_BLOCK_ORDER", "random"):
                tilecore.launch(None, grid, kernel, tuple(args2))
            differ = _same_arrays(bases, again)
            if differ is not None:
                out.status, out.stage, out.error = "order_dependent", stage, differ
                out.detail = f"array {differ!r} depends on the order blocks run in"
                return

        if gpu:
            out.stage = stage = "gpu"
            t0 = time.perf_counter()
            got = _run_gpu(prog, kernel, grid)
            out.seconds["gpu"] = time.perf_counter() - t0
            problems = _compare_all(prog, got, bases)
            if problems:
                out.status, out.stage, out.detail = "mismatch", "gpu", "\n".join(problems)
                out.error = problems[0].split(":")[0]
        else:
            out.stage = stage = "compile"
            t0 = time.perf_counter()
            _, fresh = _host_args(prog)
            for arch in archs:
                tilecore.compile(kernel, tuple(fresh), arch=arch)
                if "grid_wait" in out.ops:      # also as launched for early start
                    tilecore.compile(kernel, tuple(fresh), arch=arch,
                                     programmatic_dependent_launch=True)
            out.seconds["compile"] = time.perf_counter() - t0
    except Exception as e:  # every failure of a valid program is a finding
        out.status, out.stage = _STATUS[stage], stage
        out.error, out.detail = _error(e)
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


def _compare_all(prog: Program, got: dict, want: dict) -> list[str]:
    """Every array base compared: outputs within their tolerance on the view
    the kernel writes and exactly elsewhere; inputs and shadows must be unchanged
    (inputs exactly, shadows not compared)."""
    problems = []
    for p in prog.params:
        if not p.is_array or p.role == "shadow":
            continue
        g, w = got[p.name], want[p.name]
        if p.role == "out":
            spec = prog.outputs[p.name]
            shadow = want[spec.shadow] if spec.shadow else None
            msg = compare(p.name, p.array(g), p.array(w), spec.tol, shadow)
            if msg:
                problems.append(msg)
            g, w = g.copy(), w.copy()
            p.array(g)[...] = 0
            p.array(w)[...] = 0
        msg = compare(p.name + " (outside the view)" if p.role == "out" else p.name, g, w, EXACT)
        if msg:
            problems.append(msg)
    return problems


# --- the GPU ----------------------------------------------------------------------------------
def _run_gpu(prog: Program, kernel, grid) -> dict:
    """Launch on the GPU with device copies of every base; the bases back."""
    import cupy as cp
    import tilecore
    from ...language.dtypes import from_numpy
    from ...runtime.arrays import DeviceArray
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    device: dict[str, Any] = {}
    args = []
    for p in prog.params:
        if not p.is_array:
            args.append(p.value)
            continue
        base = p.base
        buf = cp.asarray(base.view(uint[base.itemsize]))
        device[p.name] = buf
        view = p.array(base)
        offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        strides = tuple(s // base.itemsize for s in view.strides)
        args.append(DeviceArray(buf.data.ptr + offset, view.shape, strides,
                                from_numpy(base.dtype), buf.device.id))
    tilecore.launch(None, grid, kernel, tuple(args))
    cp.cuda.runtime.deviceSynchronize()
    return {name: cp.asnumpy(buf).view(prog.param(name).base.dtype)
            for name, buf in device.items()}
