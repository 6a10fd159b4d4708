"""Seeded candidates placed on the reference's contigs, in one pass (Pipeline.candidates)."""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True, _nrt=False)
def contig_of(ctg_offsets, x):
    """The contig holding global position x (contig k spans [ctg_offsets[k], ctg_offsets[k + 1])): the
    last one starting at or before x, so the first for positions before the reference and the last for
    positions beyond it. A binary search: np.searchsorted would compile its generic implementation."""
    lo = 0
    hi = ctg_offsets.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ctg_offsets[mid] <= x:
            lo = mid
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def place_on_contigs(read, strand, pos, read_offsets, max_edits, ctg_offsets, split, min_aligned):
    """(read, strand, pos, lo, hi, e) of the candidates whose window on their contig [lo, hi) holds
    enough of the read: its diagonal's span pos - e .. pos + L + e inside the contig must cover
    L - e bases, or with split min(L - e, min_aligned), L the read's length, e max_edits[read].

    Without split a candidate's contig is the one holding the middle of its read; with split (a
    scoring extender, which clips) a read over contig ends gives one candidate per contig it
    overlaps, from the contig of its first base to that of its last (a contig shorter than the read
    included): first every candidate on the contig of its first base, in input order, then those
    on the next contig of the candidates that reach it, and so on."""
    n = read.shape[0]
    first = np.empty(n, np.int64)
    final = np.empty(n, np.int64)
    length = np.empty(n, np.int64)
    m = 0
    passes = 1
    for i in range(n):
        L = read_offsets[read[i] + 1] - read_offsets[read[i]]
        length[i] = L
        if split:
            first[i] = contig_of(ctg_offsets, pos[i])
            final[i] = contig_of(ctg_offsets, pos[i] + L - 1)
        else:
            first[i] = contig_of(ctg_offsets, pos[i] + L // 2)
            final[i] = first[i]
        m += final[i] - first[i] + 1
        passes = max(passes, final[i] - first[i] + 1)
    o_read = np.empty(m, np.int32)
    o_strand = np.empty(m, np.int8)
    o_pos = np.empty(m, np.int64)
    o_lo = np.empty(m, np.int64)
    o_hi = np.empty(m, np.int64)
    o_e = np.empty(m, np.int64)
    k = 0
    for step in range(passes):
        for i in range(n):
            c = first[i] + step
            if c > final[i]:
                continue
            L = length[i]
            e = np.int64(max_edits[read[i]])
            lo, hi = ctg_offsets[c], ctg_offsets[c + 1]
            need = min(L - e, min_aligned) if split else L - e
            if min(hi, pos[i] + L + e) - max(lo, pos[i] - e) >= need:
                o_read[k], o_strand[k], o_pos[k] = read[i], strand[i], pos[i]
                o_lo[k], o_hi[k], o_e[k] = lo, hi, e
                k += 1
    return o_read[:k], o_strand[:k], o_pos[:k], o_lo[:k], o_hi[:k], o_e[:k]
