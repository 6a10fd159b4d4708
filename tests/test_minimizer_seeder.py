"""The minimizer seeder (kernels/minimizer_index.py, mapper/seeders/minimizer.py): index content against a
plain-Python specification, the w + m - 1 guarantee on both strands, sensitivity on simulated reads, thread
independence, masked repeats, the index file, options and the mapper end to end."""
import os
import shutil
import subprocess
import sys

import numba
import numpy as np
import pytest

from pymap import plugins
from pymap.batch import ReadBatch
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.index import load_index, read_header, save_index
from pymap.kernels import minimizer_index as K
from pymap.kernels.minimizers import RULES, canonical_mmers, passes
from pymap.reference import load_reference
from pymap.seeders.minimizer import MinimizerIndex, MinimizerSeeder, default_m

from seeder_helpers import make_batch, make_reference, mutate, revcomp


# ------------------------------------------------------------------------------------ helpers

def as_tuples(c):
    return list(zip(c.read.tolist(), c.strand.tolist(), c.pos.tolist()))


# ------------------------------------------------------------------------------------ the specification

def py_values(codes, m, rule):
    """{position: (signature value, orientation)} of the ACGT m-mers of codes (value 4**m: none passes)."""
    out = {}
    for p in range(len(codes) - m + 1):
        mm = [int(c) for c in codes[p:p + m]]
        if max(mm) > 3:
            continue
        f = 0
        for c in mm:
            f = f * 4 + c
        r = 0
        for c in reversed(mm):
            r = r * 4 + 3 - c
        ok = [x for x in (f, r) if passes(x, m, rule)]
        v = min(ok) if ok else 4 ** m
        out[p] = (v, int(v != f))
    return out


def py_occurrences(ref, m, w, rule, order):
    """[(table key, position << 1 | orientation)] of every tied window minimum, each once, by position."""
    inf = 4 ** m
    occ = set()
    for c in range(len(ref.names)):
        lo, hi = int(ref.offsets[c]), int(ref.offsets[c + 1])
        vals = py_values(ref.codes[lo:hi], m, rule)
        ordv = {p: (v if order == "lex" or v == inf else int(K.mix_value(v, m)))
                for p, (v, _) in vals.items()}
        for s in range(hi - lo - (w + m - 1) + 1):
            if any(s + i not in vals for i in range(w)):
                continue
            best = min(ordv[s + i] for i in range(w))
            if best == inf:
                continue
            for i in range(w):
                if ordv[s + i] == best:
                    v, o = vals[s + i]
                    occ.add((int(K.mix_value(v, m)), ((lo + s + i) << 1) | o))
    return sorted(occ, key=lambda x: x[1])


