"""Architecture names ("sm_90", "sm_90a", "sm_100f") and what they allow."""
from __future__ import annotations

__all__ = ["arch_number", "supports_clusters", "supports_pdl"]


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
