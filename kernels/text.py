"""Byte ranges gathered out of a buffer into one array (reads' names and bases picked by index), and
two buffers' ranges interleaved (mates side by side)."""
import numpy as np
from numba import njit

from pymap.kernels.threads import range_bounds, run_ranges


def _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)


def gather_ranges(buf, starts, ends):
    """Concatenate buf[starts[i]:ends[i]]; returns (out, offsets). (starts, ends are made contiguous
    int64 first: one compiled kernel for every caller's layout.) Threads over ranges of i."""
    starts, ends = _i64(starts), _i64(ends)
    n = starts.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    out = np.empty(offsets[n], buf.dtype)
    run_ranges(_gather_ranges, range_bounds(n, 4096), buf, starts, ends, offsets, out)
    return out, offsets


@njit(cache=True, nogil=True, _nrt=False)
def _gather_ranges(i0, i1, buf, starts, ends, offsets, out):
    for i in range(i0, i1):
        copy_into(buf[starts[i]:ends[i]], out[offsets[i]:offsets[i + 1]])


def interleave_ranges(a, a_offsets, b, b_offsets):
    """(out, offsets): the ranges of a and of b in turn, a's first (a's range i is range 2i of out,
    b's range 2i + 1); a_offsets and b_offsets hold n + 1 offsets each. Mates' bases, qualities and
    names put side by side in one copy. Threads over ranges of i."""
    a_offsets, b_offsets = _i64(a_offsets), _i64(b_offsets)
    n = a_offsets.shape[0] - 1
    offsets = np.zeros(2 * n + 1, np.int64)
    offsets[1::2] = np.diff(a_offsets)
    offsets[2::2] = np.diff(b_offsets)
    np.cumsum(offsets, out=offsets)
    out = np.empty(offsets[-1], a.dtype)
    run_ranges(_interleave_ranges, range_bounds(n, 4096), a, a_offsets, b, b_offsets, offsets, out)
    return out, offsets


@njit(cache=True, nogil=True, _nrt=False)
def _interleave_ranges(i0, i1, a, a_offsets, b, b_offsets, offsets, out):
    for i in range(i0, i1):
        copy_into(a[a_offsets[i]:a_offsets[i + 1]], out[offsets[2 * i]:offsets[2 * i + 1]])
        copy_into(b[b_offsets[i]:b_offsets[i + 1]], out[offsets[2 * i + 1]:offsets[2 * i + 2]])


@njit(cache=True, nogil=True, inline="always")
def copy_into(src, dst):
    """dst[:n] = the n bytes of src, a loop over the two slices (LLVM vectorises it; indexing a buffer
    from an offset instead ran half as fast, kernels/fastq.py)."""
    for j in range(src.shape[0]):
        dst[j] = src[j]


@njit(cache=True, nogil=True)
def mate_names(names1, offsets1, names2, offsets2, slash, one, two):
    """Mates' names checked pair by pair: (the first pair whose names differ or -1, strip), strip[i]
    True where name i of read 1 ends in slash + one and that of read 2 in slash + two (both longer
    than 2 bytes): those endings are left out of the comparison."""
    n = offsets1.shape[0] - 1
    strip = np.zeros(n, np.bool_)
    for i in range(n):
        s1, e1, s2, e2 = offsets1[i], offsets1[i + 1], offsets2[i], offsets2[i + 1]
        if (e1 - s1 > 2 and e2 - s2 > 2 and names1[e1 - 2] == slash and names1[e1 - 1] == one
                and names2[e2 - 2] == slash and names2[e2 - 1] == two):
            strip[i] = True
            e1 -= 2
            e2 -= 2
        if e1 - s1 != e2 - s2:
            return i, strip
        for k in range(e1 - s1):
            if names1[s1 + k] != names2[s2 + k]:
                return i, strip
    return -1, strip
