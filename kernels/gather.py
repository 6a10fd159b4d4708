"""Cut (read, reference segment) pairs for candidates out of a batch and the reference."""
from numba import njit, prange

from pymap.kernels.encoding import CODE_TO_ASCII


@njit(parallel=True, cache=True, nogil=True)
def gather_pairs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 length, out_reads, out_refs):
    """Fill out_reads[i], out_refs[i] (uint8 ASCII, shape (n, length)) for candidates idx 0..n-1:
    the oriented read and ref[pos:pos+length], 'N' where the segment leaves [lo, hi)."""
    table = CODE_TO_ASCII
    for i in prange(c_read.shape[0]):
        a = read_offsets[c_read[i]]
        # views indexed from 0 (no negative-index wraparound in the loops)
        src = rc_codes[a:a + length] if c_strand[i] else read_codes[a:a + length]
        row = out_reads[i]
        for j in range(length):
            row[j] = table[src[j]]
        p = c_pos[i]
        row = out_refs[i]
        if p >= c_lo[i] and p + length <= c_hi[i]:
            seg = ref_codes[p:p + length]
            for j in range(length):
                row[j] = table[seg[j]]
        else:
            for j in range(length):
                q = p + j
                if q < c_lo[i] or q >= c_hi[i]:
                    row[j] = 78
                else:
                    row[j] = table[ref_codes[q]]
