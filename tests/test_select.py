"""kernels.select's glue kernels against their NumPy definitions."""
import numpy as np
import pytest

from pymap.kernels.select import report_order


def report_order_numpy(h_read, h_score, keep, primary, supplementary, n_reads, max_hits, report_all):
    """report_order as NumPy calls: the kept others of each read by decreasing score (a stable sort
    keeps hit order among equal scores), the first max_hits - 1 of them."""
    others = np.flatnonzero(keep)
    others = others[(primary[h_read[others]] != others) & (supplementary[h_read[others]] != others)]
    others = others[np.lexsort((-h_score[others].astype(np.int64), h_read[others]))]
    o_read = h_read[others]
    rank = np.arange(others.size) - np.searchsorted(o_read, np.arange(n_reads + 1))[o_read]
    if not report_all:
        others, o_read = others[rank < max_hits - 1], o_read[rank < max_hits - 1]
    has, has_supp = primary >= 0, supplementary >= 0
    per_read = has.astype(np.int64) + has_supp + np.bincount(o_read, minlength=n_reads)
    rep_offsets = np.zeros(n_reads + 1, np.int64)
    np.cumsum(per_read, out=rep_offsets[1:])
    rep_hit = np.empty(rep_offsets[-1], np.int64)
    rep_hit[rep_offsets[:-1][has]] = primary[has]
    rep_hit[rep_offsets[:-1][has_supp] + 1] = supplementary[has_supp]
    rank = np.arange(others.size) - np.searchsorted(o_read, np.arange(n_reads + 1))[o_read]
    rep_hit[rep_offsets[o_read] + 1 + has_supp[o_read] + rank] = others
    return rep_offsets, rep_hit


@pytest.mark.parametrize("max_hits, report_all", [(1, False), (2, False), (5, False), (5, True)])
def test_report_order_equals_numpy(max_hits, report_all):
    """Reads without hits, with one, and with up to 60 (past one insertion-sort run), scores with
    many ties, merged (not kept) hits, supplementary hits."""
    rng = np.random.default_rng(7)
    n_reads = 3000
    per = np.where(rng.random(n_reads) < 0.2, 0, rng.integers(1, 5, n_reads))
    per[rng.choice(n_reads, 30, replace=False)] = rng.integers(30, 61, 30)
    h_read = np.repeat(np.arange(n_reads), per).astype(np.int32)
    first = np.searchsorted(h_read, np.arange(n_reads + 1))
    h_score = rng.integers(90, 100, h_read.size).astype(np.int32)
    keep = rng.random(h_read.size) < 0.8
    primary = np.where(per > 0, first[:-1] + rng.integers(0, 1 << 20, n_reads) % np.maximum(per, 1), -1)
    keep[primary[per > 0]] = True
    supplementary = np.where((per > 1) & (rng.random(n_reads) < 0.3), first[:-1] + (primary - first[:-1] + 1)
                             % np.maximum(per, 1), -1)
    got = report_order(h_read, h_score, keep, primary, supplementary, n_reads, max_hits, report_all)
    want = report_order_numpy(h_read, h_score, keep, primary, supplementary, n_reads, max_hits, report_all)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[1].size > 2 * n_reads // 3


@pytest.mark.parametrize("change", ["drop", "add"])
@pytest.mark.parametrize("share", [0.125, 1.0])
def test_reselect_equals_select(sim_data, change, share, monkeypatch):
    """Pipeline.reselect (only the reads whose alignments changed selected again) gives select()'s
    Hits over all alignments: a fifth of the alignments dropped, or a fifth copied with other scores
    and starts a few bases off (more hits of one locus, ties, new primaries)."""
    import copy
    import dataclasses

    from pymap import api, pipeline
    from pymap.batch import Alignments
    from pymap.options import AlignOptions
    from pymap.pipeline import Hits, gather_cigars
    from pymap.reads import read_batches
    monkeypatch.setattr(pipeline, "RESELECT_SHARE", share)     # 0.125: the whole batch, 1.0: the changed reads
    pipe = api.make_pipeline(str(sim_data[0]), AlignOptions(threads=1))
    batch = next(read_batches(str(sim_data[1]), 600))
    rng = np.random.default_rng(11)
    with pipe.batch():
        h = pipe.hits(batch)
        found = np.flatnonzero(h.aln.found)
        some = rng.choice(found, found.size // 5, replace=False)
        changed = np.zeros(len(batch), np.bool_)
        changed[h.aln_read[some]] = True
        if change == "drop":
            aln = copy.copy(h.aln)
            aln.found = aln.found.copy()
            aln.found[some] = False
            aln_read, aln_strand = h.aln_read, h.aln_strand
        else:
            more = Alignments(np.ones(some.size, np.bool_), h.aln.score[some] + rng.integers(-3, 2, some.size),
                              h.aln.edits[some], h.aln.start[some] + rng.integers(-2, 3, some.size),
                              *gather_cigars(h.aln, some))
            aln = Alignments.join([h.aln, more])
            aln_read = np.concatenate([h.aln_read, h.aln_read[some]])
            aln_strand = np.concatenate([h.aln_strand, h.aln_strand[some]])
        want = pipe.select(batch, h.lengths, h.maxe, h.reason0, h.has_cand, aln_read, aln_strand, aln, h.mapq_cap)
        got = pipe.reselect(h, aln_read, aln_strand, aln, h.aln_read[some])
    assert 0.125 * len(batch) < changed.sum() < len(batch) and not np.array_equal(want.primary, h.primary)
    for f in dataclasses.fields(Hits):
        if f.name not in ("batch", "aln"):
            a, b = getattr(got, f.name), getattr(want, f.name)
            assert a.dtype == b.dtype and np.array_equal(a, b), f.name
