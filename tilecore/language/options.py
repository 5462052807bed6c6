"""Kernel options (`num_ctas`, `occupancy`, `opt_level`, `num_worker_warps`,
`num_threads`, `vector_width`) and `ByTarget`, which gives an option a
per-architecture value.

Ranges follow the reference: num_ctas a power of two in [1, 16], occupancy in
[1, 32], opt_level in [0, 3]. `num_threads` (tilecore's own) overrides the
block size the compiler picks; `num_worker_warps` is the same in warps.
`vector_width` (tilecore's own, a power of two in [1, 16]) overrides how many
consecutive elements of a tile each thread holds together (its chunk: the
CUDA backend's accesses are up to 16 bytes of one chunk); by default 16 bytes
of the kernel's narrowest array element, which leaves the wider arrays of a
kernel that mixes widths (8-byte data beside int32 counters) in chunks of
more than 16 bytes, each access of a warp then touching every other 16 bytes.
It changes no result but the association of float reductions and scans
within a tile, which is unspecified.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

__all__ = ["ByTarget", "KernelOptions", "validate_options", "resolve"]


class ByTarget:
    """Per-architecture values: `ByTarget(sm_90=2, sm_100=4, default=1)`.

    The value for the device's exact architecture wins; otherwise `default`
    (or the option's default if none is given)."""

    def __init__(self, default: Any = None, **by_arch: Any):
        for key in by_arch:
            if not (key.startswith("sm_") and key[3:].rstrip("af").isdigit()):
                raise ValueError(f'Invalid argument "{key}" of ByTarget(): expected an '
                                 f"architecture name like sm_90, got {key!r}")
        self.default = default
        self.by_arch = dict(sorted(by_arch.items()))

    def values(self):
        yield from self.by_arch.values()
        if self.default is not None:
            yield self.default

    def get(self, arch: str) -> Any:
        base = arch.rstrip("af")
        if arch in self.by_arch:
            return self.by_arch[arch]
        if base in self.by_arch:
            return self.by_arch[base]
        return self.default

    def __repr__(self) -> str:
        items = [f"{k}={v!r}" for k, v in self.by_arch.items()]
        if self.default is not None:
            items.append(f"default={self.default!r}")
        return f"ByTarget({', '.join(items)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ByTarget) and (self.default, self.by_arch) == (other.default, other.by_arch)

    def __hash__(self) -> int:
        return hash((self.default, tuple(self.by_arch.items())))


Option = Union[int, ByTarget, None]


def _check_int(name: str, value: Any, lo: int, hi: int, pow2: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f'Invalid kernel option "{name}": expected an int or ByTarget, '
                        f"got {type(value).__name__} {value!r}")
    if not lo <= value <= hi or (pow2 and value & (value - 1)):
        what = f"a power of two in [{lo}, {hi}]" if pow2 else f"an int in [{lo}, {hi}]"
        raise ValueError(f'Invalid kernel option "{name}": expected {what}, got {value}')


_RANGES = {
    "num_ctas": (1, 16, True),
    "occupancy": (1, 32, False),
    "opt_level": (0, 3, False),
    "num_worker_warps": (1, 32, True),
    "num_threads": (32, 1024, True),
    "vector_width": (1, 16, True),
}


@dataclass(frozen=True)
class KernelOptions:
    num_ctas: Option = None
    occupancy: Option = None
    opt_level: Option = 3
    num_worker_warps: Option = None
    num_threads: Option = None
    vector_width: Option = None
    # not a decorator option: set on the copy of a kernel that a launch with
    # programmatic_dependent_launch=True runs (Kernel.for_early_start)
    early_start: bool = False


def validate_options(kwargs: dict[str, Any]) -> KernelOptions:
    """Check every option's name, type and range (per architecture too)."""
    for name, value in kwargs.items():
        if name not in _RANGES:
            raise TypeError(f'Unknown kernel option "{name}"; expected one of '
                            f"{', '.join(sorted(_RANGES))}")
        if value is None:
            continue
        for v in (value.values() if isinstance(value, ByTarget) else (value,)):
            _check_int(name, v, *_RANGES[name])
    if kwargs.get("num_worker_warps") is not None and kwargs.get("num_threads") is not None:
        raise ValueError("Kernel options num_worker_warps and num_threads both set the block "
                         "size; give only one")
    opts = KernelOptions(**kwargs)
    if opts.opt_level is None:
        opts = KernelOptions(**{**kwargs, "opt_level": 3})
    return opts


def resolve(value: Option, arch: str, default: Optional[int] = None) -> Optional[int]:
    """The option's value for `arch` (e.g. "sm_90")."""
    if isinstance(value, ByTarget):
        v = value.get(arch)
        return default if v is None else v
    return default if value is None else value
