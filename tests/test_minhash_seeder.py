"""The minhash seeder (kernels/minhash.py, mapper/seeders/minhash.py): kernels against a plain-Python
specification (hashes, sketches, table content, top candidates), sensitivity on simulated reads, thread
independence, the index file, options."""
import os
import shutil
import subprocess
import sys

import numba
import numpy as np
import pytest

from pymap import plugins
from pymap.errors import IndexCorrupt, IndexMismatch
from pymap.index import load_index, read_header, save_index
from pymap.kernels import minhash as K
from pymap.reference import load_reference
from pymap.seeders.minhash import MinhashSeeder

from seeder_helpers import make_batch, make_reference, mutate, revcomp

MASK64 = (1 << 64) - 1


# ------------------------------------------------------------------------------------ helpers

def as_tuples(c, score=None):
    t = list(zip(c.read.tolist(), c.strand.tolist(), c.pos.tolist()))
    return t if score is None else [x + (s,) for x, s in zip(t, score.tolist())]


# ------------------------------------------------------------------------------------ the specification

def py_fmix(x):
    x &= MASK64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK64
    x ^= x >> 33
    return x


def py_hash(canon):
    h = py_fmix(canon + 0x9E3779B97F4A7C15)
    return h - 1 if h == MASK64 else h


def py_kmers(codes, k):
    """[(start, hash, orientation)] of the canonical ACGT k-mers of codes (palindromes left out)."""
    out = []
    for i in range(len(codes) - k + 1):
        w = [int(c) for c in codes[i:i + k]]
        if max(w) > 3:
            continue
        fwd = 0
        for c in w:
            fwd = fwd * 4 + c
        rc = 0
        for c in reversed(w):
            rc = rc * 4 + (3 - c)
        if fwd == rc:
            continue
        out.append((i, py_hash(min(fwd, rc)), 0 if fwd < rc else 1))
    return out


def py_sketch(codes, k, s):
    """The s smallest distinct hashes, ascending, each with its first k-mer's (offset << 1 | orientation)."""
    first = {}
    for i, h, o in py_kmers(codes, k):
        first.setdefault(h, (i << 1) | o)
    return [(h, first[h]) for h in sorted(first)[:s]]


def py_windows(ref, k, w, stride):
    out = []
    for c in range(len(ref.names)):
        lo, hi = int(ref.offsets[c]), int(ref.offsets[c + 1])
        q = 0
        while lo + q + k <= hi:
            out.append((lo + q, min(lo + q + w, hi), c))
            q += stride
    return out


def py_table(ref, k, w, stride, s, cap):
    """{value: (locations [(window, pos << 1 | orientation)] in window order, capped; true count)}."""
    table = {}
    for win, (a, b, _) in enumerate(py_windows(ref, k, w, stride)):
        for h, v in py_sketch(ref.codes[a:b], k, s):
            table.setdefault(h, []).append((win, ((a + (v >> 1)) << 1) | (v & 1)))
    return {h: (locs[:cap], len(locs)) for h, locs in table.items()}


def py_top_ranges(keys, counts, wctg, nwin, sws, min_hits):
    """Range of each hit window (same strand and contig, window id < first + sws), score, greedy choice."""
    nd = len(keys)
    rend, score = [], []
    for a in range(nd):
        b = a
        while (b + 1 < nd and keys[b + 1] // nwin == keys[a] // nwin and keys[b + 1] - keys[a] < sws
               and wctg[keys[b + 1] % nwin] == wctg[keys[a] % nwin]):
            b += 1
        rend.append(b)
        score.append(sum(counts[a:b + 1]))
    used = set()
    chosen = []
    for a in sorted(range(nd), key=lambda a: (-score[a], a)):
        if score[a] < min_hits:
            break
        if used & set(range(a, rend[a] + 1)):
            continue
        used |= set(range(a, rend[a] + 1))
        chosen.append(a)
    return rend, score, chosen


def py_clusters(diags, max_e):
    d = sorted(diags)
    out = []
    i = 0
    while i < len(d):
        j = i + 1
        while j < len(d) and d[j] - d[j - 1] <= max_e:
            j += 1
        vals = d[i:j]
        mode = min(set(vals), key=lambda x: (-vals.count(x), x))
        out.append((mode, j - i))
        i = j
    return out


