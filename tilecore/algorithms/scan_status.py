"""DeviceScan's status words (scan_kernels.py has the design): how a tile
publishes its aggregate or inclusive prefix and how others read them, the ticket
counter, and `scan_init`, which clears both before a single-pass scan.

Status words pack the flags (READY, HEAD: a key run starts in the range,
PREFIX: an inclusive prefix) in their high 32 bits and a value of up to 32
bits in their low bits, published by one relaxed 64-bit store and read by one
relaxed load or atomic (PACKED 1). Wider values go to `vals` (modes 2 and 4
keep aggregates and prefixes in separate halves of it, since a word goes from
aggregate to prefix), either (PACKED 0) with plain stores published by a
release store of the word and read after an acquire, or (PACKED 2, modes 2-4:
the policy's split_status) split: the word holds the flags in bits 32-35 and
the value's bits 0-31 and 32-59 around them (bits 0-31 and 36-63), the second
word (int32 in vals, cleared with the words) the same flags in its bits 4-7
and the value's top 4 bits, both stored relaxed, the second first. A reader
loads both and counts a word ready only once its second word carries the same
flags (ready_bits, in every readiness check): each word is one atomic access
and each (state, word) is written once a scan, so equal flags mean the same
publication. No fence on either side; 12 bytes a tile (mode 3's aggregates),
so that 8-byte scans on small tiles keep their temporary storage within CUB's.
"""
from __future__ import annotations

import tilecore as ct

from .scan_tiles import ZERO, join

__all__ = ["MO", "MS", "READY", "HEAD", "PREFIX", "to_bits", "from_bits", "publish", "read_words",
           "ticket", "publish_at", "load_words", "load_needed", "second_needed", "flags_of",
           "publish_aggregate", "publish_prefix", "ready_bits", "join_split", "word_values",
           "scan_init", "scan_init_split"]

MO, MS = ct.MemoryOrder, ct.MemoryScope
READY, HEAD, PREFIX = 1, 2, 4


@ct.function
def to_bits(v, ACC):
    """The bits of a (1,) value of at most 32 bits, zero-extended to int64."""
    if ACC.itemsize == 4:
        b = ct.bitcast(v, ct.uint32)
    elif ACC.itemsize == 2:
        b = ct.bitcast(v, ct.uint16)
    else:
        b = ct.bitcast(v, ct.uint8)
    return ct.astype(b, ct.int64)


@ct.function
def from_bits(w, ACC):
    """The value in the low bits of status words w."""
    low = ct.astype(w & 0xFFFFFFFF, ct.uint32)
    if ACC.itemsize == 4:
        return ct.bitcast(low, ACC)
    elif ACC.itemsize == 2:
        return ct.bitcast(ct.astype(low, ct.uint16), ACC)
    else:
        return ct.bitcast(ct.astype(low, ct.uint8), ACC)


@ct.function
def publish(status, vals, m, head, v, ACC, PACKED):
    """Publish tree[m] = (head, v) with the READY flag."""
    publish_at(status, m, vals, m, ct.astype(head, ct.int64) * HEAD + READY, v, ACC, PACKED)


@ct.function
def read_words(raw, pos, mask, zero, PACKED):
    """The status words at `pos` (masked lanes: 0), read by atomics: relaxed for
    packed words, acquire when the values are in `vals`."""
    if PACKED:
        return raw.atomic_or_offset(pos, zero, mask=mask, memory_order=MO.RELAXED,
                                    memory_scope=MS.DEVICE)
    else:
        return raw.atomic_or_offset(pos, zero, mask=mask, memory_order=MO.ACQUIRE,
                                    memory_scope=MS.DEVICE)


@ct.function
def ticket(counter, SINGLE):
    if SINGLE:
        return ct.zeros((), counter.dtype)
    else:
        return ct.atomic_add(counter, 0, 1, memory_order=MO.RELAXED)


