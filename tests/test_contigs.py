"""kernels.contigs.place_on_contigs against its definition written out in NumPy (the pipeline's
code before the kernel), on random candidates around the ends of many contigs."""
import numpy as np
import pytest

from pymap.kernels.contigs import place_on_contigs


def placed_by_definition(read, strand, pos, read_offsets, maxe, offs, split, min_aligned):
    lengths = np.diff(read_offsets)
    L = lengths[read].astype(np.int64)
    e = maxe[read].astype(np.int64)
    last = len(offs) - 2
    idx = np.arange(read.size)
    if split:       # every contig from that of the first base to that of the last, a pass each
        first = np.clip(np.searchsorted(offs, pos, side="right") - 1, 0, last)
        final = np.clip(np.searchsorted(offs, pos + L - 1, side="right") - 1, 0, last)
        steps = range(int((final - first).max(initial=0)) + 1)
        idx = np.concatenate([np.flatnonzero(first + s <= final) for s in steps])
        ctg = np.concatenate([(first + s)[first + s <= final] for s in steps])
        need = np.minimum(L[idx] - e[idx], min_aligned)
    else:
        ctg = np.clip(np.searchsorted(offs, pos + L // 2, side="right") - 1, 0, last)
        need = L - e
    L, e, p = L[idx], e[idx], pos[idx]
    lo, hi = offs[ctg], offs[ctg + 1]
    keep = np.flatnonzero(np.minimum(hi, p + L + e) - np.maximum(lo, p - e) >= need)
    return read[idx][keep], strand[idx][keep], p[keep], lo[keep], hi[keep], e[keep]


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_the_definition(split, seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 400, 30)
    sizes[::7] = rng.integers(30, 120, sizes[::7].size)        # contigs shorter than some reads
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_reads = 200
    lengths = rng.integers(30, 160, n_reads)
    read_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    maxe = rng.integers(0, 12, n_reads).astype(np.int32)
    n = 3000
    read = np.sort(rng.integers(0, n_reads, n)).astype(np.int32)
    strand = rng.integers(0, 2, n).astype(np.int8)
    # around contig ends, and a few before the reference or past its end
    near = offs[rng.integers(0, offs.size, n)] + rng.integers(-200, 200, n)
    pos = np.where(rng.random(n) < 0.05, rng.integers(-300, offs[-1] + 300, n), near).astype(np.int64)
    got = place_on_contigs(read, strand, pos, read_offsets, maxe, offs, split, 30)
    exp = placed_by_definition(read, strand, pos, read_offsets, maxe, offs, split, 30)
    assert len(got[0]) == len(exp[0]) > 0
    for g, x in zip(got, exp):
        assert np.array_equal(g, x)
    if split:   # reads over a contig end were placed on both contigs, some on three
        key = np.stack([got[0].astype(np.int64), got[1], got[2]])
        _, times = np.unique(key, axis=1, return_counts=True)
        assert times.max() >= 3


def test_one_contig_and_no_candidates():
    offs = np.array([0, 1000], np.int64)
    ro = np.array([0, 100], np.int64)
    e = np.array([5], np.int32)
    out = place_on_contigs(np.zeros(0, np.int32), np.zeros(0, np.int8), np.zeros(0, np.int64), ro, e, offs, True, 30)
    assert all(x.size == 0 for x in out)
    out = place_on_contigs(np.zeros(2, np.int32), np.zeros(2, np.int8), np.array([-90, 950], np.int64), ro, e, offs,
                           True, 30)
    # 15 bases of the first inside (needs 30): dropped; the second keeps 50 of 100 (clipped at the end)
    assert out[2].tolist() == [950] and out[3].tolist() == [0] and out[4].tolist() == [1000]
    # reads over both ends of a 60-base contig: on it, and on a contig around it that keeps 30 bases
    offs = np.array([0, 1000, 1060, 2000], np.int64)
    out = place_on_contigs(np.zeros(2, np.int32), np.zeros(2, np.int8), np.array([980, 965], np.int64), ro, e, offs,
                           True, 30)
    assert out[2].tolist() == [965, 980, 965] and out[3].tolist() == [0, 1000, 1000]
