"""The `kernel` and `function` decorators and the Kernel object.

A Kernel keeps the Python function, its validated options and a cache of
specializations (IR per argument signature). It is launched with
`tilecore.launch`, never called directly.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from typing import Any, Callable, Optional

from .errors import TileSyntaxError
from .frontend.deep import run_deep
from .frontend.source import parse_function
from .frontend.source import capture
from .frontend.specialize import ArgKind, ConstArg, arg_key, lower_kernel
from .ir.core import Function
from .ir.passes import run_pipeline
from .language.constants import is_constant_annotation
from .language.options import KernelOptions, validate_options

__all__ = ["Kernel", "TileFunction", "kernel", "function"]


class Kernel:
    """A tile kernel: entry point of tile code, launched over a grid."""

    def __init__(self, pyfunc: Callable, options: KernelOptions):
        if not inspect.isfunction(pyfunc):
            raise TypeError(f"@tilecore.kernel expects a function, got {type(pyfunc).__name__}")
        self.pyfunc = pyfunc
        capture(pyfunc)   # compile the function as imported, whatever happens to its file
        self.options = options
        self.signature = inspect.signature(pyfunc)
        for p in self.signature.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise TypeError(f"Kernel {pyfunc.__name__}(): parameter '{p.name}' must be a "
                                f"plain positional parameter (no *args, **kwargs or "
                                f"keyword-only parameters)")
        try:
            hints = typing.get_type_hints(pyfunc, include_extras=True)
        except Exception:
            hints = dict(pyfunc.__annotations__)
        self.constant_params = frozenset(
            name for name in self.signature.parameters
            if is_constant_annotation(hints.get(name, pyfunc.__annotations__.get(name))))
        self.num_params = len(self.signature.parameters)
        self.param_names = tuple(self.signature.parameters)
        self._ir: dict[tuple, Function] = {}
        self.backend_cache: dict = {}  # owned by the CUDA launch path
        self._early: Optional["Kernel"] = None
        functools.update_wrapper(self, pyfunc)

    def for_early_start(self) -> "Kernel":
        """The kernel as a launch with programmatic_dependent_launch=True runs it:
        where its code calls grid_dependency_control_wait(), what comes before the
        wait may run while the stream's previous kernel still runs (without the
        option the whole kernel waits first). A separate Kernel, made once, so
        each keeps its own specializations and fast launchers."""
        if self.options.early_start:
            return self
        if self._early is None:
            self._early = Kernel(self.pyfunc, dataclasses.replace(self.options, early_start=True))
        return self._early

    def launched_with(self, programmatic_dependent_launch: Any, caller: str) -> "Kernel":
        """The Kernel that `caller` (launch or compile) runs for its
        programmatic_dependent_launch argument, which must be True or False:
        for True, `for_early_start()`."""
        if programmatic_dependent_launch is True:
            return self.for_early_start()
        if programmatic_dependent_launch is not False:
            raise TypeError(f'Invalid argument "programmatic_dependent_launch" of {caller}(): '
                            f"expected a bool, got {programmatic_dependent_launch!r}")
        return self

    def __call__(self, *args, **kwargs):
        raise TypeError(f"Kernel {self.__name__}() cannot be called directly; launch it with "
                        f"tilecore.launch(stream, grid, {self.__name__}, args)")

    def __repr__(self) -> str:
        return f"<tilecore.Kernel {self.__qualname__}>"

    def ir_for(self, kinds: list[ArgKind]) -> Function:
        """The typed IR for one argument signature (cached)."""
        key = tuple(arg_key(k) for k in kinds)
        fn = self._ir.get(key)
        if fn is None:
            # Parsed here first: CPython 3.12 builds deeper ASTs in this thread than in
            # run_deep's (3.12.1), 3.11 only under run_deep's raised limit, so a failure
            # here is retried there, where it is reported.
            try:
                parse_function(self.pyfunc)
            except TileSyntaxError:
                pass
            fn = run_deep(lambda: run_pipeline(lower_kernel(self.pyfunc, kinds)))
            self._ir[key] = fn
        return fn


class TileFunction:
    """A function annotated with `@tilecore.function`: its execution spaces."""

    def __init__(self, pyfunc: Callable, host: bool, tile: bool):
        self.pyfunc = pyfunc
        capture(pyfunc)
        self.host = host
        self.tile = tile
        functools.update_wrapper(self, pyfunc)

    def __call__(self, *args, **kwargs):
        if not self.host:
            raise TypeError(f"{self.__name__}() is a tile function and can only be called from "
                            f"tile code (annotate it with @tilecore.function(host=True) to "
                            f"also call it from the host)")
        return self.pyfunc(*args, **kwargs)


def kernel(function: Optional[Callable] = None, /, **options: Any):
    """Decorator making a tile kernel; options: num_ctas, occupancy, opt_level,
    num_worker_warps, num_threads, vector_width (each an int or a ByTarget)."""
    opts = validate_options(options)
    if function is None:
        return lambda f: Kernel(f, opts)
    return Kernel(function, opts)


def function(func: Optional[Callable] = None, /, *, host: bool = False, tile: bool = True):
    """Decorator giving a function's execution spaces (default: tile code only)."""
    if not isinstance(host, bool) or not isinstance(tile, bool):
        raise TypeError("function(): host and tile must be bools")
    if func is None:
        return lambda f: TileFunction(f, host, tile)
    return TileFunction(func, host, tile)


def constant_kind(value: Any) -> ConstArg:
    """A constant-embedded argument (must be hashable)."""
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"A Constant argument must be hashable, got {type(value).__name__}") \
            from None
    return ConstArg(value)
