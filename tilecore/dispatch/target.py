"""Where an algorithm runs: the device's compute capability and SM count,
read once per device, or the interpreter's stand-in.

The interpreter runs the same kernels with the same policies as a GPU of
INTERPRETER_CC (TILECORE_ARCH when set), with a small SM count so that grids
stay a few blocks: results are exact functions of (policy, grid), so a test
on the interpreter covers the kernels the GPU runs.
"""
from __future__ import annotations

from typing import NamedTuple

from .. import config
from .selector import parse_arch

__all__ = ["Target", "device_target", "interpreter_target"]

INTERPRETER_CC = 90
INTERPRETER_SMS = 2


class Target(NamedTuple):
    cc: int             # compute capability, major * 10 + minor
    sm_count: int
    device_id: int      # -1: the interpreter


_targets: dict[int, Target] = {}


def device_target(device_id: int) -> Target:
    t = _targets.get(device_id)
    if t is None:
        from ..runtime import get_device
        dev = get_device(device_id)
        major, minor = dev.compute_capability
        t = _targets[device_id] = Target(major * 10 + minor, dev.sm_count, device_id)
    return t


_interpreter: dict = {}


def interpreter_target() -> Target:
    arch = config.arch()
    t = _interpreter.get(arch)
    if t is None:
        t = _interpreter[arch] = Target(parse_arch(arch) if arch else INTERPRETER_CC,
                                        INTERPRETER_SMS, -1)
    return t
