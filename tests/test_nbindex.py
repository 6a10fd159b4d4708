"""Neighborhood index: BDZ perfect hash, index file, seeding candidates (kernels/phf.py,
kernels/nbindex_build.py, kernels/nbindex_layouts.py, kernels/nbindex_query.py,
kernels/diagonal_clusters.py, mapper/index.py, mapper/seeders/neighborhood.py)."""
import itertools
import mmap
import os
import struct

import numba
import numpy as np
import pytest

from pymap.kernels import nbindex_query as Q
from pymap.kernels import phf as H
from pymap.kernels.sorting import sort_int64, sort_pairs
from pymap.kernels.threads import ahead, ordered_map, range_bounds, run_ranges
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.index import load_index, read_header, save_index
from pymap.seeders.neighborhood import NeighborhoodSeeder, default_build_params, parse_pattern

from seeder_helpers import make_batch, make_reference, mutate, revcomp


# ------------------------------------------------------------------------------------ helpers

def indexed_triples(index):
    """{(seed key, neighborhood, position)} stored in an index, read back through its tables."""
    a = index.arrays
    blk, slots, pos = a["blk"], a["slots"], a["pos"]
    out = set()
    for s in np.flatnonzero(np.diff(blk[:, 0].astype(np.int64))):
        for v in range(int(blk[s, 0]), int(blk[s + 1, 0])):
            for i in range(int(slots[v, 1]), int(slots[v + 1, 1])):
                out.add((int(s), int(slots[v, 0]), int(pos[i])))
    return out


def brute_triples(ref, care, span, ln):
    out = set()
    W = span + ln
    for c in range(len(ref.names)):
        lo, hi = int(ref.offsets[c]), int(ref.offsets[c + 1])
        for p in range(lo, hi - W + 1):
            w = ref.codes[p:p + W]
            if (w > 3).any():
                continue
            key = 0
            for q in care:
                key = key * 4 + int(w[q])
            nb = 0
            for q in range(span, W):
                nb = nb * 4 + int(w[q])
            out.add((key, nb, p))
    return out


def pattern_offsets(L, W, step):
    last = L - W
    offs = list(range(0, last + 1, step))
    if last % step:
        offs.append(last)
    return offs


def brute_edits_to_break(L, W, step):
    """Fewest positions hitting every pattern window, by exhaustive search (tiny L only)."""
    wins = [set(range(o, o + W)) for o in pattern_offsets(L, W, step)]
    for k in range(L + 1):
        for pts in itertools.combinations(range(L), k):
            if all(w & set(pts) for w in wins):
                return k


def reference_candidates(ref, care, span, ln, reads, max_edits, step, e_nb, max_occ, max_cands, min_hits,
                         lossless=False, sample_occ=0):
    """The seeding specification in plain Python (slow; small inputs). A read without candidates
    is seeded again with sample_occ evenly spaced positions of each neighborhood over max_occ."""
    table = {}
    for key, nb, p in brute_triples(ref, care, span, ln):
        table.setdefault((key, nb), []).append(p)
    out = []
    for r in range(len(reads)):
        args = (table, care, span, ln, reads[r], r, max_edits[r], step, e_nb, max_occ, max_cands, min_hits, lossless)
        out += _spec_read(*args, 0) or (_spec_read(*args, sample_occ) if sample_occ else [])
    return out


