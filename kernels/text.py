"""Byte ranges gathered out of a buffer into one array (reads' names and bases picked by index)."""
import numpy as np
from numba import njit

from pymap.kernels.threads import range_bounds, run_ranges


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def gather_ranges(buf, starts, ends, table):
    """Concatenate buf[starts[i]:ends[i]] mapped through a 256-entry table; returns (out, offsets).
    (starts, ends are made contiguous int64 first: one compiled kernel for every caller's layout.)
    Threads over ranges of i."""
    starts, ends = _i64(starts), _i64(ends)
    n = starts.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    out = np.empty(offsets[n], np.uint8)
    run_ranges(_gather_ranges, range_bounds(n, 4096), buf, starts, ends, table, offsets, out)
    return out, offsets


@njit(cache=True, nogil=True)
def _gather_ranges(i0, i1, buf, starts, ends, table, offsets, out):
    for i in range(i0, i1):
        src, dst = buf[starts[i]:ends[i]], out[offsets[i]:offsets[i + 1]]    # slices: see kernels/fastq.py
        for j in range(src.shape[0]):
            dst[j] = table[src[j]]

