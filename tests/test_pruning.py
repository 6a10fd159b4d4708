"""Pruning of a read's further candidates (Pipeline._extend_pruned) is exact: with it and without it
(a margin so wide that no candidate is skipped) the records are the same apart from XS, for single
reads and pairs in a repeat family; and it does skip work there. The rounds' kernels (kernels.pruning)
give what their NumPy expressions gave."""
import numpy as np
import pytest

from pymap import api
from pymap import insert, pipeline
from pymap.kernels import pruning
from pymap.kernels.select import query_spans
from pymap.kernels.sorting import order_by_group
from pymap.options import AlignOptions

from test_pairs import mutate, rand_seq
from conftest import revcomp


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """60 kb with 40 copies of a 400 bp element at 1-12 % divergence; 300 reads of 150 bp and 150
    pairs (insert 350), half of them starting inside the copies, with 1 % substitutions."""
    rng = np.random.default_rng(5)
    element = rand_seq(rng, 400)
    seq = list(rand_seq(rng, 60000))
    for k in range(40):
        p = 1000 + k * 1450
        seq[p:p + 400] = mutate(rng, element, 0.01 + 0.11 * k / 39)
    seq = "".join(seq)
    d = tmp_path_factory.mktemp("pruning")
    ref = d / "ref.fa"
    ref.write_text(f">fam\n{seq}\n")
    starts = [1000 + int(rng.integers(0, 40)) * 1450 + int(rng.integers(0, 250)) if i % 2 else
              int(rng.integers(0, len(seq) - 400)) for i in range(300)]
    single = [mutate(rng, seq[s:s + 150]) for s in starts]
    single = [revcomp(s) if i % 3 == 0 else s for i, s in enumerate(single)]
    (d / "se.fq").write_text("".join(f"@r{i}\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(single)))
    m1 = [mutate(rng, seq[s:s + 150]) for s in starts[:150]]
    m2 = [mutate(rng, revcomp(seq[s + 200:s + 350])) for s in starts[:150]]
    (d / "r1.fq").write_text("".join(f"@p{i}/1\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(m1)))
    (d / "r2.fq").write_text("".join(f"@p{i}/2\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(m2)))
    return d


def mapped(d, tmp_path, paired):
    out = tmp_path / "out.sam"
    st = api.align(str(d / "ref.fa"), str(d / ("r1.fq" if paired else "se.fq")), out=str(out),
                   mates_path=str(d / "r2.fq") if paired else None,
                   options=AlignOptions(progress=False, threads=2, insert_size=insert.parse("350,35")), summary=False)
    recs = [[f for f in line.split("\t") if not f.startswith("XS:i:")]
            for line in out.read_text().splitlines() if not line.startswith("@")]
    return st.aligned, recs


@pytest.mark.parametrize("paired", [False, True], ids=["single", "pairs"])
def test_pruning_changes_nothing_but_xs(family, tmp_path, monkeypatch, paired):
    aligned, recs = mapped(family, tmp_path, paired)
    monkeypatch.setattr(pipeline, "PRUNE_UNITS", 10 ** 6)      # every candidate reaches its bar
    monkeypatch.setattr(pipeline, "PRUNE_ROUNDS", (1,))
    aligned_all, recs_all = mapped(family, tmp_path, paired)
    assert aligned < aligned_all                                # pruning skipped some candidates
    assert recs == recs_all


def random_alignments(rng, n_reads, n):
    """n alignments of reads of 100 bases, each CIGAR an M with a soft clip at either end or neither."""
    read = rng.integers(0, n_reads, n).astype(np.int32)
    found = rng.random(n) < 0.8
    score = rng.integers(40, 100, n).astype(np.int32)       # ties
    ops = []
    for _ in range(n):
        lead, trail = rng.choice([0, 0, 5, 40]), rng.choice([0, 0, 3, 35])
        cig = ([lead << 4 | 4] if lead else []) + [(100 - lead - trail) << 4] + ([trail << 4 | 4] if trail else [])
        ops.append(cig)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(c) for c in ops], out=offsets[1:])
    return read, found, score, np.array([x for c in ops for x in c], np.uint32), offsets


def test_weak_reads_equal_numpy():
    rng = np.random.default_rng(5)
    n_reads = 60
    c_read, found, score, cigar, offsets = random_alignments(rng, n_reads, 300)
    idx = rng.permutation(300)[:250]                          # alignment k is candidate idx[k]
    found, score, offsets = found[:250], score[:250], offsets[:251]
    good = rng.integers(50, 90, n_reads).astype(np.int64)
    f = np.flatnonzero(found)
    f = f[order_by_group(c_read[idx[f]], n_reads, -score[f].astype(np.int64))]
    f_read = c_read[idx[f]]
    first = np.ones(f.size, np.bool_)
    first[1:] = f_read[1:] != f_read[:-1]
    top, top_read = f[first], f_read[first]
    length = np.full(n_reads, 100, np.int64)
    qbeg, qend = query_spans(cigar, offsets, top, np.zeros(top.size, np.int8), length[top_read])
    expect = np.ones(n_reads, np.bool_)
    expect[top_read] = (score[top] < good[top_read]) | (length[top_read] - (qend - qbeg) >= 30)
    got = pruning.weak_reads(c_read, idx, found, score, cigar, offsets, good, n_reads, 30)
    assert np.array_equal(got, expect) and got.any() and not got.all()
    # two alignments of one read tie: the first (unclipped) is its best, not the clipped one after it
    tie = pruning.weak_reads(np.zeros(2, np.int32), np.arange(2), np.ones(2, np.bool_), np.array([90, 90], np.int32),
                             np.array([100 << 4, 40 << 4 | 4, 60 << 4], np.uint32), np.array([0, 1, 3]),
                             np.array([80]), 1, 30)
    assert not tie[0]


def test_round_picks_and_raise_bars_equal_numpy():
    rng = np.random.default_rng(6)
    n_reads, no_bar = 40, np.iinfo(np.int64).min // 2
    read, found, score, cigar, offsets = random_alignments(rng, n_reads, 200)
    rank = rng.integers(0, 6, read.size)
    bar = np.where(rng.random(n_reads) < 0.3, 77, no_bar).astype(np.int64)
    for lo, hi in ((0, 1), (1, 4)):
        assert np.array_equal(pruning.round_picks(rank, read, bar, lo, hi, no_bar),
                              np.flatnonzero((rank >= lo) & (rank < hi) & (bar[read] == no_bar)))
    strong = rng.integers(50, 90, n_reads).astype(np.int64)
    ok = np.flatnonzero(found)
    r = read[ok]
    qbeg, qend = query_spans(cigar, offsets, ok, np.zeros(ok.size, np.int8), np.full(ok.size, 100))
    hit = (qend - qbeg == 100) & (score[ok] >= strong[r])
    expect = bar.copy()
    np.maximum.at(expect, r[hit], score[ok[hit]].astype(np.int64) - 12)
    pruning.raise_bars(bar, read, found, score, cigar, offsets, strong, 12)
    assert np.array_equal(bar, expect) and (bar != np.where(bar == no_bar, no_bar, 77)).any()


def test_clipped_primaries_equal_numpy():
    """Primaries clipped at either end, at contig ends or inside, on two contigs, and reads without one."""
    rng = np.random.default_rng(7)
    n_hits, n_reads = 300, 120
    read, found, score, cigar, offsets = random_alignments(rng, n_reads, n_hits)
    hit_aln = rng.permutation(n_hits)
    ctg_offsets = np.array([0, 5000, 9000], np.int64)
    ctg = rng.integers(0, 2, n_hits)
    start = np.where(rng.random(n_hits) < 0.2, ctg_offsets[ctg], ctg_offsets[ctg] + rng.integers(1, 3000, n_hits))
    end = np.where(rng.random(n_hits) < 0.2, ctg_offsets[ctg + 1], start + 100)
    primary = np.where(rng.random(n_reads) < 0.8, rng.integers(0, n_hits, n_reads), -1)
    prim = primary[primary >= 0]
    a = hit_aln[prim]
    lead, kept = query_spans(cigar, offsets, a, np.zeros(a.size, np.int8), np.full(a.size, 100))
    trail = 100 - kept
    split = (((lead >= 19) & (start[prim] > ctg_offsets[ctg[prim]]))
             | ((trail >= 19) & (end[prim] < ctg_offsets[ctg[prim] + 1])))
    got, got_lead = pruning.clipped_primaries(primary, hit_aln, start, end, ctg, cigar, offsets, ctg_offsets, 19)
    assert np.array_equal(got, prim[split]) and np.array_equal(got_lead, lead[split])
    assert 0 < got.size < prim.size