def _spec_read(table, care, span, ln, read, r, max_e, step, e_nb, max_occ, max_cands, min_hits, lossless, sample):
    """reference_candidates of one read, taking `sample` positions of neighborhoods over max_occ."""
    W = span + ln
    out = []
    st = step
    if lossless:
        st = next((x for x in range(step, 0, -1)
                   if len(read) >= W and Q.edits_to_break(len(read), W, x) > max_e), 1)
    for s, seq in enumerate((read, revcomp(read))):
        L = len(seq)
        if L < W:
            continue
        last = L - W
        offs = list(range(0, last + 1, st))
        if last % st:
            offs.append(last)
        hits = []
        for i, o in enumerate(offs):
            w = seq[o:o + W]
            if (w > 3).any():
                continue
            key = 0
            for q in care:
                key = key * 4 + int(w[q])
            b = [int(x) for x in w[span:]]
            variants = set()
            for d in range(e_nb + 1):
                for where in itertools.combinations(range(ln), d):
                    for subs in itertools.product((1, 2, 3), repeat=d):
                        v = list(b)
                        for q, x in zip(where, subs):
                            v[q] = (v[q] + x) % 4
                        variants.add(sum(x << (2 * (ln - 1 - q)) for q, x in enumerate(v)))
            for nb in variants:
                lst = sorted(table.get((key, nb), []))
                c = len(lst)
                take = c if c <= max_occ else min(c, sample)
                hits += [(lst[k * c // take] - o, i) for k in range(take)]
        hits.sort()
        clusters = []
        for d, i in hits:
            if clusters and d - clusters[-1][-1][0] <= max_e:
                clusters[-1].append((d, i))
            else:
                clusters.append([(d, i)])
        kept = []
        for cl in clusters:
            support = len({i for _, i in cl})
            counts = {}
            for d, _ in cl:
                counts[d] = counts.get(d, 0) + 1
            best = min(counts, key=lambda d: (-counts[d], d))
            if support >= min_hits:
                kept.append((support, best))
                far = {d: c for d, c in counts.items() if abs(d - best) > max_e}
                if cl[-1][0] - cl[0][0] > max_e and far:     # a tandem array: its runner-up
                    second = min(far, key=lambda d: (-far[d], d))
                    if far[second] >= min_hits:
                        kept.append((far[second], second))
        kept.sort(key=lambda x: (-x[0], x[1]))
        for _, d in sorted(kept[:max_cands], key=lambda x: x[1]):
            out.append((r, s, d))
    return out


def is_mapped(a):
    """True when the array's memory comes from a memory-mapped file."""
    while a is not None:
        if isinstance(a, (np.memmap, mmap.mmap)):
            return True
        a = getattr(a, "base", None)
    return False


def as_tuples(c):
    return list(zip(c.read.tolist(), c.strand.tolist(), c.pos.tolist()))


@pytest.fixture(scope="module")
def genome():
    """Two contigs of random sequence with repeats (exact and diverged copies) and a few N runs."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 4, 60_000).astype(np.uint8)
    unit = a[1000:1300].copy()
    for k in range(6):                       # a repeat family, some diverged
        at = 5000 + 7000 * k
        a[at:at + 300] = mutate(rng, unit, k, 0)[:300]
    a[20_000:20_003] = 4
    a[30_000] = 4
    b = rng.integers(0, 4, 25_000).astype(np.uint8)
    b[:5] = 4
    return make_reference([a, b], ["chrA", "chrB"])


@pytest.fixture(scope="module")
def genome_index(genome):
    seeder = NeighborhoodSeeder(seed_len=7, nb_len=6)
    return seeder, seeder.build_index(genome)


# ------------------------------------------------------------------------------------ hashing

def test_jenkins_mix_matches_c_definition():
    # values computed with Bob Jenkins' lookup2.c mix() macro and hash() on a 4-byte key (gcc)
    assert H.jenkins_mix(1, 2, 3) == (120349509, 1098030347, 3082062082)
    assert H.jenkins_mix(0xDEADBEEF, 0x9E3779B9, 0xFFFFFFFF) == (1728017483, 4240897135, 4069102931)
    assert H.jenkins_hash3(0x1B2C3D4E, 12345) == (759149240, 2321747858, 4132847466)
    assert H.jenkins_hash3(0, 0) == (1842314355, 2127564928, 2305145833)
    assert H.jenkins_hash3(0xFFFFFFFF, 0xFFFFFFFF) == (1842177397, 1991655301, 2441272147)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 10, 31, 100, 1000, 20000])
def test_phf_is_perfect(n):
    rng = np.random.default_rng(n)
    keys = np.unique(rng.integers(0, 2 ** 32, 3 * n))[:n].astype(np.int64)
    rng.shuffle(keys)
    seed, r, g, slot = H.build_phf(keys, n, 12345 + n, 1.23, 1, 64)
    assert g.shape[0] == 3 * r and r >= H.part_size(n)
    assert 3 * r <= max(3, 1.23 * n + 1 + 3 * (1 + (n < 10)))          # ~1.23 n vertices
    assert g.max(initial=0) <= 2
    assert len(set(slot.tolist())) == n                                 # injective
    assert (H.phf_eval(keys, seed, r, g) == slot).all()
    # each key's slot lies in its own edge, one vertex per part
    assert ((slot >= 0) & (slot < 3 * r)).all()


@pytest.mark.parametrize("pattern,ln", [("#########", 7), ("##-###--#", 5), ("#" * 13, 16), ("#" * 13 + "---", 16),
                                        ("#-" * 12 + "#", 9)])
def test_pattern_rows_match_pattern_by_pattern(pattern, ln):
    """pattern_rows' sliding window (patterns up to 32 bases; 32 exactly; longer ones read pattern by
    pattern) gives each pattern's offset, key and neighborhood as _pattern reads them, N skipped."""
    care, span = parse_pattern(pattern)
    rng = np.random.default_rng(len(pattern) + ln)
    work, var, combo = np.empty((512, 7), np.int64), np.empty(1, np.int64), np.empty(1, np.int64)
    for L in (span + ln - 1, span + ln, 60, 151, 250):
        seq = rng.integers(0, 4, L).astype(np.uint8)
        seq[rng.random(L) < 0.02] = 4
        for step in (1, 5, 6, 13):
            ni, npat = Q.pattern_rows(seq, care, span, ln, step, 0, work, var, combo)
            _, last = Q._patterns(L, span + ln, step)
            want = [(i, *Q._pattern(seq, i, step, last, care, span, ln)) for i in range(npat)]
            want = [(i, key, nb, o) for i, o, key, nb in want if o >= 0]
            assert [tuple(r) for r in work[:ni, :4].tolist()] == want


def test_degenerate_enumerates_each_variant_once():
    var = np.empty(Q.n_variants(8, 2), np.int64)
    combo = np.empty(2, np.int64)
    nb = 0b0001101100011011
    n = Q.degenerate(nb, 8, 2, var, combo)
    assert n == 1 + 24 + 28 * 9 and var[0] == nb
    got = var[:n]
    assert len(set(got.tolist())) == n
    assert all(Q.hamming2(int(x), nb, 2) for x in got)
    assert not Q.hamming2(nb ^ 0b010101, nb, 2)


# ------------------------------------------------------------------------------------ index build

def test_index_holds_exactly_valid_positions(genome, genome_index):
    seeder, index = genome_index
    care, span = parse_pattern("#" * 7)
    assert indexed_triples(index) == brute_triples(genome, care, span, 6)
    # nothing touching an N or crossing chrA|chrB is indexed
    pos = index.arrays["pos"].astype(np.int64)
    W = 13
    n_mask = genome.codes > 3
    assert not any(n_mask[p:p + W].any() for p in pos)
    boundary = int(genome.offsets[1])
    assert not ((pos < boundary) & (pos + W > boundary)).any()
    assert not np.isin(np.arange(boundary, boundary + 5), pos).any()      # chrB starts with NNNNN
    assert np.isin(boundary + 5, pos)


def test_spaced_seed_index_and_candidates(genome):
    seeder = NeighborhoodSeeder(pattern="####-#-##", nb_len=7, step=3, e_nb=1, max_cands=8)
    index = seeder.build_index(genome)
    care, span = parse_pattern("####-#-##")
    assert care.tolist() == [0, 1, 2, 3, 5, 7, 8] and span == 9
    assert indexed_triples(index) == brute_triples(genome, care, span, 7)
    rng = np.random.default_rng(3)
    reads = [mutate(rng, genome.codes[p:p + 60], 2, 0) for p in rng.integers(0, 59_000, 25)]
    me = np.full(len(reads), 3, np.int32)
    got = as_tuples(seeder.candidates(index, make_batch(reads), me))
    want = reference_candidates(genome, care, span, 7, reads, me, 3, 1, seeder.max_occ, 8, 1)
    assert got == want


def test_lookups_agree_and_reject_non_members(genome, genome_index):
    seeder, index = genome_index
    a = index.arrays
    blk_d, dist, _ = index.layout("bsearch")
    _, _, pos_nb = index.layout("list")
    triples = brute_triples(genome, *parse_pattern("#" * 7), 6)
    members = {}
    for key, nb, p in triples:
        members.setdefault((key, nb), set()).add(p)
    rng = np.random.default_rng(5)
    queries = list(members)[:3000] + [(int(k), int(b)) for k, b in
                                      zip(rng.integers(0, 4 ** 7, 3000), rng.integers(0, 4 ** 6, 3000))]
    for key, nb in queries:
        s1, e1 = Q.lookup_phf(a["blk"], a["g"], a["slots"], key, nb)
        s2, e2 = Q.lookup_bsearch(blk_d, dist, key, nb)
        got = set(a["pos"][s1:e1].tolist())
        assert got == members.get((key, nb), set())
        assert (s1, e1) == (s2, e2) or (e1 == s1 and e2 == s2)
        lo = int(a["slots"][int(a["blk"][key, 0]), 1])
        hi = int(a["slots"][int(a["blk"][key + 1, 0]), 1])
        listed = {int(a["pos"][i]) for i in range(lo, hi) if int(pos_nb[i]) == nb}
        assert listed == got


def test_phf_layout_small_blocks_memory(genome_index):
    _, index = genome_index
    a = index.arrays
    V = index.n_vertices
    assert a["g"].nbytes == (V + 3) // 4                # 2 bits per vertex
    m = np.diff(a["blk"][:, 0].astype(np.int64))
    assert (m % 3 == 0).all()


@pytest.mark.parametrize("lookup", ["phf", "bsearch", "list"])
@pytest.mark.parametrize("e_nb", [0, 1, 2])
def test_candidates_match_specification(genome, genome_index, lookup, e_nb):
    seeder, index = genome_index
    rng = np.random.default_rng(100 + e_nb)
    reads = []
    for k in range(30):
        p = int(rng.integers(0, 84_000))
        read = mutate(rng, genome.codes[p:p + int(rng.integers(40, 120))], k % 4, k % 2)
        reads.append(revcomp(read) if k % 3 == 0 else read)
    reads.append(genome.codes[1000:1100].copy())                       # the repeat family
    reads.append(np.full(50, 4, np.uint8))                             # all N
    reads.append(genome.codes[100:108].copy())                         # shorter than a pattern
    me = rng.integers(0, 6, len(reads)).astype(np.int32)
    s = NeighborhoodSeeder(seed_len=7, nb_len=6, step=5, e_nb=e_nb, max_occ=3, max_cands=4, min_hits=1 + (e_nb == 1),
                           lookup=lookup)
    got = s.candidates(index, make_batch(reads), me)
    want = reference_candidates(genome, np.arange(7), 7, 6, reads, me, 5, e_nb, 3, 4, 1 + (e_nb == 1),
                                sample_occ=s.sample_occ)
    assert as_tuples(got) == want
    assert got.read.dtype == np.int32 and got.strand.dtype == np.int8 and got.pos.dtype == np.int64


def test_long_reads_match_specification(genome, genome_index):
    """Reads of thousands of bases (scratch buffers grow inside the parallel kernel)."""
    seeder, index = genome_index
    rng = np.random.default_rng(4)
    reads = [mutate(rng, genome.codes[p:p + L], L // 200, 2) for p, L in ((2000, 1500), (10_000, 4000), (30, 9000))]
    reads += [genome.codes[5000:5300].copy()] * 3                     # the repeat family
    me = np.array([8, 8, 8, 3, 0, 5], np.int32)
    s = NeighborhoodSeeder(seed_len=7, nb_len=6, step=3, max_cands=40)
    got = s.candidates(index, make_batch(reads), me)
    want = reference_candidates(genome, np.arange(7), 7, 6, reads, me, 3, 0, s.max_occ, 40, 1)
    assert as_tuples(got) == want


def test_candidates_find_true_positions_both_strands():
    rng = np.random.default_rng(7)
    ref = make_reference([rng.integers(0, 4, 400_000).astype(np.uint8), rng.integers(0, 4, 100_000).astype(np.uint8)])
    seeder = NeighborhoodSeeder()
    index = seeder.build_index(ref)
    n = 400
    starts = rng.integers(0, ref.codes.shape[0] - 110, n)
    starts = starts[~((starts < ref.offsets[1]) & (starts + 110 > ref.offsets[1]))]
    reads, strands = [], []
    for k, p in enumerate(starts):
        read = mutate(rng, ref.codes[p:p + 100], k % 4, k % 3 == 0)
        if k % 2:
            read = revcomp(read)
        reads.append(read)
        strands.append(k % 2)
    me = np.full(len(reads), 5, np.int32)
    c = seeder.candidates(index, make_batch(reads), me)
    ok = (c.strand == np.array(strands)[c.read]) & (np.abs(c.pos - starts[c.read]) <= 5)
    found = np.zeros(len(reads), bool)
    found[c.read[ok]] = True
    assert found.mean() >= 0.99
    assert len(c) / len(reads) < 2.0
    # sorted by (read, strand, pos) and unique
    key = c.read.astype(np.int64) * 4 * 2 ** 40 + c.strand.astype(np.int64) * 2 ** 40 + c.pos
    assert (np.diff(key) > 0).all()


def test_deterministic_across_thread_counts(genome):
    rng = np.random.default_rng(9)
    reads = [mutate(rng, genome.codes[p:p + 100], 3, 1) for p in rng.integers(0, 80_000, 500)]
    me = np.full(len(reads), 4, np.int32)
    seeder = NeighborhoodSeeder(seed_len=6, nb_len=7, step=2, e_nb=1, max_cands=3)
    prev = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        i1 = seeder.build_index(genome)
        c1 = seeder.candidates(i1, make_batch(reads), me)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        i2 = seeder.build_index(genome)
        c2 = seeder.candidates(i2, make_batch(reads), me)
    finally:
        numba.set_num_threads(prev)
    for name in i1.arrays:
        assert np.array_equal(i1.arrays[name], i2.arrays[name]), name
    assert as_tuples(c1) == as_tuples(c2)


@pytest.mark.parametrize("L, W", [(12, 4), (13, 5), (15, 4), (16, 6), (11, 3)])
def test_edits_to_break_is_the_minimum(L, W):
    for step in range(1, 6):
        assert Q.edits_to_break(L, W, step) == brute_edits_to_break(L, W, step), step


def test_lossless_step_keeps_an_exact_pattern():
    """Whatever e substitutions a read gets, a lossless step leaves one pattern untouched."""
    rng = np.random.default_rng(21)
    for L, W, e in ((100, 16, 5), (150, 16, 8), (100, 18, 4), (60, 13, 3), (250, 16, 14)):
        s = Q.lossless_step(L, W, 6, e)
        assert Q.edits_to_break(L, W, s) > e
        assert s == 6 or Q.edits_to_break(L, W, s + 1) <= e
        offs = pattern_offsets(L, W, s)
        for _ in range(300):
            pts = set(rng.choice(L, e, replace=False).tolist())
            assert any(not pts & set(range(o, o + W)) for o in offs)
    assert Q.lossless_step(100, 18, 6, 5) == 1         # impossible: 5 disjoint 18-mers fit in 100 bp
    assert Q.edits_to_break(10, 16, 1) == 0


def test_lossless_candidates_match_specification(genome, genome_index):
    seeder, index = genome_index
    rng = np.random.default_rng(31)
    reads = [mutate(rng, genome.codes[p:p + 80], 4, 1) for p in rng.integers(0, 80_000, 40)]
    me = rng.integers(0, 7, len(reads)).astype(np.int32)
    s = NeighborhoodSeeder(seed_len=7, nb_len=6, step=6, lossless=True, max_cands=50)
    got = s.candidates(index, make_batch(reads), me)
    want = reference_candidates(genome, np.arange(7), 7, 6, reads, me, 6, 0, s.max_occ, 50, 1, lossless=True)
    assert as_tuples(got) == want
    # 13-bp patterns guarantee 5 edits in 78-90 bp, not 6: the run notes the reads beyond that
    assert s.guaranteed_edits(index, 80) == 5 and s.guaranteed_edits(index, 78) == 5
    assert sum(s.beyond_guarantee.values()) == int((me == 6).sum()) > 0
    assert all(e == 6 for _, e in s.beyond_guarantee)
    assert "nb_len" in s.run_notes()[0]


def test_lossless_finds_every_read_within_e(genome, genome_index):
    """Spread substitutions defeat step 6 but not the lossless step."""
    seeder, index = genome_index
    rng = np.random.default_rng(8)
    starts = rng.integers(0, 50_000, 200)
    reads = []
    for p in starts:
        read = genome.codes[p:p + 64].copy()
        for q in (12, 30, 48, 63):                 # hits every 13-mer at 0, 6, ..., 48 and 51
            read[q] = (read[q] + 1) % 4
        reads.append(read)
    me = np.full(len(reads), 4, np.int32)
    plain = NeighborhoodSeeder(seed_len=7, nb_len=6, step=6).candidates(index, make_batch(reads), me)
    full = NeighborhoodSeeder(seed_len=7, nb_len=6, step=6, lossless=True).candidates(index, make_batch(reads), me)

    def found(c):
        ok = (c.strand == 0) & (np.abs(c.pos - starts[c.read]) <= 4)
        return np.unique(c.read[ok]).size

    assert found(full) == len(reads)
    assert found(plain) < len(reads)


def test_tandem_array_reads_get_a_second_candidate():
    """A read inside a microsatellite longer than itself aligns at many shifts: the seeder reports
    two loci, so that selection gives MAPQ 0 instead of calling it unique."""
    rng = np.random.default_rng(2)
    unit = np.array([2, 0, 1, 3, 0, 0], np.uint8)
    seq = np.concatenate([rng.integers(0, 4, 5000), np.tile(unit, 60), rng.integers(0, 4, 5000)]).astype(np.uint8)
    ref = make_reference([seq])
    seeder = NeighborhoodSeeder(seed_len=5, nb_len=6, step=4)
    index = seeder.build_index(ref)
    read = seq[5060:5160].copy()
    # e >= the unit: every shift is merged into one cluster, which also yields its runner-up
    c = seeder.candidates(index, make_batch([read]), np.array([8], np.int32))
    fwd = c.pos[c.strand == 0]
    assert fwd.size == 2 and abs(int(fwd[1] - fwd[0])) > 8
    assert all(5000 - 100 <= p <= 5360 for p in fwd)
    # e below the unit: the shifts are separate clusters already
    c = seeder.candidates(index, make_batch([read]), np.array([3], np.int32))
    assert (c.strand == 0).sum() > 2
    unique_read = seq[1000:1100].copy()
    c = seeder.candidates(index, make_batch([unique_read]), np.array([8], np.int32))
    assert c.pos[c.strand == 0].tolist() == [1000]


def test_reads_of_repeat_arrays_are_placed_from_a_sample():
    """A read made of a repeat array whose patterns all have more than max_occ positions gets
    candidates from sample_occ evenly spaced positions of each (MAPQ capped at 0); with sample_occ=0
    it has none. Reads with candidates of their own are untouched."""
    rng = np.random.default_rng(4)
    unit = np.array([3, 3, 0, 2, 2, 2], np.uint8)                  # TTAGGG
    arrays = [np.tile(unit, 400) for _ in range(4)]
    a = np.concatenate([arrays[0], rng.integers(0, 4, 20_000), arrays[1]]).astype(np.uint8)
    b = np.concatenate([arrays[2], rng.integers(0, 4, 15_000), arrays[3]]).astype(np.uint8)
    ref = make_reference([a, b], ["chrA", "chrB"])
    in_array = [(0, 2400), (22_400, 24_800), (24_800, 27_200), (42_200, 44_600)]
    tel = np.tile(unit, 25)                                       # 150 bp
    unique = a[5000:5150].copy()
    rc_tel = revcomp(np.tile(unit, 20)[3:123])
    max_e = np.array([6, 6, 6], np.int32)
    batch = [tel, unique, rc_tel]
    off = NeighborhoodSeeder(seed_len=7, nb_len=6, max_occ=100, sample_occ=0)
    index = off.build_index(ref)
    c0 = off.candidates(index, make_batch(batch), max_e)
    assert sorted(set(c0.read.tolist())) == [1] and c0.mapq_cap is None
    seeder = NeighborhoodSeeder(seed_len=7, nb_len=6, max_occ=100)
    c = seeder.candidates(index, make_batch(batch), max_e)
    assert sorted(set(c.read.tolist())) == [0, 1, 2]
    assert list(zip(c.strand[c.read == 1].tolist(), c.pos[c.read == 1].tolist())) == \
        list(zip(c0.strand.tolist(), c0.pos.tolist()))
    assert c.mapq_cap.tolist() == [0, 60, 0]
    for r in (0, 2):
        pos = c.pos[c.read == r]
        assert all(any(lo - 150 <= p <= hi for lo, hi in in_array) for p in pos.tolist()), (r, pos.tolist())
        assert len({next(i for i, (lo, hi) in enumerate(in_array) if lo - 150 <= p <= hi) for p in pos.tolist()}) > 1
    assert seeder.stats["sampled"] == 2 and "2 read(s) had only patterns" in seeder.run_notes()[0]
    for lookup in ("bsearch", "list"):                  # every layout samples the same positions
        other = NeighborhoodSeeder(seed_len=7, nb_len=6, max_occ=100, lookup=lookup)
        assert as_tuples(other.candidates(index, make_batch(batch), max_e)) == as_tuples(c)


# ------------------------------------------------------------------------------------ index file

def test_index_round_trip(tmp_path, genome, genome_index):
    seeder, index = genome_index
    path = tmp_path / "g.pymap.idx"
    seeder.save_index(index, path)
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]
    loaded = seeder.load_index(path, genome)
    assert loaded.params == index.params
    for name, arr in index.arrays.items():
        assert np.array_equal(loaded.arrays[name], arr) and loaded.arrays[name].dtype == arr.dtype
        assert is_mapped(loaded.arrays[name]) or arr.nbytes == 0
    rng = np.random.default_rng(1)
    reads = [genome.codes[p:p + 90].copy() for p in rng.integers(0, 50_000, 20)]
    me = np.full(20, 3, np.int32)
    assert as_tuples(seeder.candidates(index, make_batch(reads), me)) == \
        as_tuples(seeder.candidates(loaded, make_batch(reads), me))
    # auto parameters accept the stored ones; an explicit other value is a mismatch
    NeighborhoodSeeder().load_index(path, genome)
    with pytest.raises(IndexMismatch, match="pymap index"):
        NeighborhoodSeeder(seed_len=8).load_index(path, genome)
    with pytest.raises(IndexMismatch, match="pymap index"):
        NeighborhoodSeeder(pattern="#######-#").load_index(path, genome)
    assert seeder.index_path("/x/ref.fa.gz") == "/x/ref.fa.gz.pymap.idx"


def test_generic_container(tmp_path):
    arrays = {"a": np.arange(10, dtype=np.int64), "b": np.zeros((3, 5), np.uint8), "e": np.zeros(0, np.uint32)}
    save_index(tmp_path / "x", {"seeder": "t", "params": {"k": 1}}, arrays)
    raw = (tmp_path / "x").read_bytes()
    assert raw[:8] == b"PYMAPIDX"
    meta, got = load_index(tmp_path / "x", {"seeder": "t", "params": {"k": 1}})
    assert meta["params"] == {"k": 1} and "pymap_version" in meta
    for k in arrays:
        assert np.array_equal(got[k], arrays[k]) and got[k].shape == arrays[k].shape
        assert got[k].ctypes.data % 64 == 0 or got[k].nbytes == 0
    with pytest.raises(IndexMismatch, match="params.k"):
        load_index(tmp_path / "x", {"params": {"k": 2}})


def test_damaged_files(tmp_path, genome, genome_index):
    seeder, index = genome_index
    path = tmp_path / "g.idx"
    seeder.save_index(index, path)
    raw = bytearray(path.read_bytes())

    def write(data, name):
        p = tmp_path / name
        p.write_bytes(bytes(data))
        return p

    with pytest.raises(IndexCorrupt, match="truncated"):
        seeder.load_index(write(raw[:len(raw) - 100], "trunc"), genome)
    with pytest.raises(IndexCorrupt):
        seeder.load_index(write(raw[:30], "trunc2"), genome)
    flipped = bytearray(raw)
    first = read_header(path)[0]["arrays"][0]             # inside the first array
    flipped[first["offset"] + first["nbytes"] // 2] ^= 0xFF
    with pytest.raises(IndexCorrupt, match="checksum"):
        seeder.load_index(write(flipped, "flip"), genome)
    seeder.load_index(write(flipped, "flip"), genome, verify=False)   # sizes only: loads
    hdr = bytearray(raw)
    hdr[80] ^= 0x01                                       # inside the JSON header
    with pytest.raises(IndexCorrupt, match="header"):
        seeder.load_index(write(hdr, "hdr"), genome)
    magic = bytearray(raw)
    magic[:8] = b"NOTANIDX"
    with pytest.raises(IndexCorrupt, match="not a pymap index"):
        seeder.load_index(write(magic, "magic"), genome)
    ver = bytearray(raw)
    ver[8:12] = struct.pack("<I", 99)
    with pytest.raises(IndexMismatch, match="format version"):
        seeder.load_index(write(ver, "ver"), genome)
    other = make_reference([genome.codes[:1000]])
    with pytest.raises(IndexMismatch, match="another reference.*pymap index REF"):
        seeder.load_index(path, other)
    with pytest.raises(IndexMismatch):
        seeder.load_index(tmp_path / "missing.idx", genome)


# ------------------------------------------------------------------------------------ options

@pytest.mark.parametrize("opts, name", [
    ({"seed_len": 0}, "seed_len"), ({"nb_len": 17}, "nb_len"), ({"pattern": "##x#"}, "pattern"),
    ({"pattern": "---"}, "pattern"), ({"step": 0}, "step"), ({"e_nb": -1}, "e_nb"), ({"e_nb": 4}, "e_nb"),
    ({"max_occ": 0}, "max_occ"), ({"max_cands": 0}, "max_cands"), ({"min_hits": 0}, "min_hits"),
    ({"lookup": "hash"}, "lookup"), ({"step": 2.5}, "step"), ({"lossless": "yes"}, "lossless"),
])
def test_options_validated(opts, name):
    with pytest.raises(ValueError, match=name):
        NeighborhoodSeeder(**opts)


def test_defaults_scale_with_genome_size():
    small, ecoli, human = (default_build_params(n) for n in (50_000, 4_600_000, 3_100_000_000))
    assert sum(small) < sum(ecoli) < sum(human)
    assert all(ln <= 16 for _, ln in (small, ecoli, human))


# ------------------------------------------------------------------------------- kernel helpers

@pytest.mark.parametrize("n", [0, 1, 2, 31, 32, 33, 64, 65, 100, 1000, 5000])
def test_sorts_match_numpy(n):
    rng = np.random.default_rng(n)
    for hi in (3, 2 ** 40):                                     # many ties, few ties
        keys = rng.integers(-hi, hi, n + 5).astype(np.int64)
        vals = np.arange(n + 5, dtype=np.int64)
        a = keys.copy()
        sort_int64(a, n)
        assert np.array_equal(a[:n], np.sort(keys[:n])) and np.array_equal(a[n:], keys[n:])
        k, v = keys.copy(), vals.copy()
        sort_pairs(k, v, n)
        order = np.argsort(keys[:n], kind="stable")
        assert np.array_equal(k[:n], keys[:n][order]) and np.array_equal(v[:n], order)
        assert np.array_equal(k[n:], keys[n:]) and np.array_equal(v[n:], vals[n:])


def test_run_ranges_covers_each_index_once():
    prev = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            for n in (0, 1, 63, 64, 1000):
                bounds = range_bounds(n, 16)
                assert bounds[0] == 0 and bounds[-1] == n and all(np.diff(bounds) > 0)
                seen = np.zeros(n, np.int64)

                def mark(a, b, out):
                    out[a:b] += 1

                run_ranges(mark, bounds, seen)
                assert (seen == 1).all()

            def fail(a, b):
                raise RuntimeError("range failed")

            with pytest.raises(RuntimeError, match="range failed"):
                run_ranges(fail, range_bounds(100, 1))
    finally:
        numba.set_num_threads(prev)


def test_ahead_keeps_order_threads_and_errors():
    """ahead: items in order, made on another thread with the caller's Numba thread count; the
    producer's error where its item would be; a consumer that stops early stops the producer, which
    closes the generator (its clean-up runs on the producer's thread before close returns)."""
    import threading
    prev = numba.get_num_threads()
    made, cleaned = [], []

    def items(n, fail_at=None):
        try:
            for i in range(n):
                if i == fail_at:
                    raise ValueError(f"item {i}")
                made.append(i)
                yield i, numba.get_num_threads(), threading.current_thread().name
        finally:
            cleaned.append(threading.current_thread().name)

    try:
        numba.set_num_threads(1)
        got = list(ahead(items(20)))
        assert [g[0] for g in got] == list(range(20))
        assert {g[1] for g in got} == {1} and {g[2] for g in got} == {"pymap-ahead"}
        seen = []
        with pytest.raises(ValueError, match="item 5"):
            for x in ahead(items(9, fail_at=5)):
                seen.append(x[0])
        assert seen == [0, 1, 2, 3, 4]
        made.clear()
        cleaned.clear()
        it = ahead(items(1000), depth=2)
        assert next(it)[0] == 0 and next(it)[0] == 1
        it.close()
        assert len(made) <= 6                            # two consumed, at most depth + 2 more made
        assert cleaned == ["pymap-ahead"]
    finally:
        numba.set_num_threads(prev)


def test_ordered_map_keeps_order_threads_errors_and_pauses():
    """ordered_map: results in the items' order whatever finishes first, at most `workers` in flight,
    on threads with the caller's Numba thread count; fn's error where its result would be; an item
    started after pause() said True starts with none in flight."""
    import threading
    import time
    prev = numba.get_num_threads()
    lock = threading.Lock()
    state = {"active": 0, "most": 0}
    entries = {}

    def fn(i):
        with lock:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
            entries[i] = state["active"]
        time.sleep(0.002 * ((7 * i) % 5))          # later items often finish first
        with lock:
            state["active"] -= 1
        if i == 13:
            raise ValueError("item 13")
        return i, numba.get_num_threads()

    try:
        numba.set_num_threads(1)
        got = list(ordered_map(fn, range(13), 3))
        assert [g[0] for g in got] == list(range(13)) and {g[1] for g in got} == {1}
        assert 2 <= state["most"] <= 3
        seen = []
        with pytest.raises(ValueError, match="item 13"):
            for x in ordered_map(fn, range(20), 3):
                seen.append(x[0])
        assert seen == list(range(13))
        entries.clear()
        asked = []
        pause = lambda: asked.append(1) or len(asked) == 3     # noqa: E731 - True before item 3 starts
        got = list(ordered_map(fn, [0, 1, 2, 3, 4, 5], 3, pause=pause))
        assert [g[0] for g in got] == list(range(6)) and entries[3] == 1
        assert [g[0] for g in ordered_map(fn, range(5), 1)] == list(range(5))
    finally:
        numba.set_num_threads(prev)


def test_batches_side_by_side_only_when_every_stage_allows(sim_data, tmp_path, monkeypatch):
    """--batches maps batches on threads of their own, unless a stage does not declare `concurrent`
    (a third-party stage by default): then one at a time."""
    import threading
    import time

    from pymap import api
    from pymap.filters.gatekeeper import GateKeeperGPUFilter
    from pymap.options import AlignOptions
    from pymap.pipeline import Pipeline
    lock = threading.Lock()
    state = {"active": 0, "most": 0}
    real = Pipeline.map_batch

    def spy(self, batch):
        with lock:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
        time.sleep(0.05)
        try:
            return real(self, batch)
        finally:
            with lock:
                state["active"] -= 1
    monkeypatch.setattr(Pipeline, "map_batch", spy)
    ref, reads = sim_data[0], sim_data[1]

    def most():
        state["most"] = 0
        api.align(str(ref), str(reads), str(tmp_path / "o.sam"),
                  options=AlignOptions(threads=2, batch_size=100, batches=3, progress=False), summary=False)
        return state["most"]
    assert most() >= 2
    monkeypatch.setattr(GateKeeperGPUFilter, "concurrent", False)
    assert most() == 1


def test_mapping_keeps_the_thread_count(sim_data, tmp_path, monkeypatch):
    """The batches are mapped on a background thread, with -t threads, not Numba's default."""
    from pymap import api
    from pymap.options import AlignOptions
    from pymap.pipeline import Pipeline
    counts = []
    real = Pipeline.map_batch

    def spy(self, batch):
        counts.append(numba.get_num_threads())
        return real(self, batch)
    monkeypatch.setattr(Pipeline, "map_batch", spy)
    ref, reads = sim_data[0], sim_data[1]
    api.align(str(ref), str(reads), str(tmp_path / "o.sam"), options=AlignOptions(threads=1, batch_size=100,
                                                                                   progress=False), summary=False)
    assert len(counts) == 6 and set(counts) == {1}