def py_table(ref, m, w, rule, order, max_occ):
    """({key: occurrences} of kept keys, {key: (count, kept sample)} of masked keys: SAMPLE_KEPT of
    their occurrences, evenly spaced)."""
    table = {}
    for key, v in py_occurrences(ref, m, w, rule, order):
        table.setdefault(key, []).append(v)

    def sample(v):
        k = min(len(v), K.SAMPLE_KEPT)
        return len(v), [v[t * len(v) // k] for t in range(k)]
    return ({k: v for k, v in table.items() if len(v) <= max_occ},
            {k: sample(sorted(v)) for k, v in table.items() if len(v) > max_occ})


def decode_table(a, m, max_occ):
    """The same two dicts from the index arrays (and every key found by the lookup kernel)."""
    low_bits = K.low_bits_of(a, m)
    bucket, keys = a["bucket"].astype(np.int64), a["keys"].astype(np.int64)
    wide = K.wide_values(a)
    val = a["val"].astype(np.int64) | ((a["val_hi"].astype(np.int64) << 32) if wide else 0)
    multi = a["multi"].astype(np.int64) | ((a["multi_hi"].astype(np.int64) << 32) if wide else 0)
    flag = int(K.flag_of(wide))
    top = flag
    kept, over = {}, {}
    nxt = 0
    for t in range(bucket.shape[0] - 1):
        lows = keys[bucket[t]:bucket[t + 1]]
        assert np.all(np.diff(lows) > 0)                      # ascending within the bucket
        for i in range(int(bucket[t]), int(bucket[t + 1])):
            key = (t << low_bits) | int(keys[i])
            if val[i] & top:
                j = int(val[i] & ~top)
                assert j == nxt                                 # records in key order, tiling multi
                c = int(multi[j])
                assert c >= 2
                if c > max_occ:
                    k = min(c, K.SAMPLE_KEPT)
                    over[key] = c, multi[j + 1:j + 1 + k].tolist()
                    nxt = j + 1 + k
                else:
                    kept[key] = multi[j + 1:j + 1 + c].tolist()
                    nxt = j + 1 + c
            else:
                kept[key] = [int(val[i])]
            occ, count = K.lookup(a["bucket"], a["keys"], a["val"], a["val_hi"], a["multi"], a["multi_hi"], key,
                                  low_bits, flag, max_occ)
            assert occ.tolist() == kept.get(key, [])
            assert count == (over[key][0] if key in over else len(kept[key]))
            if key in over:
                occ, _ = K.lookup(a["bucket"], a["keys"], a["val"], a["val_hi"], a["multi"], a["multi_hi"], key,
                                  low_bits, flag, max_occ, True)
                assert occ.tolist() == over[key][1]
    assert nxt == multi.shape[0]
    return kept, over


# ------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def small_ref():
    """Three contigs with N runs, poly-A, a repeat family (6 copies, 2 diverged) and a tandem array."""
    rng = np.random.default_rng(5)
    unit = rng.integers(0, 4, 300).astype(np.uint8)
    tandem = np.tile(rng.integers(0, 4, 37).astype(np.uint8), 8)
    parts = []
    for i in range(3):
        seq = [rng.integers(0, 4, 700).astype(np.uint8)]
        for j in range(2):
            seq.append(unit if (i + j) % 3 else mutate(rng, unit, 6, 1))
            seq.append(rng.integers(0, 4, 400).astype(np.uint8))
        parts.append(np.concatenate(seq))
    parts[0][100:130] = 4
    parts[0][300:340] = 0                                          # poly-A
    parts[1] = np.concatenate([parts[1][:500], tandem, parts[1][500:]])
    parts.append(rng.integers(0, 4, 10).astype(np.uint8))        # shorter than a window
    return make_reference(parts)


# ------------------------------------------------------------------------------------ kernels

@pytest.mark.parametrize("m,w,rule,order,max_occ", [
    (5, 4, "rapidgkc", "lex", 1000), (7, 6, "kmc2", "hash", 3), (9, 3, "none", "lex", 2),
    (11, 8, "rapidgkc", "hash", 4), (3, 1, "none", "hash", 1000)])
def test_index_content_matches_python(small_ref, m, w, rule, order, max_occ):
    a = K.build(small_ref.codes, small_ref.offsets, m, w, RULES[rule], K.ORDERS[order], max_occ)
    want_kept, want_over = py_table(small_ref, m, w, rule, order, max_occ)
    got_kept, got_over = decode_table(a, m, max_occ)
    assert got_kept == want_kept
    assert got_over == want_over
    if max_occ <= 4:
        assert got_over                                     # the repeat family overfills keys
    # pieces (the threads' unit of work) overlap; the table does not depend on where they are cut
    b = K.build(small_ref.codes, small_ref.offsets, m, w, RULES[rule], K.ORDERS[order], max_occ, piece=37)
    for name in a:
        assert np.array_equal(a[name], b[name]) and a[name].dtype == b[name].dtype
    # occurrences collected packed (key bits and occurrence in one int64) or as two arrays: one table
    for piece in (37, K.PIECE):
        two = K.build(small_ref.codes, small_ref.offsets, m, w, RULES[rule], K.ORDERS[order], max_occ,
                      piece=piece, packed=False)
        one = K.build(small_ref.codes, small_ref.offsets, m, w, RULES[rule], K.ORDERS[order], max_occ,
                      piece=piece, packed=True)
        for name in a:
            assert np.array_equal(a[name], one[name]) and np.array_equal(a[name], two[name])
    # 40-bit values (genomes over 1 Gbp): the same content
    wide = K.build(small_ref.codes, small_ref.offsets, m, w, RULES[rule], K.ORDERS[order], max_occ, wide=True)
    assert K.wide_values(wide) and wide["val_hi"].shape == wide["val"].shape
    assert decode_table(wide, m, max_occ) == (want_kept, want_over)


def test_random_sequences_match_python():
    rng = np.random.default_rng(9)
    for trial in range(25):
        seqs = []
        for _ in range(int(rng.integers(1, 4))):
            s = rng.integers(0, 4, int(rng.integers(0, 250))).astype(np.uint8)
            if s.size > 60 and trial % 3 == 0:
                s[rng.integers(0, s.size, 3)] = 4
            if s.size > 100 and trial % 4 == 0:
                s[60:96] = np.tile(s[60:64], 9)                  # a short tandem repeat: tied minima
            seqs.append(s)
        ref = make_reference(seqs)
        m = int(rng.choice([3, 5, 7, 9]))
        w = int(rng.integers(1, 12))
        rule = ["none", "kmc2", "rapidgkc"][trial % 3]
        order = ["lex", "hash"][trial % 2]
        keys, occ = K.minimizer_occurrences(ref.codes, ref.offsets, m, w, RULES[rule], K.ORDERS[order],
                                            piece=23)
        assert list(zip(keys.tolist(), occ.tolist())) == py_occurrences(ref, m, w, rule, order)


def test_mix_is_a_bijection():
    for m in (3, 5):
        vals = [int(K.mix_value(x, m)) for x in range(4 ** m)]
        assert sorted(vals) == list(range(4 ** m))


def test_low_complexity_is_never_chosen():
    """With the signature rule, poly-A (whose canonical value becomes poly-T, the largest m-mer) is never
    a window's minimizer next to other m-mers; without the rule it is the smallest and always chosen."""
    rng = np.random.default_rng(3)
    parts = []
    for _ in range(20):
        flank = rng.integers(0, 4, 60).astype(np.uint8)
        flank[[0, -1]] = 1                                    # runs of exactly 14 A
        parts += [flank, np.zeros(14, np.uint8)]
    ref = make_reference([np.concatenate(parts)])
    m, w = 11, 5                                              # windows of 15 bases: none is all A
    poly = {"rapidgkc": int(K.mix_value(4 ** m - 1, m)), "none": int(K.mix_value(0, m))}
    for rule in ("rapidgkc", "none"):
        kept, _ = decode_table(K.build(ref.codes, ref.offsets, m, w, RULES[rule], K.ORDER_LEX, 1000), m, 1000)
        assert (poly[rule] in kept) == (rule == "none")
        if rule == "none":
            assert len(kept[poly[rule]]) >= 20


# ------------------------------------------------------------------------------------ the guarantee

@pytest.mark.parametrize("opts", [{"m": 15, "w": 8}, {"m": 11, "w": 5, "order": "hash"},
                                  {"m": 13, "w": 12, "rule": "kmc2"}])
def test_shared_window_gives_the_true_diagonal(opts):
    """A read sharing w + m - 1 exact bases with the reference (either strand, anywhere in the read,
    the rest random) gets a candidate on the exact diagonal."""
    rng = np.random.default_rng(opts["m"] * 100 + opts["w"])
    ref = make_reference([rng.integers(0, 4, 20000).astype(np.uint8),
                          rng.integers(0, 4, 7000).astype(np.uint8)])
    seeder = MinimizerSeeder(**opts)
    index = seeder.build_index(ref)
    m, w = index.params["m"], index.params["w"]
    span = w + m - 1
    vals = canonical_mmers(ref.codes, ref.offsets, m, RULES[index.params["rule"]])
    reads, want = [], []
    for i in range(300):
        x = int(rng.integers(0, ref.codes.shape[0] - span))
        if np.any(vals[x:x + w] < 0) or np.all(vals[x:x + w] == 4 ** m):
            continue                         # crosses a contig end, or every m-mer fails the rule
        left = int(rng.integers(0, 60))
        read = np.concatenate([rng.integers(0, 4, left), ref.codes[x:x + span],
                               rng.integers(0, 4, int(rng.integers(0, 60)))]).astype(np.uint8)
        # strand 1: the read given is the reverse complement; `read` aligns forward, first base at x - left
        reads.append(revcomp(read) if i % 2 else read)
        want.append((i % 2, x - left))
    c = MinimizerSeeder(**opts, max_cands=1000).candidates(index, make_batch(reads),
                                                           np.zeros(len(reads), np.int32))
    got = set(as_tuples(c))
    missing = [(r, s, p) for r, (s, p) in enumerate(want) if (r, s, p) not in got]
    assert len(reads) > 250 and not missing


def test_tandem_array_yields_several_shifts():
    rng = np.random.default_rng(8)
    unit = rng.integers(0, 4, 110).astype(np.uint8)
    ref = make_reference([np.concatenate([rng.integers(0, 4, 3000).astype(np.uint8), np.tile(unit, 6),
                                          rng.integers(0, 4, 3000).astype(np.uint8)])])
    seeder = MinimizerSeeder()
    index = seeder.build_index(ref)
    p = 3000 + 2 * 110 + 5
    c = seeder.candidates(index, make_batch([ref.codes[p:p + 100]]), np.array([5], np.int32))
    assert p in c.pos.tolist() and len(c) >= 2


# ------------------------------------------------------------------------------------ the seeder

def test_finds_true_locus_of_simulated_reads(sim_data):
    ref_path, reads_path, truth, _ = sim_data
    ref = load_reference(str(ref_path))
    lines = reads_path.read_text().split("\n")
    names = [lines[i][1:] for i in range(0, len(lines) - 1, 4)]
    seqs = [np.frombuffer(lines[i].encode(), np.uint8) for i in range(1, len(lines) - 1, 4)]
    from pymap.kernels.encoding import ASCII_TO_CODE
    batch = make_batch([ASCII_TO_CODE[s] for s in seqs])
    seeder = MinimizerSeeder()
    index = seeder.build_index(ref)
    c = seeder.candidates(index, batch, np.full(len(names), 5, np.int32))
    start = dict(zip(ref.names, ref.offsets[:-1].tolist()))
    found = 0
    for i, name in enumerate(names):
        ctg, pos, strand, _ = truth[name]
        g = start[ctg] + pos
        m = (c.read == i) & (c.strand == (strand == "-")) & (np.abs(c.pos - g) <= 5)
        found += bool(m.any())
    assert found / len(names) >= 0.995, found
    assert len(c) / len(names) < 2
    key = c.read.astype(np.int64) * 4 * 10**9 + c.strand.astype(np.int64) * 2 * 10**9 + c.pos
    assert np.all(np.diff(key) > 0)                            # sorted, unique
    assert c.read.dtype == np.int32 and c.strand.dtype == np.int8 and c.pos.dtype == np.int64
    # an index with 40-bit values (genomes over 1 Gbp) gives the same candidates
    p = index.params
    arrays = K.build(ref.codes, ref.offsets, p["m"], p["w"], RULES[p["rule"]], K.ORDERS[p["order"]],
                     p["rescue_occ"], wide=True)
    wide = MinimizerIndex(p, index.reference, arrays)
    assert K.wide_values(wide.arrays)
    assert as_tuples(seeder.candidates(wide, batch, np.full(len(names), 5, np.int32))) == as_tuples(c)


def test_thread_count_does_not_change_candidates(sim_data):
    ref = load_reference(str(sim_data[0]))
    rng = np.random.default_rng(4)
    reads = []
    for _ in range(3000):
        p = int(rng.integers(0, ref.codes.shape[0] - 120))
        r = mutate(rng, ref.codes[p:p + 100] % 4, 3, 1)
        reads.append(revcomp(r) if rng.random() < 0.5 else r)
    seeder = MinimizerSeeder(max_cands=3, m=7, w=5, min_frac=0)   # small m: random hits, the cap applies
    me = np.full(len(reads), 4, np.int32)
    prev = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        index1 = seeder.build_index(ref)
        one = seeder.candidates(index1, make_batch(reads), me)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        index2 = seeder.build_index(ref)
        two = seeder.candidates(index2, make_batch(reads), me)
    finally:
        numba.set_num_threads(prev)
    for name in index1.arrays:
        assert np.array_equal(index1.arrays[name], index2.arrays[name])
    assert as_tuples(one) == as_tuples(two)
    assert np.bincount(one.read).max() == 3
    import pymap.index as M
    old = M.OUTPUT_SLOTS
    try:
        M.OUTPUT_SLOTS = 3 * 1000                          # sub-batches of 1000 reads
        three = seeder.candidates(index1, make_batch(reads), me)
    finally:
        M.OUTPUT_SLOTS = old
    assert as_tuples(three) == as_tuples(one)


def copies_genome(seed, unit_len, lead, copies, spacer):
    """One contig: `lead` random bases, then `copies` times a random unit followed by its own random
    spacer. Returns (reference, unit)."""
    rng = np.random.default_rng(seed)
    unit = rng.integers(0, 4, unit_len).astype(np.uint8)
    parts = [rng.integers(0, 4, lead).astype(np.uint8)]
    for _ in range(copies):
        parts += [unit, rng.integers(0, 4, spacer).astype(np.uint8)]
    return make_reference([np.concatenate(parts)]), unit


def test_masked_repeats_are_counted_noted_and_rescued():
    """A unit copied more than max_occ times is masked: a read from it gets no candidates from it, and
    the seeder reports its masked seeds (repeats=True) and a run note; with its occurrences kept
    (rescue_occ) the read is seeded again from them, at MAPQ 0; without them, from the sample of
    occurrences the index keeps, at MAPQ 0."""
    ref, unit = copies_genome(6, unit_len=150, lead=500, copies=12, spacer=200)
    seeder = MinimizerSeeder(max_occ=10, rescue_occ=10, sample=False)
    index = seeder.build_index(ref)
    assert index.n_masked > 0 and int(index.masked_counts.min()) >= 12
    unique = ref.codes[:100]
    inside = unit[20:120]
    c, rep = seeder.candidates(index, make_batch([unique, inside]), np.array([3, 3], np.int32), repeats=True)
    assert set(c.read.tolist()) == {0}
    assert rep["seeds"][1] > 0 and rep["masked"][1] == rep["seeds"][1] and rep["masked_max"][1] >= 12
    assert rep["masked"][0] == 0 and rep["masked_max"][0] == 0
    notes = seeder.run_notes()
    assert len(notes) == 1 and "1 read(s) had only over-represented minimizers" in notes[0]
    sampling = MinimizerSeeder(max_occ=10, rescue_occ=10)
    c = sampling.candidates(index, make_batch([unique, inside]), np.array([3, 3], np.int32))
    assert (c.read == 1).sum() == 12 and c.mapq_cap.tolist() == [60, 0]      # 12 copies: all kept
    assert "1 read(s) had only minimizers with more than rescue_occ" in sampling.run_notes()[1]
    rescuing = MinimizerSeeder(max_occ=10)
    c, rep = rescuing.candidates(rescuing.build_index(ref), make_batch([unique, inside]), np.array([3, 3], np.int32),
                                 repeats=True)
    assert (c.read == 1).sum() == 12 and c.mapq_cap.tolist() == [60, 0]
    assert rep["masked"][1] == rep["seeds"][1]
    assert "1 read(s) without candidates" in rescuing.run_notes()[1]
    # with a larger cap every copy is a candidate
    roomy = MinimizerSeeder(max_occ=100)
    c = roomy.candidates(roomy.build_index(ref), make_batch([inside]), np.array([3], np.int32))
    assert len(c) == 12 and roomy.run_notes() == []


def test_reads_of_high_copy_arrays_are_placed_from_the_kept_sample():
    """A unit copied 150 times, over rescue_occ: the index keeps SAMPLE_KEPT of each masked key's
    occurrences, evenly spaced; a read of the unit is placed on copies spread over the whole array."""
    ref, unit = copies_genome(9, unit_len=120, lead=300, copies=150, spacer=80)
    seeder = MinimizerSeeder(max_occ=10, rescue_occ=20, max_cands=64)
    index = seeder.build_index(ref)
    c = seeder.candidates(index, make_batch([unit[10:110]]), np.array([3], np.int32))
    starts = 300 + 200 * np.arange(150) + 10
    assert np.isin(c.pos, starts).all() and c.mapq_cap.tolist() == [0]
    assert 30 <= len(c) <= 64 and c.pos.min() < starts[20] and c.pos.max() > starts[130]
    assert seeder.stats["sampled"] == 1


def test_empty_batch_short_reads_and_bad_max_edits(small_ref):
    seeder = MinimizerSeeder()
    index = seeder.build_index(small_ref)
    assert len(seeder.candidates(index, make_batch([]), np.zeros(0, np.int32))) == 0
    c = seeder.candidates(index, make_batch([small_ref.codes[800:810], np.full(50, 4, np.uint8)]),
                          np.zeros(2, np.int32))
    assert len(c) == 0
    with pytest.raises(ValueError, match="max_edits"):
        seeder.candidates(index, make_batch([small_ref.codes[:50]]), np.zeros(3, np.int32))


# ------------------------------------------------------------------------------------ index file

def test_index_round_trip_and_refusals(tmp_path, small_ref):
    seeder = MinimizerSeeder(m=13, w=6)
    index = seeder.build_index(small_ref)
    path = tmp_path / "ref.fa.pymap.minimizer.idx"
    seeder.save_index(index, path)
    assert not [p for p in os.listdir(tmp_path) if "tmp" in p]
    loaded = seeder.load_index(path, small_ref)
    assert loaded.params == index.params
    for name, arr in index.arrays.items():
        assert np.array_equal(loaded.arrays[name], arr) and loaded.arrays[name].dtype == arr.dtype
    rng = np.random.default_rng(2)
    reads = [small_ref.codes[p:p + 90] % 4 for p in rng.integers(0, 2000, 20)]
    me = np.full(20, 3, np.int32)
    assert as_tuples(seeder.candidates(index, make_batch(reads), me)) == \
        as_tuples(seeder.candidates(loaded, make_batch(reads), me))
    # auto parameters take what the index holds; explicit other ones are a mismatch
    auto = MinimizerSeeder().load_index(path, small_ref)
    assert auto.params["m"] == 13 and auto.params["w"] == 6
    for opts in ({"m": 15}, {"w": 8}, {"rule": "kmc2"}, {"order": "hash"}, {"rescue_occ": 9}):
        with pytest.raises(IndexMismatch, match="pymap index"):
            MinimizerSeeder(**{"m": 13, "w": 6, **opts}).load_index(path, small_ref)
    with pytest.raises(IndexMismatch, match="max_occ=5000"):                # more than the index keeps
        MinimizerSeeder(max_occ=5000).load_index(path, small_ref)
    other = make_reference([small_ref.codes[:1000]])
    with pytest.raises(IndexMismatch, match="another reference"):
        seeder.load_index(path, other)
    with pytest.raises(IndexMismatch):
        seeder.load_index(tmp_path / "missing.idx", small_ref)
    from pymap.seeders.minhash import MinhashSeeder
    mh = MinhashSeeder()
    mh_path = tmp_path / "mh.idx"
    mh.save_index(mh.build_index(small_ref), mh_path)
    with pytest.raises(IndexMismatch, match="seeder"):
        seeder.load_index(mh_path, small_ref)
    with pytest.raises(IndexMismatch, match="seeder"):
        mh.load_index(path, small_ref)
    assert seeder.index_path("/x/ref.fa.gz") == "/x/ref.fa.gz.pymap.minimizer.idx"


def test_damaged_index_is_refused(tmp_path, small_ref):
    seeder = MinimizerSeeder(m=9, max_occ=3, rescue_occ=3)
    path = tmp_path / "g.idx"
    seeder.save_index(seeder.build_index(small_ref), path)
    raw = bytearray(path.read_bytes())

    def write(data, name):
        p = tmp_path / name
        p.write_bytes(bytes(data))
        return p

    with pytest.raises(IndexCorrupt, match="truncated"):
        seeder.load_index(write(raw[:len(raw) - 100], "trunc"), small_ref)
    flipped = bytearray(raw)
    multi = next(r for r in read_header(path)[0]["arrays"] if r["name"] == "multi")
    flipped[multi["offset"] + multi["nbytes"] // 2] ^= 0xFF
    with pytest.raises(IndexCorrupt, match="checksum"):
        seeder.load_index(write(flipped, "flip"), small_ref)
    hdr = bytearray(raw)
    hdr[80] ^= 0x01
    with pytest.raises(IndexCorrupt, match="header"):
        seeder.load_index(write(hdr, "hdr"), small_ref)
    # a header that passes its checksum but holds nonsense, or arrays that do not fit together
    meta, arrays = load_index(path)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    assert MinimizerSeeder(m=9, max_occ=3).load_index(path, small_ref).n_masked > 0
    for bad_params in ({"m": 8}, {"m": None}, {"w": 0}, {"rule": "x"}, {"order": 3}, {"rescue_occ": 0},
                       {"hash": "other"}):
        save_index(tmp_path / "p.idx", {**meta, "params": {**meta["params"], **bad_params}}, arrays)
        with pytest.raises(IndexCorrupt, match="header"):
            MinimizerSeeder().load_index(tmp_path / "p.idx", small_ref)
    save_index(tmp_path / "c.idx", {**meta, "contigs": 5}, arrays)
    with pytest.raises(IndexCorrupt, match="header"):
        MinimizerSeeder().load_index(tmp_path / "c.idx", small_ref)

    def bump(a, i, by):
        a = a.copy()
        a[i] += by
        return a

    rec = np.flatnonzero(arrays["val"] >> np.uint32(31)) if arrays["val"].dtype == np.uint32 else None
    assert rec is not None and rec.size

    def set_rec(a, j, value):
        a = a.copy()
        a[rec[j]] = np.uint32(1 << 31) | np.uint32(value)
        return a

    changes = [("bucket", lambda a: a[:-1]), ("bucket", lambda a: bump(a, 3, 10 ** 6)),
               ("keys", lambda a: a[:-1]), ("keys", lambda a: a.astype(np.int64)),
               ("keys", lambda a: bump(a, 0, 1 << 15)), ("val", lambda a: a.astype(np.int64)),
               ("val", lambda a: set_rec(a, 0, 10 ** 6)), ("val", lambda a: set_rec(a, -1, 0)),
               ("multi", lambda a: a[:-1]), ("multi", lambda a: np.ones_like(a)),
               ("multi", lambda a: np.full_like(a, 1 << 30)), ("keys", lambda a: a[::-1].copy()),
               ("val_hi", lambda a: np.zeros(3, np.uint8)), ("multi_hi", lambda a: np.zeros(2, np.int64))]
    single = int(np.flatnonzero((arrays["val"] >> np.uint32(31)) == 0)[0])
    changes.append(("val", lambda a: bump(a, single, 1 << 28)))           # a position beyond the genome
    for name, change in changes:
        bad = dict(arrays)
        bad[name] = np.ascontiguousarray(change(arrays[name]))
        save_index(tmp_path / "a.idx", meta, bad)
        with pytest.raises(IndexCorrupt, match="inconsistent"):
            MinimizerSeeder().load_index(tmp_path / "a.idx", small_ref)


# ------------------------------------------------------------------------------------ options

@pytest.mark.parametrize("opts,words", [
    ({"m": 2}, ["m", "3..27"]), ({"m": 29}, ["m"]), ({"m": 14}, ["m", "odd"]),
    ({"m": "15"}, ["m", "integer"]), ({"m": True}, ["m"]), ({"w": 0}, ["w", "1..255"]), ({"w": 300}, ["w"]),
    ({"rule": "abc"}, ["rule", "rapidgkc"]),
    ({"order": "random"}, ["order", "lex", "hash"]), ({"max_occ": 0}, ["max_occ"]),
    ({"max_cands": 0}, ["max_cands"]), ({"max_cands": 2.5}, ["max_cands", "integer"]),
    ({"min_hits": 0}, ["min_hits"]), ({"min_frac": 1.5}, ["min_frac", "0..1"]),
    ({"min_frac": "x"}, ["min_frac"]),
])
def test_bad_options(opts, words):
    with pytest.raises(ValueError) as exc:
        MinimizerSeeder(**opts)
    for w in words:
        assert w in str(exc.value)
    with pytest.raises(plugins.PluginError):
        plugins.create("seeder", "minimizer", **opts)


def test_registered_and_defaults():
    assert plugins.load_class("seeder", "minimizer") is MinimizerSeeder
    p = MinimizerSeeder().build_params(4_641_652)
    assert (p["m"], p["w"], p["rule"], p["order"], p["rescue_occ"]) == (13, 8, "rapidgkc", "lex", 4096)
    assert MinimizerSeeder(max_occ=5000).build_params(10 ** 6)["rescue_occ"] == 5000
    sizes = (48_502, 4_641_652, 30_000_000, 10 ** 9, 3_100_000_000)
    assert [default_m(n) for n in sizes] == [11, 13, 15, 17, 17]
    s = MinimizerSeeder()
    assert (s.max_cands, s.min_hits, s.min_frac) == (64, 1, 0.2)
    with pytest.raises(plugins.PluginError, match="no option"):
        plugins.create("seeder", "minimizer", step=3)


@pytest.mark.skipif(shutil.which("samtools") is None, reason="samtools not installed")
def test_align_end_to_end(tmp_path, sim_data):
    ref_path, reads_path, truth, _ = sim_data
    ref = tmp_path / "ref.fa"
    shutil.copy(ref_path, ref)
    out = tmp_path / "out.sam"
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", "--seeder", "minimizer", str(ref),
                          str(reads_path), "-o", str(out)], capture_output=True, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    assert (tmp_path / "ref.fa.pymap.minimizer.idx").exists()
    assert subprocess.run(["samtools", "quickcheck", str(out)]).returncode == 0
    view = subprocess.run(["samtools", "view", str(out)], capture_output=True, text=True, check=True).stdout
    recs = [line.split("\t") for line in view.splitlines()]
    prim = [f for f in recs if not int(f[1]) & 0x900]
    assert len(prim) == len(truth)
    right = 0
    for f in prim:
        ctg, pos, strand, _ = truth[f[0]]
        right += f[2] == ctg and abs(int(f[3]) - 1 - pos) <= 10 and bool(int(f[1]) & 16) == (strand == "-")
    assert right / len(prim) >= 0.98


def test_default_seeder_follows_genome_size(sim_data, tmp_path, monkeypatch):
    """No --seeder: the neighborhood index up to LARGE_GENOME bases, the minimizer index above."""
    from pymap import api
    from pymap.options import AlignOptions
    ref, reads, truth, _ = sim_data
    assert api.default_seeder(api.LARGE_GENOME) == "neighborhood"
    assert api.default_seeder(api.LARGE_GENOME + 1) == "minimizer"
    opt = AlignOptions(progress=False)
    assert api.make_pipeline(str(ref), opt).seeder.name == "neighborhood" and opt.seeder is None   # caller's kept
    monkeypatch.setattr(api, "LARGE_GENOME", 1000)
    opt = AlignOptions(progress=False)
    assert api.make_pipeline(str(ref), opt).seeder.name == "minimizer"
    st = api.align(str(ref), str(reads), out=str(tmp_path / "o.sam"), options=AlignOptions(progress=False),
                   summary=False)
    assert st.reads == len(truth) and st.mapped >= 0.95 * len(truth)


# ------------------------------------------------------------------------------------ MAPQ and repeats

def test_repeat_mapq_cap_values():
    from pymap.seeders.minimizer import repeat_mapq_cap
    seeds = np.array([0, 10, 10, 10, 10, 10, 40])
    masked = np.array([0, 0, 5, 6, 9, 10, 30])
    assert repeat_mapq_cap(seeds, masked).tolist() == [60, 60, 60, 48, 12, 0, 30]


def test_reads_seeded_mostly_by_masked_repeats_get_capped_mapq(tmp_path):
    """A read whose minimizers are mostly masked repeats (keys over max_occ) is seeded by its few
    unique ones: it may have copies elsewhere that no candidate reached, so its MAPQ is capped."""
    from pymap import api
    from pymap.options import AlignOptions
    from pymap.seeders.minimizer import repeat_mapq_cap
    rng = np.random.default_rng(21)
    acgt = np.array(list("ACGT"))
    unit = "".join(acgt[rng.integers(0, 4, 400)])
    parts, starts = [], []
    for _ in range(30):                      # 30 copies of a 400 bp unit between unique stretches
        parts.append("".join(acgt[rng.integers(0, 4, 600)]))
        starts.append(sum(map(len, parts)))
        parts.append(unit)
    genome = "".join(parts) + "".join(acgt[rng.integers(0, 4, 600)])
    (tmp_path / "g.fa").write_text(">g\n" + genome + "\n")
    recs = []
    for i, s in enumerate(starts):           # 120 bases of a copy, then 30 unique bases after it
        seq = genome[s + 280:s + 430]
        recs.append(f"@r{i}\n{seq}\n+\n{'I' * len(seq)}\n")
    (tmp_path / "r.fq").write_text("".join(recs))
    opts = AlignOptions(seeder="minimizer", seeder_opts={"max_occ": 5, "m": 11}, threads=1, progress=False)
    api.align(str(tmp_path / "g.fa"), str(tmp_path / "r.fq"), str(tmp_path / "o.sam"), options=opts, summary=False)
    sd = MinimizerSeeder(max_occ=5, m=11)
    ref = load_reference(str(tmp_path / "g.fa"))
    index = sd.build_index(ref)
    codes = np.concatenate([ref.codes[s + 280:s + 430] for s in starts])
    batch = ReadBatch(codes, np.arange(len(starts) + 1, dtype=np.int64) * 150, np.zeros(0, np.uint8),
                      np.zeros(len(starts) + 1, np.int64), np.zeros(0, np.uint8))
    c, rep = sd.candidates(index, batch.with_rc(), np.full(len(starts), 15, np.int32), repeats=True)
    cap = repeat_mapq_cap(rep["seeds"], rep["masked"])
    assert (cap < 60).all()                 # most of each read's minimizers are in the repeat
    # such reads are seeded with every minimizer the index keeps (up to rescue_occ), masked ones included
    full = MinimizerSeeder(m=11, max_occ=index.params["rescue_occ"]).candidates(
        index, batch, np.full(len(starts), 15, np.int32))
    assert (2 * rep["masked"] > rep["seeds"]).all()
    assert sorted(zip(c.read.tolist(), c.strand.tolist(), c.pos.tolist())) == \
        sorted(zip(full.read.tolist(), full.strand.tolist(), full.pos.tolist()))
    assert np.bincount(c.read).min() > 1 and sd.stats["rescued"] == 0
    mapq = [int(line.split("\t")[4]) for line in (tmp_path / "o.sam").read_text().splitlines()
            if not line.startswith("@")]
    assert len(mapq) == len(starts) and all(q <= k for q, k in zip(mapq, cap.tolist()))