@ct.function
def publish_at(status, s_idx, vals, v_idx, flags, v, ACC, PACKED):
    """status[s_idx] = flags (a (1,) int64 tile) with value v: packed beside the
    flags (one relaxed store), split over the word and vals[v_idx] (two relaxed
    stores, the second word first), or in vals[v_idx] published by a release store."""
    if PACKED == 1:
        ct.store(status, (s_idx,), (flags << 32) | to_bits(v, ACC), memory_order=MO.RELAXED,
                 memory_scope=MS.DEVICE)
    elif PACKED == 2:
        bits = ct.bitcast(v, ct.int64)
        ct.store(vals, (v_idx,), ct.astype((flags << 4) | ((bits >> 60) & 0xF), ct.int32),
                 memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
        ct.store(status, (s_idx,), (((bits >> 32) & 0xFFFFFFF) << 36) | (flags << 32)
                 | (bits & 0xFFFFFFFF), memory_order=MO.RELAXED, memory_scope=MS.DEVICE)
    else:
        ct.store(vals, (v_idx,), v)
        ct.store(status, (s_idx,), flags << 32, memory_order=MO.RELEASE, memory_scope=MS.DEVICE)


@ct.function
def load_words(status, idx, size, PACKED):
    """status words [idx*size, (idx+1)*size): relaxed (packed or split) or acquire loads."""
    if PACKED:
        return ct.load(status, (idx,), (size,), padding_mode=ZERO, memory_order=MO.RELAXED,
                       memory_scope=MS.DEVICE)
    else:
        return ct.load(status, (idx,), (size,), padding_mode=ZERO, memory_order=MO.ACQUIRE,
                       memory_scope=MS.DEVICE)


@ct.function
def load_needed(status, idx, size, need, PACKED):
    """Mode 3's window of status words [idx*size, (idx+1)*size), of which a tile
    waits for the lanes in `need` only: split words (PACKED 2) are read in those
    lanes alone (relaxed; the others 0, not read), others whole (load_words).
    Every tile reads the groups' words, so those few lines take most reads: the
    8-byte sums, which read them twice (words and second words), ran 2-30% faster
    at 2^22 to 2^27 reading only what they wait for (float64 exclusive sums on
    shifted tiles: exclusive_pairs 0); the 4-byte ones moved by -2.4% to +1%
    (H200, session 28)."""
    if PACKED == 2:
        pos = idx * size + ct.arange(size, dtype=ct.int32)
        return status.get_raw_memory().load_offset(pos, mask=need, padding_value=0,
                                                   memory_order=MO.RELAXED,
                                                   memory_scope=MS.DEVICE)
    else:
        return load_words(status, idx, size, PACKED)


@ct.function
def second_needed(vals, idx, size, words, need, PACKED):
    """The second words of split status words [idx*size, (idx+1)*size) (PACKED 2)
    in the lanes of `need` alone (load_needed's); otherwise `words` itself (no
    second words)."""
    if PACKED == 2:
        return load_needed(vals, idx, size, need, PACKED)
    else:
        return words


@ct.function
def ready_bits(words, hi, PACKED):
    """1 where a status word is published, else 0: READY, and with PACKED 2 its
    second word `hi` carrying the same flags (stored relaxed, it may show after
    the word; a lane whose second word lags is read again as one not yet ready)."""
    if PACKED == 2:
        return ct.where(ct.astype((hi >> 4) & 0xF, ct.int64) == ((words >> 32) & 0xF),
                        (words >> 32) & READY, 0)
    else:
        return (words >> 32) & READY


@ct.function
def join_split(words, hi, ACC):
    """The 8-byte values of split status words (publish_at's layout): the top 4
    bits from the second words."""
    return ct.bitcast((ct.astype(hi & 0xF, ct.int64) << 60) | (((words >> 36) & 0xFFFFFFF) << 32)
                      | (words & 0xFFFFFFFF), ACC)


@ct.function
def word_values(words, hi, vals, idx, size, ACC, PACKED):
    """The values of published status words [idx*size, (idx+1)*size) (hi: their
    second words, second_needed): beside the flags (PACKED 1), split over the word
    and hi (PACKED 2), or in vals."""
    if PACKED == 1:
        return from_bits(words, ACC)
    elif PACKED == 2:
        return join_split(words, hi, ACC)
    else:
        return ct.load(vals, (idx,), (size,))


@ct.function
def flags_of(head):
    return ct.astype(head, ct.int64) * HEAD + READY


@ct.function
def publish_aggregate(status, vals, P, t, a_head, agg, ACC, PACKED):
    """A look-back tile's first word (modes 2 and 4): its aggregate; tile 0's is
    its inclusive prefix."""
    if t == 0:
        publish_at(status, t, vals, P + t, ct.full((1,), READY | PREFIX, ct.int64), agg,
                   ACC, PACKED)
    else:
        publish_at(status, t, vals, t, flags_of(a_head), agg, ACC, PACKED)


@ct.function
def publish_prefix(status, vals, P, t, excl, a_head, agg, KIND, OP, ACC, BY_KEY, PACKED):
    """Publish tile t's inclusive prefix (excl, then its aggregate) in its word
    (modes 2 and 4); returns its exclusive prefix part (ok, head, value): item 0
    starts a run, so every prefix holds a head."""
    one = ct.full((1,), 1, ct.int32)
    _, _, incl = join(one, one, excl, one, a_head, agg, KIND, OP, ACC, BY_KEY)
    publish_at(status, t, vals, P + t, ct.full((1,), READY | PREFIX, ct.int64), incl, ACC,
               PACKED)
    return one, one, excl


@ct.function
def clear_words(counter, status, TILE):
    """This block's TILE status words cleared (and the counter, by block 0)."""
    ct.store(status, (ct.bid(0),), ct.zeros((TILE,), ct.int64))
    if ct.bid(0) == 0:
        ct.store(counter, (0,), ct.zeros((1,), counter.dtype))


@ct.kernel
def scan_init(counter, status, TILE: ct.Constant[int]):
    """Clear the ticket counter and every tile's status word before a scan, and
    let the scan start at once (it is launched for early start: a load-ahead
    scan prefetches its first tile while this runs, then waits for it; the
    others wait first: scan_plan)."""
    ct.grid_dependency_control_launch_dependents()
    clear_words(counter, status, TILE)


@ct.kernel
def scan_init_split(counter, status, vals, TILE: ct.Constant[int]):
    """scan_init, and the second words of split 8-byte values (PACKED 2) too: a
    stale second word must not carry the flags its word will get (the grid
    covers the longer array; the other's tiles past its end store nothing)."""
    ct.grid_dependency_control_launch_dependents()
    ct.store(vals, (ct.bid(0),), ct.zeros((TILE,), vals.dtype))
    clear_words(counter, status, TILE)
