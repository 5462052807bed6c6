"""The two launchers (`_cudriver.Launcher` in C and the cuda.bindings
`BindingsLauncher`) pack kernel parameters exactly as `struct` lays out a C
parameter list, and reject values that do not fit."""
import struct

import numpy as np
import pytest

from tilecore.runtime.bindings_driver import BindingsDriver
from tilecore.runtime.params import param_offsets


def native_launcher(fmt, cluster=1, pdl=False):
    from tilecore.runtime import _cudriver as native  # built by every install with a C compiler
    return native.Launcher(0x1, 0x2, 128, 0, cluster, fmt[1:], param_offsets(fmt),
                           struct.calcsize(fmt), pdl=pdl)


def bindings_launcher(fmt, cluster=1, pdl=False):
    from cuda.bindings import driver as drv
    return BindingsDriver(drv).Launcher(0x1, 0x2, 128, 0, cluster, fmt[1:], param_offsets(fmt),
                                        struct.calcsize(fmt), pdl=pdl)


LAUNCHERS = [pytest.param(native_launcher, id="native"),
             pytest.param(bindings_launcher, id="bindings")]
# with clusters and programmatic dependent launch the launchers pack the same way
CONFIGURED = [pytest.param(lambda fmt: make(fmt, cluster=2, pdl=True), id=f"{p.id}-cluster-pdl")
              for p in LAUNCHERS for make in [p.values[0]]]

CASES = [
    ("@QiqHf", (0xDEAD_BEEF_0000, -7, 2 ** 40, 0xB800, 0.25)),
    ("@?Qb", (True, 2 ** 64 - 1, -128)),
    ("@BhIq", (255, -32768, 2 ** 32 - 1, -(2 ** 63))),
    ("@fdf", (1e30, -1.5e300, float("nan"))),
    ("@iQiQ", (2 ** 31 - 1, 16, -(2 ** 31), 32)),
    ("@", ()),
]


@pytest.mark.parametrize("make", LAUNCHERS + CONFIGURED)
@pytest.mark.parametrize("fmt,values", CASES)
def test_pack_matches_struct(make, fmt, values):
    assert make(fmt).pack(values) == struct.pack(fmt, *values)


@pytest.mark.parametrize("make", LAUNCHERS)
def test_pack_accepts_numpy_scalars(make):
    fmt = "@Qiqfd?"
    values = (np.uint64(2 ** 40), np.int32(-3), np.int64(7), np.float32(0.1), np.float64(2.5),
              np.bool_(True))
    expected = struct.pack(fmt, 2 ** 40, -3, 7, float(np.float32(0.1)), 2.5, True)
    assert make(fmt).pack(values) == expected


@pytest.mark.parametrize("make", LAUNCHERS)
@pytest.mark.parametrize("fmt,values", [("@i", (2 ** 31,)), ("@B", (256,)), ("@H", (-1,)),
                                        ("@Q", (-1,)), ("@q", (2 ** 63,)), ("@b", (128,))])
def test_pack_rejects_out_of_range(make, fmt, values):
    with pytest.raises((OverflowError, struct.error)):
        make(fmt).pack(values)


@pytest.mark.parametrize("make", LAUNCHERS)
def test_pack_rejects_wrong_arity_and_types(make):
    launcher = make("@Qi")
    with pytest.raises((TypeError, struct.error)):
        launcher.pack((1,))
    with pytest.raises((TypeError, struct.error)):
        launcher.pack((1.5, 2))


def test_native_rejects_bad_layouts():
    from tilecore.runtime import _cudriver as native
    with pytest.raises(ValueError, match="unsupported parameter code x"):
        native.Launcher(1, 2, 128, 0, 1, "x", (0,), 8)
    with pytest.raises(ValueError, match="2 offsets for 1 parameter codes"):
        native.Launcher(1, 2, 128, 0, 1, "Q", (0, 8), 8)
    with pytest.raises(ValueError, match="parameter 0 offset 8 is outside the 8-byte"):
        native.Launcher(1, 2, 128, 0, 1, "Q", (8,), 8)


def test_native_error_message_names_the_parameter():
    with pytest.raises(OverflowError, match=r"kernel parameter 1: 300 is out of range for "
                                            r"struct code 'B'"):
        native_launcher("@QB").pack((0, 300))
