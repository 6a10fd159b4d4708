"""kernels.records: a batch's records as arrays, against their NumPy definition (what pipeline.write
computed before the kernel)."""
import numpy as np
import pytest

from pymap.kernels.records import record_fields
from pymap.kernels.sam import NO_XS


def _fr_proper(a, b, strand, start, end, ctg, low, high):
    same = (ctg[a] == ctg[b]) & (strand[a] != strand[b])
    f, r = np.where(strand[a] == 0, a, b), np.where(strand[a] == 0, b, a)
    ins = end[r] - start[f]
    return same & (ins >= low) & (ins <= high)


def record_fields_numpy(rep_offsets, rep_hit, primary, mapq, has_sub, sub, supp, supp_mapq, strand, start, end, ctg,
                        supp_flag, proper=None, low=0, high=0):
    n = primary.size
    n_rep = np.diff(rep_offsets)
    per_read = np.maximum(n_rep, 1)
    rec_read = np.repeat(np.arange(n), per_read)
    rec_first = np.zeros(n + 1, np.int64)
    np.cumsum(per_read, out=rec_first[1:])
    rank = np.arange(rec_read.size) - rec_first[rec_read]
    rec_hit = np.full(rec_read.size, -1, np.int64)
    m = n_rep[rec_read] > 0
    rec_hit[m] = rep_hit[rep_offsets[rec_read[m]] + rank[m]]
    aligned = rec_hit >= 0
    is_supp = aligned & (rank == 1) & (supp[rec_read] >= 0)
    flag = np.where(aligned, 0, 4).astype(np.int64)
    flag[aligned] |= strand[rec_hit[aligned]].astype(np.int64) * 16
    flag[aligned & (rank > 0) & ~is_supp] |= 256
    flag[is_supp] |= supp_flag
    rec_mapq = np.where(aligned & (rank == 0), mapq[rec_read], 0).astype(np.int64)
    rec_mapq[is_supp] = supp_mapq[rec_read[is_supp]]
    rec_xs = np.where(aligned & (rank == 0) & has_sub[rec_read], sub[rec_read].astype(np.int64), NO_XS)
    rec_sa = np.full(rec_read.size, -1, np.int64)
    si = np.flatnonzero(is_supp)
    rec_sa[si], rec_sa[si - 1] = si - 1, si
    rec_mate, rec_tlen = np.full(rec_read.size, -1, np.int64), np.zeros(rec_read.size, np.int64)
    if proper is not None:
        mapped = primary >= 0
        mate = rec_read ^ 1
        rec_mate = rec_first[mate]
        mate_hit = rec_hit[rec_mate]
        flag |= 1 | np.where(rec_read % 2 == 0, 64, 128)
        in_proper = proper[rec_read // 2] & mapped[rec_read] & mapped[mate]
        other = np.flatnonzero(in_proper & (rank > 0))
        in_proper[other] = _fr_proper(rec_hit[other], mate_hit[other], strand, start, end, ctg, low, high)
        flag[in_proper] |= 2
        flag[mate_hit < 0] |= 8
        placed = np.flatnonzero(mate_hit >= 0)
        flag[placed[strand[mate_hit[placed]] == 1]] |= 32
        idx = np.flatnonzero(aligned & (mate_hit >= 0))
        a, b = rec_hit[idx], mate_hit[idx]
        span = np.maximum(end[a], end[b]) - np.minimum(start[a], start[b])
        left = (start[a] < start[b]) | ((start[a] == start[b]) & (rec_read[idx] % 2 == 0))
        rec_tlen[idx] = np.where(ctg[a] == ctg[b], np.where(left, span, -span), 0)
    return rec_read, rec_hit, flag, rec_mapq, rec_xs, rec_sa, rec_mate, rec_tlen


@pytest.mark.parametrize("paired", [False, True])
def test_record_fields_equal_numpy(paired):
    """Unmapped reads, primaries alone, with a supplementary, with secondaries; mates on two contigs,
    both strands, inserts inside and outside [low, high], equal starts."""
    rng = np.random.default_rng(3)
    n = 4000
    per = np.where(rng.random(n) < 0.15, 0, rng.integers(1, 5, n))
    rep_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(per, out=rep_offsets[1:])
    n_hits = int(rep_offsets[-1])
    rep_hit = rng.permutation(n_hits)
    primary = np.where(per > 0, rep_hit[np.minimum(rep_offsets[:-1], n_hits - 1)], -1)
    supp = np.where((per > 1) & (rng.random(n) < 0.4), rep_hit[np.minimum(rep_offsets[:-1] + 1, n_hits - 1)], -1)
    strand = rng.integers(0, 2, n_hits).astype(np.int8)
    start = rng.integers(0, 2000, n_hits).astype(np.int64)
    start[rng.random(n_hits) < 0.05] = 1000
    end = start + rng.integers(90, 151, n_hits)
    ctg = (rng.random(n_hits) < 0.1).astype(np.int64)
    args = (rep_offsets, rep_hit, primary, rng.integers(0, 61, n), rng.random(n) < 0.5,
            rng.integers(-50, 150, n).astype(np.int32), supp, rng.integers(0, 61, n), strand, start, end, ctg, 2048)
    if paired:
        args += (rng.random(n // 2) < 0.7, 200, 900)
    got = record_fields(*args)
    want = record_fields_numpy(*args)
    for name, a, b in zip("read hit flag mapq xs sa mate tlen".split(), got, want):
        assert np.array_equal(a, b), name
    assert (got[2] & 2048).any() and (got[2] & 256).any() and (got[2] & 4).any()
    if paired:
        assert (got[2] & 2).any() and (got[7] != 0).any() and (got[7] < 0).any()
