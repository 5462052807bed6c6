"""The temporary-storage layout (dispatch/temp_storage.py) and buffer views."""
import numpy as np
import pytest

from tilecore.dispatch import ALIGNMENT, Layout, host_buffer
from tilecore.language import dtypes as D


def test_slots_are_aligned_and_sized_by_their_largest_alias():
    layout = Layout(3)
    a = layout.slot(0).alias(D.float32, 10)        # 40 bytes
    b = layout.slot(0).alias(D.float64, 42)        # 336 bytes: the slot's size
    c = layout.slot(2).alias(D.int8, 12)
    assert layout.offsets() == [0, 512, 512]       # slot 1 is empty: no room
    assert layout.size() == 512 + ALIGNMENT
    layout.map_to_buffer(layout.size())
    assert (a.offset, b.offset, c.offset) == (0, 0, 512)


def test_grow_never_shrinks_and_empty_layout_asks_one_byte():
    layout = Layout(2)
    assert layout.size() == 1
    a = layout.slot(1).alias(D.int32)
    assert layout.size() == 1
    a.grow(100).grow(3)
    assert a.count == 100 and layout.size() == 512
    with pytest.raises(ValueError):
        a.grow(-1)


def test_too_small_buffer_names_argument_and_sizes():
    layout = Layout(1)
    layout.slot(0).alias(D.float32, 100)
    with pytest.raises(ValueError, match=r'"temp_storage".*expected at least 512 bytes, got 100'):
        layout.map_to_buffer(100)


def test_host_views_share_the_buffer_at_their_offsets():
    layout = Layout(2)
    a = layout.slot(0).alias(D.float32, 3)
    b = layout.slot(1).alias(D.int64, 2)
    store = np.zeros(layout.size() // 8, np.float64)      # any dtype: its bytes are used
    buf = host_buffer(store)
    layout.map_to_buffer(buf.nbytes)
    va, vb = buf.view(a), buf.view(b)
    assert va.dtype == np.float32 and vb.dtype == np.int64
    vb[:] = [7, 8]
    assert store.view(np.int64)[ALIGNMENT // 8:ALIGNMENT // 8 + 2].tolist() == [7, 8]


def test_host_buffer_refuses_strided_or_read_only():
    with pytest.raises(ValueError, match="temp_storage"):
        host_buffer(np.zeros(64, np.uint8)[::2])
    ro = np.zeros(64, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        host_buffer(ro)
