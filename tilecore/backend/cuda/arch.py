"""Architecture names ("sm_90", "sm_90a", "sm_100f") and what they allow."""
from __future__ import annotations

__all__ = ["arch_number", "supports_clusters", "supports_pdl", "max_shared_per_block"]


def arch_number(arch: str) -> int:
    """The compute capability of `arch` as one number: "sm_90a" -> 90."""
    return int(arch.split("_")[1].rstrip("af"))


def supports_clusters(arch: str) -> bool:
    """Thread-block clusters (`num_ctas`) need sm_90 or newer."""
    return arch_number(arch) >= 90


def supports_pdl(arch: str) -> bool:
    """Programmatic dependent launch (a grid starts while the stream's previous
    grid finishes and waits in the kernel, `griddepcontrol`) needs sm_90 or newer."""
    return arch_number(arch) >= 90


# The most shared memory one block may opt into, per compute capability (CUDA
# programming guide, "Technical Specifications per Compute Capability").
_MAX_SHARED_PER_BLOCK = {70: 98304, 72: 49152, 75: 65536, 80: 166912, 86: 101376, 87: 166912,
                         89: 101376, 90: 232448, 100: 232448, 103: 232448, 120: 101376,
                         121: 101376}


def max_shared_per_block(arch: str) -> int | None:
    """Bytes of shared memory a block of `arch` may use at most (None when
    tilecore does not know the architecture: the launch then checks the device)."""
    return _MAX_SHARED_PER_BLOCK.get(arch_number(arch))
