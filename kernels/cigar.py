"""CIGAR arrays (BAM-style uint32: length << 4 | op) checked and measured in bulk."""
import numpy as np
from numba import njit

from pymap.kernels.threads import range_bounds, run_ranges

OP_M, OP_I, OP_D, OP_S = 0, 1, 2, 4


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


def cigar_edits(cigar, offsets, start, read_codes, rc_codes, read_offsets, c_read, c_strand, ref_codes):
    """NM of each alignment from its CIGAR (M/I/D/S, as cigar_spans accepts) against the reference:
    mismatches (an N on either side included) + inserted + deleted bases; -1 for an empty CIGAR.
    Threads over ranges of alignments."""
    n = offsets.shape[0] - 1
    nm = np.full(n, -1, np.int64)
    run_ranges(_cigar_edits, range_bounds(n, 4096), cigar, offsets, start, read_codes, rc_codes, read_offsets,
               c_read, c_strand, ref_codes, nm)
    return nm


@njit(cache=True, nogil=True)
def _cigar_edits(i0, i1, cigar, offsets, start, read_codes, rc_codes, read_offsets, c_read, c_strand, ref_codes, nm):
    for i in range(i0, i1):
        if offsets[i + 1] == offsets[i]:
            continue
        src = rc_codes if c_strand[i] == 1 else read_codes
        j = read_offsets[c_read[i]]
        q = start[i]
        count = 0
        for k in range(offsets[i], offsets[i + 1]):
            op = cigar[k] & 15
            ln = np.int64(cigar[k] >> 4)
            if op == OP_M:
                for t in range(ln):
                    a = src[j + t]
                    if a >= 4 or a != ref_codes[q + t]:
                        count += 1
                j += ln
                q += ln
            elif op == OP_I:
                count += ln
                j += ln
            elif op == OP_D:
                count += ln
                q += ln
            else:
                j += ln
        nm[i] = count
