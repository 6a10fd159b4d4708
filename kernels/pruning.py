"""The glue of the extension's rounds (Pipeline.align, Pipeline._split_by_indels) as nogil kernels:
which candidates a round extends, the bars a round's strong alignments set for the rest, the reads
whose best alignment is weak (their rejected candidates are extended too), and the primaries clipped
where a long indel may hide (extended again with a wider band)."""
import numpy as np
from numba import njit

from pymap.kernels.borrow import borrowed
from pymap.kernels.cigar import soft_clips


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


@njit(cache=True, nogil=True, _nrt=False)
def raise_bars(bar, read, found, score, cigar, cigar_offsets, strong, margin):
    """For each found alignment k of read read[k] that is unclipped and scores at least strong[read],
    bar[read] raised to its score less margin where that is higher."""
    for k in range(read.shape[0]):
        if not found[k]:
            continue
        r = read[k]
        lead, trail = soft_clips(cigar, cigar_offsets[k], cigar_offsets[k + 1])
        if lead == 0 and trail == 0 and score[k] >= strong[r]:
            bar[r] = max(bar[r], np.int64(score[k]) - margin)


@njit(cache=True, nogil=True)
def weak_reads(c_read, idx, found, score, cigar, cigar_offsets, good_score, n_reads, min_aligned):
    """Per read, whether its best alignment (of those found among alignment k = candidate idx[k] of
    read c_read[idx[k]]: the highest score, the first of equals) scores below good_score[read] or
    leaves min_aligned or more bases soft-clipped; True for a read with none."""
    (c_read, idx, found, score, cigar, cigar_offsets, good_score) = borrowed((
        c_read, idx, found, score, cigar, cigar_offsets, good_score))
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
        lead, trail = soft_clips(cigar, cigar_offsets[b], cigar_offsets[b + 1])
        weak[r] = score[b] < good_score[r] or lead + trail >= min_aligned
    return weak


@njit(cache=True, nogil=True)
def clipped_primaries(primary, hit_aln, h_start, h_end, h_ctg, cigar, cigar_offsets, ctg_offsets, min_clip):
    """The primary hits (primary[read] >= 0; hit k is alignment hit_aln[k]) soft-clipped by min_clip
    or more bases at an end where their contig goes on: (their hit indices, in read order, and each
    one's leading clip in the reference's orientation)."""
    (primary, hit_aln, h_start, h_end, h_ctg, cigar, cigar_offsets, ctg_offsets) = borrowed((
        primary, hit_aln, h_start, h_end, h_ctg, cigar, cigar_offsets, ctg_offsets))
    out = np.empty(primary.shape[0], np.int64)
    lead_out = np.empty(primary.shape[0], np.int64)
    n = 0
    for r in range(primary.shape[0]):
        k = primary[r]
        if k < 0:
            continue
        lead, trail = soft_clips(cigar, cigar_offsets[hit_aln[k]], cigar_offsets[hit_aln[k] + 1])
        c = h_ctg[k]
        if (lead >= min_clip and h_start[k] > ctg_offsets[c]) or (trail >= min_clip and h_end[k] < ctg_offsets[c + 1]):
            out[n] = k
            lead_out[n] = lead
            n += 1
    return out[:n], lead_out[:n]
