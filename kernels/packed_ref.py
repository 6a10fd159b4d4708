"""The reference packed two bits a base, as bwa's .pac, and decoded back to mapping codes block by block.

A reference of n mapping codes (0-3 = ACGT, 4 = any other base) is kept as

* ``pac``: uint8[(n + 3) // 4], base i in bits 2 (i & 3) .. 2 (i & 3) + 1 of byte i >> 2 (code 4 stored as 0);
* ``amb``: int64[k, 2], the runs [start, end) of code 4, ascending and disjoint (N gaps are few and long).

Decoding works on blocks of ``BLOCK`` bases: a lazily decoded reference (mapper/reference.py) decodes the
blocks its candidates' windows touch, so its resident memory follows the reads, not the genome.
"""
import mmap
import threading
import weakref

import numpy as np
from numba import njit, prange

from pymap.kernels.encoding import N_CODE
from pymap.kernels.threads import range_bounds, run_ranges

#: bases per decoded block (a candidate's window of a few hundred bases touches one or two)
BLOCK = 1024


@njit(parallel=True, cache=True, nogil=True)
def _pack(codes, pac):
    n = codes.shape[0]
    for j in prange(pac.shape[0]):
        byte = 0
        for k in range(4):
            i = 4 * j + k
            if i < n and codes[i] < 4:
                byte |= codes[i] << (2 * k)
        pac[j] = byte


@njit(cache=True, nogil=True)
def _ambiguous_runs(codes):
    n = codes.shape[0]
    count = 0
    for i in range(n):
        if codes[i] >= 4 and (i == 0 or codes[i - 1] < 4):
            count += 1
    runs = np.empty((count, 2), np.int64)
    r = 0
    for i in range(n):
        if codes[i] >= 4:
            if i == 0 or codes[i - 1] < 4:
                runs[r, 0] = i
            if i + 1 == n or codes[i + 1] < 4:
                runs[r, 1] = i + 1
                r += 1
    return runs


def pack(codes):
    """(pac, amb) of uint8 mapping codes (any code above 3 counts as 4)."""
    codes = np.ascontiguousarray(codes, np.uint8)
    pac = np.empty((codes.shape[0] + 3) // 4, np.uint8)
    _pack(codes, pac)
    return pac, _ambiguous_runs(codes)


@njit(cache=True, nogil=True)
def _decode_block(pac, amb, n, b, out):
    a = b * BLOCK
    e = min(n, a + BLOCK)
    for i in range(a, e):
        out[i] = (pac[i >> 2] >> (2 * (i & 3))) & 3
    # the runs of code 4 that reach into [a, e): binary search for the first run ending after a
    lo, hi = 0, amb.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if amb[mid, 1] <= a:
            lo = mid + 1
        else:
            hi = mid
    r = lo
    while r < amb.shape[0] and amb[r, 0] < e:
        for i in range(max(a, amb[r, 0]), min(e, amb[r, 1])):
            out[i] = N_CODE
        r += 1


@njit(cache=True, nogil=True)
def _decode_range(t0, t1, pac, amb, n, blocks, out):
    for t in range(t0, t1):
        _decode_block(pac, amb, n, blocks[t], out)


def decode_blocks(pac, amb, n, blocks, out):
    """Decode the listed blocks of the reference into out (uint8[n] mapping codes), on threads."""
    run_ranges(_decode_range, range_bounds(blocks.shape[0], 256), pac, amb, n, blocks, out)


@njit(cache=True, nogil=True)
def missing_blocks(starts, ends, n, decoded):
    """The blocks that ranges [starts[i], ends[i]) (clamped to [0, n)) touch and that are not yet decoded,
    ascending; they are marked decoded (the caller decodes them before anyone reads them)."""
    for i in range(starts.shape[0]):
        a, e = max(starts[i], 0), min(ends[i], n)
        for b in range(a // BLOCK, (e - 1) // BLOCK + 1 if a < e else 0):
            if decoded[b] == 0:
                decoded[b] = 2
    out = np.flatnonzero(decoded == 2)
    decoded[out] = 1
    return out


class LazyCodes:
    """Mapping codes decoded from the packed reference block by block, on demand: `codes` is a
    zero-filled array of the genome's length (untouched pages cost no memory) in which a block is
    decoded before any stage reads it (Reference.ensure)."""

    def __init__(self, pac, amb, n):
        self.pac, self.amb, self.n = pac, amb, n
        # an anonymous map, not np.zeros: NumPy asks for huge pages on large arrays, and one decoded block
        # would then make 2 MB resident
        pages = mmap.mmap(-1, max(n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            pages.madvise(mmap.MADV_NOHUGEPAGE)
        self.pages = pages
        self.codes = np.frombuffer(pages, np.uint8, count=n)
        self.decoded = np.zeros(-(-n // BLOCK), np.uint8)
        self.lock = threading.Lock()
        _LAZY[id(self.codes)] = self

    def over(self, limit):
        """True when the memory pages the decoded blocks occupy pass `limit` bytes."""
        with self.lock:
            per_page = max(1, mmap.PAGESIZE // BLOCK)             # memory is resident by pages, not blocks
            d = np.pad(self.decoded, (0, -self.decoded.size % per_page)).reshape(-1, per_page)
            return int(np.count_nonzero(d.any(axis=1))) * mmap.PAGESIZE > limit

    def trim(self, limit):
        """Forget every decoded block once they pass `limit` bytes (over; the pages go back to the
        system and read as zeros again): a long run keeps its decoded reference near what one batch
        needs. Only with no batch in flight: any stage reads codes only inside windows it ensured since."""
        if not self.over(limit):
            return
        with self.lock:
            self.pages.madvise(mmap.MADV_DONTNEED)
            self.decoded[:] = 0

    def decode_all(self):
        """Decode every block (a small genome at load; the whole sequence for a GPU copy or an index build)."""
        self.ensure(np.zeros(1, np.int64), np.full(1, self.n, np.int64))

    def ensure(self, starts, ends):
        """Decode the blocks that ranges [starts[i], ends[i]) touch (mapper/reference.py Reference.ensure)."""
        with self.lock:
            blocks = missing_blocks(np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(ends, np.int64),
                                    self.n, self.decoded)
            if blocks.size:
                decode_blocks(self.pac, self.amb, self.n, blocks, self.codes)


_LAZY = weakref.WeakValueDictionary()


def complete(codes):
    """Decode every block of a lazily decoded reference's codes (before they are copied whole, to a
    GPU); any other array is left as it is."""
    lazy = _LAZY.get(id(codes))
    if lazy is not None and lazy.codes is codes:
        lazy.decode_all()
