"""The glue of Pipeline.align's rounds of extension as nogil kernels: which candidates a round
extends, the bars a round's strong alignments set for the rest, and the reads whose best alignment is
weak (their rejected candidates are extended too)."""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def round_picks(rank, read, bar, lo, hi, no_bar):
    """The accepted candidates k of rank lo..hi-1 within their read (rank[k], read[k]) whose read has
    no bar yet (bar[read] == no_bar), ascending."""
    n = 0
    for k in range(rank.shape[0]):
        n += lo <= rank[k] < hi and bar[read[k]] == no_bar
    out = np.empty(n, np.int64)
    n = 0
    for k in range(rank.shape[0]):
        if lo <= rank[k] < hi and bar[read[k]] == no_bar:
            out[n] = k
            n += 1
    return out


@njit(cache=True, nogil=True)
def raise_bars(bar, read, found, score, cigar, cigar_offsets, strong, margin):
    """For each found alignment k of read read[k] that is unclipped and scores at least strong[read],
    bar[read] raised to its score less margin where that is higher."""
    for k in range(read.shape[0]):
        if not found[k]:
            continue
        r = read[k]
        lo, hi = cigar_offsets[k], cigar_offsets[k + 1]
        clipped = hi > lo and (cigar[lo] & 15 == 4 or cigar[hi - 1] & 15 == 4)
        if not clipped and score[k] >= strong[r]:
            bar[r] = max(bar[r], np.int64(score[k]) - margin)


@njit(cache=True, nogil=True)
def weak_reads(c_read, idx, found, score, cigar, cigar_offsets, good_score, n_reads, min_aligned):
    """Per read, whether its best alignment (of those found among alignment k = candidate idx[k] of
    read c_read[idx[k]]: the highest score, the first of equals) scores below good_score[read] or
    leaves min_aligned or more bases soft-clipped; True for a read with none."""
    best = np.full(n_reads, -1, np.int64)
    for k in range(idx.shape[0]):
        if found[k]:
            r = c_read[idx[k]]
            b = best[r]
            if b < 0 or score[k] > score[b]:
                best[r] = k
    weak = np.ones(n_reads, np.bool_)
    for r in range(n_reads):
        b = best[r]
        if b < 0:
            continue
        lo, hi = cigar_offsets[b], cigar_offsets[b + 1]
        clipped = 0
        if hi > lo:
            if cigar[lo] & 15 == 4:
                clipped += cigar[lo] >> 4
            if cigar[hi - 1] & 15 == 4:
                clipped += cigar[hi - 1] >> 4
        weak[r] = score[b] < good_score[r] or clipped >= min_aligned
    return weak
