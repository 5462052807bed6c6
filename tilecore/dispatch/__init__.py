"""Dispatch: what CUB's dispatch layer does, for every algorithm.

- `selector`: policies chained by minimum architecture (sm_70 -> sm_80 ->
  sm_90 -> sm_100 -> sm_120), selected by a plain function of (compute
  capability, tuning key) with explicit fallthrough.
- `target`: the device's compute capability and SM count, read once per device
  (or the interpreter's stand-in).
- `temp_storage`: the temporary-storage layout (slots, aliases, 256-byte
  alignment), implemented once; `buffers`: the caller's buffer as bytes and
  typed views of it.
- `hub`: the selection every policy hub makes (built-in policy, tables,
  overrides, validation), written once; `reduce_policy`, `scan_policy`,
  `segmented_policy`, `reduce_by_key_policy`: the algorithms' hubs.
- `overrides`: a context manager replacing an algorithm's policy fields (tests,
  experiments, the tuner).
"""
from .buffers import ByteBuffer, device_buffer, host_buffer
from .overrides import override_policy, policy_overrides
from .selector import ARCHITECTURES, arch_name, chained, parse_arch
from .target import Target, device_target, interpreter_target
from .temp_storage import ALIGNMENT, Alias, Layout, Slot, align_up

__all__ = [
    "ByteBuffer", "device_buffer", "host_buffer", "override_policy", "policy_overrides",
    "ARCHITECTURES", "arch_name", "chained", "parse_arch", "Target", "device_target",
    "interpreter_target", "ALIGNMENT", "Alias", "Layout", "Slot", "align_up",
]
