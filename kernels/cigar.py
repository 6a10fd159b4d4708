"""CIGAR arrays (BAM-style uint32: length << 4 | op) checked and measured in bulk."""
import numpy as np
from numba import njit

OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4


@njit(cache=True, nogil=True)
def soft_clips(cigar, lo, hi):
    """(leading, trailing) soft-clipped bases of the CIGAR cigar[lo:hi], in the reference's
    orientation; an empty CIGAR clips nothing."""
    lead = trail = np.int64(0)
    if hi > lo:
        if cigar[lo] & 15 == OP_S:
            lead = np.int64(cigar[lo] >> 4)
        if cigar[hi - 1] & 15 == OP_S:
            trail = np.int64(cigar[hi - 1] >> 4)
    return lead, trail


@njit(cache=True, nogil=True)
def cigar_spans(cigar, offsets):
    """Per CIGAR: (read bases, reference bases, bad) where bad marks an op other than M/I/D/S, a
    zero length, or an S that is not at either end."""
    n = offsets.shape[0] - 1
    qlen = np.zeros(n, np.int64)
    rlen = np.zeros(n, np.int64)
    bad = np.zeros(n, np.bool_)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        for k in range(a, b):
            op = cigar[k] & 15
            ln = np.int64(cigar[k] >> 4)
            if ln == 0 or (op != OP_M and op != OP_I and op != OP_D and op != OP_S):
                bad[i] = True
            if op == OP_S and k != a and k != b - 1:
                bad[i] = True
            if op == OP_M or op == OP_I or op == OP_S:
                qlen[i] += ln
            if op == OP_M or op == OP_D:
                rlen[i] += ln
    return qlen, rlen, bad