def py_candidates(ref, params, reads, max_edits, min_hits, max_cands):
    """The seeding specification in plain Python (slow; small inputs): [(read, strand, pos, score)]."""
    k, w, stride, s = params["k"], params["window"], params["stride"], params["sketch"]
    table = py_table(ref, k, w, stride, s, params["bucket_cap"])
    wins = py_windows(ref, k, w, stride)
    nwin = len(wins)
    wctg = [c for _, _, c in wins]
    out = []
    for r, read in enumerate(reads):
        L = len(read)
        sketch = []
        seen = set()
        t = 0
        while t + k <= L:
            e = min(t + w, L)
            for h, v in py_sketch(read[t:e], k, s):
                if h not in seen:
                    seen.add(h)
                    sketch.append((h, v + (t << 1)))
            if e == L:
                break
            t += stride
        hits = []
        for h, v in sketch:
            i, o = v >> 1, v & 1
            for win, pv in table.get(h, ([], 0))[0]:
                st = o ^ (pv & 1)
                p = pv >> 1
                hits.append((st * nwin + win, p - i if st == 0 else p - (L - k - i)))
        hits.sort(key=lambda x: x[0])
        keys = sorted({h[0] for h in hits})
        counts = [sum(1 for h in hits if h[0] == key) for key in keys]
        sws = (L - k + int(max_edits[r]) + w - k) // stride + 1
        rend, score, chosen = py_top_ranges(keys, counts, wctg, nwin, sws, min_hits)
        cands = []
        for a in chosen:
            span = set(keys[a:rend[a] + 1])
            cl = py_clusters([d for key, d in hits if key in span], int(max_edits[r]))
            best = max(range(len(cl)), key=lambda x: (cl[x][1], -x))
            order = [best] + [x for x in range(len(cl)) if x != best and 2 * cl[x][1] >= cl[best][1]]
            for x in order:
                if len(cands) < max_cands:
                    cands.append((keys[a] // nwin, cl[x][0], score[a]))
        best_score = {}
        for st, pos, sc in cands:
            best_score[(st, pos)] = max(best_score.get((st, pos), 0), sc)
        out += [(r, st, pos, sc) for (st, pos), sc in sorted(best_score.items())]
    return out


# ------------------------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def small_ref():
    """Three contigs with N runs, a repeat family (6 copies, 2 of them diverged) and a tandem array."""
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
    parts[1] = np.concatenate([parts[1][:500], tandem, parts[1][500:]])
    parts.append(rng.integers(0, 4, 10).astype(np.uint8))        # shorter than k: no window
    return make_reference(parts)


# ------------------------------------------------------------------------------------ kernels

def test_hash_is_fmix64_of_the_canonical_code():
    vals = np.array([0, 1, 12345, (1 << 62) - 1, 0xFFFFFFFF], np.uint64)
    for v in vals.tolist():
        assert int(K.kmer_hash(np.uint64(v))) == py_hash(v)
    assert py_hash(0) != 0                        # poly-A does not hash to the smallest value
    m = 1000
    slots = [int(K.slot_of(np.uint64(h), m)) for h in range(0, 1 << 20, 997)]
    assert min(slots) >= 0 and max(slots) < m and len(set(slots)) > 500   # small values spread


@pytest.mark.parametrize("k,s", [(5, 4), (8, 7), (11, 16), (15, 16), (31, 5)])
def test_sketch_matches_python(k, s):
    rng = np.random.default_rng(k * 100 + s)
    for trial in range(30):
        n = int(rng.integers(0, 120))
        codes = rng.integers(0, 4, n).astype(np.uint8)
        if trial % 3 == 0 and n:
            codes[rng.integers(0, n, 3)] = 4            # N breaks k-mers
        if trial % 5 == 0 and n > 40:
            codes[20:40] = codes[0:20]                   # a repeated k-mer: first occurrence kept
        out_h = np.empty(s, np.uint64)
        out_v = np.empty(s, np.int64)
        got = K.sketch_segment(codes, 0, n, k, s, out_h, out_v)
        want = py_sketch(codes, k, s)
        assert [(int(h), int(v)) for h, v in zip(out_h[:got], out_v[:got])] == want


def test_palindromes_are_skipped_and_strands_share_a_sketch():
    codes = np.array([0, 1, 2, 3, 0, 3, 1, 2], np.uint8)      # ACGT and its palindromic 4-mers
    out_h, out_v = np.empty(8, np.uint64), np.empty(8, np.int64)
    n = K.sketch_segment(codes, 0, 8, 4, 8, out_h, out_v)
    assert n == len(py_kmers(codes, 4)) < 5
    rng = np.random.default_rng(1)
    read = rng.integers(0, 4, 90).astype(np.uint8)
    a_h, b_h = np.empty(16, np.uint64), np.empty(16, np.uint64)
    na = K.sketch_segment(read, 0, 90, 15, 16, a_h, np.empty(16, np.int64))
    nb = K.sketch_segment(revcomp(read), 0, 90, 15, 16, b_h, np.empty(16, np.int64))
    assert na == nb and np.array_equal(a_h[:na], b_h[:nb])


@pytest.mark.parametrize("k,w,stride", [(15, 48, 34), (11, 40, 10), (15, 127, 113)])
def test_reference_windows(small_ref, k, w, stride):
    ws, we, wc = K.reference_windows(small_ref.offsets, k, w, stride)
    assert list(zip(ws.tolist(), we.tolist(), wc.tolist())) == py_windows(small_ref, k, w, stride)


@pytest.mark.parametrize("k,w,stride,s,cap", [(15, 48, 34, 16, 254), (11, 40, 20, 8, 3), (13, 64, 52, 24, 2)])
def test_table_content(small_ref, k, w, stride, s, cap):
    a = K.build(small_ref.codes, small_ref.offsets, k, w, stride, s, cap)
    want = py_table(small_ref, k, w, stride, s, cap)
    keys, bstart, loc = a["keys"], a["bstart"].astype(np.int64), a["loc"]
    got = {}
    slot_of_key = {}
    for p in np.flatnonzero(keys != K.EMPTY).tolist():
        h = int(keys[p])
        got[h] = [(int(x), int(y)) for x, y in loc[bstart[p]:bstart[p + 1]]]
        slot_of_key[h] = p
        assert K.lookup(keys, keys[p]) == p
    assert got == {h: locs for h, (locs, _) in want.items()}
    assert int(bstart[-1]) == loc.shape[0] and np.all(np.diff(bstart) >= 0)
    # free slots hold nothing; over-full keys keep their true count
    free = np.flatnonzero(keys == K.EMPTY)
    assert np.all(bstart[free + 1] == bstart[free])
    over = {slot_of_key[h]: n for h, (_, n) in want.items() if n > cap}
    assert dict(zip(a["over_slot"].tolist(), a["over_count"].tolist())) == over
    assert a["over_slot"].tolist() == sorted(over)
    if cap <= 3:
        assert over                                          # the repeat family overfills buckets
    assert K.lookup(keys, np.uint64(12345)) == -1 or int(keys[K.lookup(keys, np.uint64(12345))]) == 12345


def test_table_does_not_depend_on_threads(small_ref):
    prev = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = K.build(small_ref.codes, small_ref.offsets, 13, 40, 28, 12, 5)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = K.build(small_ref.codes, small_ref.offsets, 13, 40, 28, 12, 5)
    finally:
        numba.set_num_threads(prev)
    for name in one:
        assert np.array_equal(one[name], two[name]) and one[name].dtype == two[name].dtype


def test_top_ranges_match_python():
    rng = np.random.default_rng(3)
    nwin = 60
    wctg = np.repeat(np.arange(4, dtype=np.int32), 15)
    for trial in range(300):
        nd = int(rng.integers(1, 25))
        keys = np.sort(rng.choice(2 * nwin, nd, replace=False)).astype(np.int64)
        counts = rng.integers(1, 6, nd).astype(np.int64)
        sws = int(rng.integers(1, 5))
        min_hits = int(rng.integers(1, 4))
        rend = np.empty(nd, np.int64)
        score = np.empty(nd, np.int64)
        order = np.empty(nd, np.int64)
        nr = K.top_ranges(keys, counts, nd, nwin, wctg, sws, min_hits, rend, score, order)
        w_rend, w_score, w_chosen = py_top_ranges(keys.tolist(), counts.tolist(), wctg.tolist(), nwin, sws,
                                                  min_hits)
        assert rend.tolist() == w_rend and score.tolist() == w_score
        assert order[:nr].tolist() == w_chosen


def test_candidates_match_python(small_ref):
    rng = np.random.default_rng(11)
    reads = []
    L = small_ref.codes.shape[0]
    for i in range(60):
        length = int(rng.choice([40, 100, 150]))
        p = int(rng.integers(0, L - length))
        r = mutate(rng, small_ref.codes[p:p + length] % 4, int(rng.integers(0, 4)), int(rng.integers(0, 2)))
        reads.append(revcomp(r) if i % 2 else r)
    reads.append(rng.integers(0, 4, 10).astype(np.uint8))        # shorter than k
    reads.append(np.full(80, 4, np.uint8))                       # all N
    max_edits = rng.integers(0, 6, len(reads)).astype(np.int32)
    for opts in ({}, {"k": 11, "window": 30, "sketch": 6, "min_hits": 2, "max_cands": 3},
                 {"k": 13, "window": 60, "stride": 20, "bucket_cap": 2, "max_cands": 5}):
        seeder = MinhashSeeder(**opts)
        index = seeder.build_index(small_ref)
        got, score = seeder.candidates(index, make_batch(reads), max_edits, scores=True)
        want = py_candidates(small_ref, index.params, reads, max_edits, seeder.min_hits, seeder.max_cands)
        assert as_tuples(got, score) == want
        assert got.read.dtype == np.int32 and got.strand.dtype == np.int8 and got.pos.dtype == np.int64


def test_tandem_array_yields_every_shift():
    """A read inside a tandem array fits at several shifts of the unit: each within the range is kept."""
    rng = np.random.default_rng(8)
    unit = rng.integers(0, 4, 110).astype(np.uint8)
    ref = make_reference([np.concatenate([rng.integers(0, 4, 3000).astype(np.uint8), np.tile(unit, 6),
                                          rng.integers(0, 4, 3000).astype(np.uint8)])])
    seeder = MinhashSeeder()
    index = seeder.build_index(ref)
    p = 3000 + 2 * 110 + 5
    c = seeder.candidates(index, make_batch([ref.codes[p:p + 100]]), np.array([5], np.int32))
    assert p in c.pos.tolist() and len(c) >= 3


# ------------------------------------------------------------------------------------ the seeder

def test_finds_true_locus_of_simulated_reads(sim_data):
    ref_path, reads_path, truth, _ = sim_data
    ref = load_reference(str(ref_path))
    lines = reads_path.read_text().split("\n")
    names = [lines[i][1:] for i in range(0, len(lines) - 1, 4)]
    seqs = [np.frombuffer(lines[i].encode(), np.uint8) for i in range(1, len(lines) - 1, 4)]
    from pymap.kernels.encoding import ASCII_TO_CODE
    batch = make_batch([ASCII_TO_CODE[s] for s in seqs])
    seeder = MinhashSeeder()
    index = seeder.build_index(ref)
    max_e = np.full(len(names), 5, np.int32)
    c = seeder.candidates(index, batch, max_e)
    start = dict(zip(ref.names, ref.offsets[:-1].tolist()))
    found = 0
    for i, name in enumerate(names):
        ctg, pos, strand, _ = truth[name]
        g = start[ctg] + pos
        m = (c.read == i) & (c.strand == (strand == "-")) & (np.abs(c.pos - g) <= 5)
        found += bool(m.any())
    assert found / len(names) >= 0.99, found
    assert len(c) / len(names) < 3
    key = c.read.astype(np.int64) * 4 * 10**9 + c.strand.astype(np.int64) * 2 * 10**9 + c.pos
    assert np.all(np.diff(key) > 0)                            # sorted, unique


def test_thread_count_does_not_change_candidates(sim_data):
    ref = load_reference(str(sim_data[0]))
    rng = np.random.default_rng(4)
    reads = []
    for _ in range(3000):
        p = int(rng.integers(0, ref.codes.shape[0] - 120))
        r = mutate(rng, ref.codes[p:p + 100] % 4, 3, 1)
        reads.append(revcomp(r) if rng.random() < 0.5 else r)
    seeder = MinhashSeeder(max_cands=4)
    index = seeder.build_index(ref)
    me = np.full(len(reads), 4, np.int32)
    prev = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = seeder.candidates(index, make_batch(reads), me, scores=True)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = seeder.candidates(index, make_batch(reads), me, scores=True)
    finally:
        numba.set_num_threads(prev)
    assert as_tuples(*one) == as_tuples(*two)
    # sub-batching (bounded output buffers) changes nothing either
    import pymap.index as M
    old = M.OUTPUT_SLOTS
    try:
        M.OUTPUT_SLOTS = 4 * 1000                          # sub-batches of 1000 reads
        three = seeder.candidates(index, make_batch(reads), me, scores=True)
    finally:
        M.OUTPUT_SLOTS = old
    assert as_tuples(*three) == as_tuples(*one)


def test_empty_batch_and_bad_max_edits(small_ref):
    seeder = MinhashSeeder()
    index = seeder.build_index(small_ref)
    assert len(seeder.candidates(index, make_batch([]), np.zeros(0, np.int32))) == 0
    with pytest.raises(ValueError, match="max_edits"):
        seeder.candidates(index, make_batch([small_ref.codes[:50]]), np.zeros(3, np.int32))


# ------------------------------------------------------------------------------------ index file

def test_index_round_trip_and_refusals(tmp_path, small_ref):
    seeder = MinhashSeeder(k=13, window=40)
    index = seeder.build_index(small_ref)
    path = tmp_path / "ref.fa.pymap.minhash.idx"
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
    auto = MinhashSeeder().load_index(path, small_ref)
    assert auto.params["k"] == 13 and auto.params["window"] == 40
    for opts in ({"k": 15}, {"window": 48}, {"sketch": 8}, {"bucket_cap": 9}, {"stride": 10}):
        with pytest.raises(IndexMismatch, match="pymap index"):
            MinhashSeeder(**{"k": 13, "window": 40, **opts}).load_index(path, small_ref)
    other = make_reference([small_ref.codes[:1000]])
    with pytest.raises(IndexMismatch, match="another reference"):
        seeder.load_index(path, other)
    with pytest.raises(IndexMismatch):
        seeder.load_index(tmp_path / "missing.idx", small_ref)
    # the neighborhood seeder's index is not a minhash index (and the other way round)
    from pymap.seeders.neighborhood import NeighborhoodSeeder
    nb = NeighborhoodSeeder()
    nb_path = tmp_path / "nb.idx"
    nb.save_index(nb.build_index(small_ref), nb_path)
    with pytest.raises(IndexMismatch, match="seeder"):
        seeder.load_index(nb_path, small_ref)
    with pytest.raises(IndexMismatch, match="seeder"):
        nb.load_index(path, small_ref)
    assert seeder.index_path("/x/ref.fa.gz") == "/x/ref.fa.gz.pymap.minhash.idx"


def test_damaged_index_is_refused(tmp_path, small_ref):
    seeder = MinhashSeeder()
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
    first = read_header(path)[0]["arrays"][0]             # inside the first array
    flipped[first["offset"] + first["nbytes"] // 2] ^= 0xFF
    with pytest.raises(IndexCorrupt, match="checksum"):
        seeder.load_index(write(flipped, "flip"), small_ref)
    hdr = bytearray(raw)
    hdr[80] ^= 0x01
    with pytest.raises(IndexCorrupt, match="header"):
        seeder.load_index(write(hdr, "hdr"), small_ref)
    # a header that passes its checksum but holds nonsense, or arrays that do not fit together
    meta, arrays = load_index(path)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    for bad_params in ({"k": 99}, {"k": None}, {"window": 3}, {"stride": 0}, {"hash": "other"}):
        save_index(tmp_path / "p.idx", {**meta, "params": {**meta["params"], **bad_params}}, arrays)
        with pytest.raises(IndexCorrupt, match="header"):
            MinhashSeeder().load_index(tmp_path / "p.idx", small_ref)
    save_index(tmp_path / "c.idx", {**meta, "contigs": 5}, arrays)
    with pytest.raises(IndexCorrupt, match="header"):
        MinhashSeeder().load_index(tmp_path / "c.idx", small_ref)
    for name, change in (("bstart", lambda a: a[:-1]), ("loc", lambda a: a[:, :1]),
                         ("keys", lambda a: a.astype(np.int64)), ("wctg", lambda a: a + 100)):
        bad = dict(arrays)
        bad[name] = np.ascontiguousarray(change(arrays[name]))
        save_index(tmp_path / "a.idx", meta, bad)
        with pytest.raises(IndexCorrupt, match="inconsistent"):
            MinhashSeeder().load_index(tmp_path / "a.idx", small_ref)
    bad = dict(arrays)
    bad["loc"] = arrays["loc"].copy()
    bad["loc"][0, 0] = arrays["wstart"].shape[0] + 5                # a window that does not exist
    save_index(tmp_path / "w.idx", meta, bad)
    with pytest.raises(IndexCorrupt, match="inconsistent"):
        MinhashSeeder().load_index(tmp_path / "w.idx", small_ref)


# ------------------------------------------------------------------------------------ options

@pytest.mark.parametrize("opts,words", [
    ({"k": 3}, ["k", "4..31"]), ({"k": 32}, ["k"]), ({"k": "15"}, ["k", "integer"]), ({"k": True}, ["k"]),
    ({"sketch": 0}, ["sketch"]), ({"window": 10, "k": 15}, ["window", "15.."]),
    ({"window": 40000}, ["window"]), ({"stride": 0}, ["stride"]),
    ({"window": 48, "k": 15, "stride": 35}, ["stride", "window - k + 1 = 34"]),
    ({"bucket_cap": 0}, ["bucket_cap"]), ({"max_cands": 0}, ["max_cands"]), ({"min_hits": 0}, ["min_hits"]),
    ({"max_cands": 2.5}, ["max_cands", "integer"]),
])
def test_bad_options(opts, words):
    with pytest.raises(ValueError) as exc:
        MinhashSeeder(**opts)
    for w in words:
        assert w in str(exc.value)
    with pytest.raises(plugins.PluginError):
        plugins.create("seeder", "minhash", **opts)


def test_registered_and_defaults():
    assert plugins.load_class("seeder", "minhash") is MinhashSeeder
    p = MinhashSeeder().build_params()
    assert (p["k"], p["sketch"], p["window"], p["stride"], p["bucket_cap"]) == (15, 16, 48, 34, 254)
    with pytest.raises(plugins.PluginError, match="no option"):
        plugins.create("seeder", "minhash", step=3)


@pytest.mark.skipif(shutil.which("samtools") is None, reason="samtools not installed")
def test_align_end_to_end(tmp_path, sim_data):
    ref_path, reads_path, truth, _ = sim_data
    ref = tmp_path / "ref.fa"
    shutil.copy(ref_path, ref)
    out = tmp_path / "out.sam"
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", "--seeder", "minhash", str(ref),
                          str(reads_path), "-o", str(out)], capture_output=True, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    assert (tmp_path / "ref.fa.pymap.minhash.idx").exists()
    assert subprocess.run(["samtools", "quickcheck", str(out)]).returncode == 0
    view = subprocess.run(["samtools", "view", str(out)], capture_output=True, text=True, check=True).stdout
    right = 0
    recs = [line.split("\t") for line in view.splitlines()]
    prim = [f for f in recs if not int(f[1]) & 0x900]
    assert len(prim) == len(truth)
    for f in prim:
        ctg, pos, strand, _ = truth[f[0]]
        right += f[2] == ctg and abs(int(f[3]) - 1 - pos) <= 10 and bool(int(f[1]) & 16) == (strand == "-")
    assert right / len(prim) >= 0.98
