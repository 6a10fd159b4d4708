"""Cut (read, reference segment) pairs for candidates out of a batch and the reference."""
import numpy as np
from numba import njit, prange

from pymap.kernels.encoding import CODE_TO_ASCII


@njit(parallel=True, cache=True, nogil=True)
def gather_pairs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 length, out_reads, out_refs):
    """Fill out_reads[i], out_refs[i] (uint8 ASCII, shape (n, length)) for candidates idx 0..n-1:
    the oriented read and ref[pos:pos+length], 'N' where the segment leaves [lo, hi)."""
    table = CODE_TO_ASCII
    for i in prange(c_read.shape[0]):
        r = c_read[i]
        a = read_offsets[r]
        src = rc_codes if c_strand[i] else read_codes
        for j in range(length):
            out_reads[i, j] = table[src[a + j]]
        p = c_pos[i]
        for j in range(length):
            q = p + j
            if q < c_lo[i] or q >= c_hi[i]:
                out_refs[i, j] = 78
            else:
                out_refs[i, j] = table[ref_codes[q]]
