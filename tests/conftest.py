"""Suite-wide test set-up: tests marked `gpu` skip cleanly without a GPU."""
import pytest


def pytest_collection_modifyitems(config, items):
    from tilecore.runtime.driver import has_gpu
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
