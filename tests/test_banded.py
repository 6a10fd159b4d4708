"""Extension stage: the banded kernel (kernels.banded) and the banded / edlib extenders.

Window and band. For candidate (pos, e) the window is [lo, hi) = [max(c_lo, pos - e),
min(c_hi, pos + L + e)); Edlib HW on that whole window is an *unbanded* semi-global search. The
banded kernel evaluates the diagonals d = c - j - pos in [lo - pos - e, hi - pos - L + e]: an
alignment of <= e edits inside the window starts on a diagonal >= lo - pos, ends on one
<= hi - pos - L, and each of its (<= e) insertions/deletions moves it by one diagonal, so it
stays in that band. (A band of only +-e would not do: start at pos - e, then one insertion ->
diagonal -e - 1.) Hence the banded distance equals Edlib's whenever Edlib finds one within e, and
is -1 exactly when Edlib finds none. The pure-Python unbanded reference below also fixes the tie
rules, so start and CIGAR are compared exactly against it.
"""
import edlib
import numba
import numpy as np
import pytest

from pymap import plugins
from pymap.batch import CandidateBatch, ReadBatch
from pymap.extenders.banded import BandedExtender
from pymap.extenders.edlib_extender import EdlibExtender
from pymap.kernels import banded as kb
from pymap.kernels.encoding import reverse_complement_batch

READ_ASCII = np.frombuffer(b"ACGTN", np.uint8)
REF_ASCII = np.frombuffer(b"ACGTn", np.uint8)   # distinct N symbols: N mismatches N in Edlib too


# ----------------------------------------------------------------------------- reference model

def ref_align(read, ref, pos, clo, chi, e):
    """Unbanded DP over the window with the documented tie rules -> (dist, start, [(op, n)])."""
    L = len(read)
    lo, hi = max(clo, pos - e), min(chi, pos + L + e)
    if e < 0 or hi - lo < L - e or hi < lo:
        return -1, -1, []
    W = hi - lo
    INF = 1 << 30
    D = [[0] * (W + 1)]
    sub = [[0 if (read[j] < 4 and read[j] == ref[lo + i]) else 1 for i in range(W)] for j in range(L)]
    for j in range(1, L + 1):
        prev, row, s = D[-1], [j] + [INF] * W, sub[j - 1]
        for i in range(1, W + 1):
            row[i] = min(prev[i - 1] + s[i - 1], prev[i] + 1, row[i - 1] + 1)
        D.append(row)
    best = min(D[L])
    if best > e:
        return -1, -1, []
    i = min((i for i in range(W + 1) if D[L][i] == best), key=lambda i: (abs(lo + i - pos - L), i))
    if L > 0 and not (i > 0 and D[L - 1][i - 1] + sub[L - 1][i - 1] == best) \
            and D[L - 1][i] + 1 == best and i + 1 <= W and D[L][i + 1] == best:
        i += 1                                   # no trailing I when an M of equal distance exists
    j, ops = L, []
    while j > 0:                                 # M > I > D
        v = D[j][i]
        if i > 0 and D[j - 1][i - 1] + sub[j - 1][i - 1] == v:
            op, j, i = 0, j - 1, i - 1
        elif D[j - 1][i] + 1 == v:
            op, j = 1, j - 1
        else:
            assert D[j][i - 1] + 1 == v
            op, i = 2, i - 1
        if ops and ops[-1][0] == op:
            ops[-1][1] += 1
        else:
            ops.append([op, 1])
    return best, lo + i, [tuple(x) for x in reversed(ops)]


def edlib_dist(read, ref, pos, clo, chi, e):
    L = len(read)
    lo, hi = max(clo, pos - e), min(chi, pos + L + e)
    if hi - lo < L - e or hi < lo:
        return -1
    res = edlib.align(READ_ASCII[read].tobytes(), REF_ASCII[ref[lo:hi]].tobytes(), mode="HW", k=e)
    return res["editDistance"]


def check_cigar(cig, read, ref, start, dist, lo, hi):
    """CIGAR consumes the read, stays in the window, and implies exactly `dist` edits."""
    ops = [(int(x) & 15, int(x) >> 4) for x in cig]
    assert all(op in (0, 1, 2) and n > 0 for op, n in ops)
    assert all(ops[t][0] != ops[t + 1][0] for t in range(len(ops) - 1)), "ops not merged"
    j, q, edits = 0, start, 0
    for op, n in ops:
        if op == 0:
            for _ in range(n):
                a, b = read[j], ref[q]
                edits += int(a == 4 or b == 4 or a != b)
                j += 1
                q += 1
        elif op == 1:
            j += n
            edits += n
        else:
            q += n
            edits += n
    assert j == len(read)
    assert lo <= start and q <= hi
    assert edits == dist
    return ops, q


# ----------------------------------------------------------------------------- data

def make_cases(seed, n, lengths=(1, 20, 50, 100, 150), emax=10, offtarget=0.1):
    """Random multi-contig reference with N runs; reads cut near anywhere (contig ends included),
    mutated (subs/ins/del anywhere incl. ends, N), either strand; candidates off by up to +-e."""
    rng = np.random.default_rng(seed)
    sizes = [int(x) for x in rng.integers(300, 3000, 4)]
    ref = rng.integers(0, 4, sum(sizes)).astype(np.uint8)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for _ in range(6):                                    # some N runs in the reference
        a = int(rng.integers(0, ref.size - 5))
        ref[a:a + int(rng.integers(1, 5))] = 4
    reads, cand = [], []
    for _ in range(n):
        c = int(rng.integers(0, len(sizes)))
        clo, chi = int(bounds[c]), int(bounds[c + 1])
        L = int(rng.choice(lengths))
        e = int(rng.integers(0, emax + 1))
        if rng.random() < 0.3:                            # hug a contig end
            p = clo + int(rng.integers(-3, 4)) if rng.random() < 0.5 else chi - L + int(rng.integers(-3, 4))
        else:
            p = int(rng.integers(clo, max(clo + 1, chi - L)))
        seg = [int(ref[q]) for q in range(p, p + L) if clo <= q < chi]
        seg = seg + [int(x) for x in rng.integers(0, 4, L - len(seg))]
        nedit = int(rng.integers(0, e + 3))
        for _ in range(nedit):
            kind, i = int(rng.integers(0, 4)), int(rng.integers(0, len(seg) + 1))
            if kind == 0 and i < len(seg):
                seg[i] = (seg[i] + int(rng.integers(1, 4))) % 4
            elif kind == 1:
                seg.insert(i, int(rng.integers(0, 4)))
            elif kind == 2 and i < len(seg) and len(seg) > 1:
                del seg[i]
            elif i < len(seg):
                seg[i] = 4                                # N in the read
        read = np.array(seg, np.uint8)
        strand = int(rng.integers(0, 2))
        stored = read if strand == 0 else reverse_complement_batch(read, np.array([0, read.size], np.int64))
        cpos = p + int(rng.integers(-e, e + 1)) if rng.random() > offtarget else int(rng.integers(clo, chi))
        reads.append(stored)
        cand.append((len(reads) - 1, strand, cpos, clo, chi, e))
    offsets = np.zeros(len(reads) + 1, np.int64)
    offsets[1:] = np.cumsum([r.size for r in reads])
    codes = np.concatenate(reads)
    rc = reverse_complement_batch(codes, offsets)
    c = np.array(cand, np.int64)
    arrays = (codes, rc, offsets, ref, c[:, 0].astype(np.int32), c[:, 1].astype(np.int8), c[:, 2].copy(),
              c[:, 3].copy(), c[:, 4].copy(), c[:, 5].astype(np.int32))
    return arrays


def oriented(arrays, i):
    codes, rc, offsets, ref, c_read, c_strand = arrays[:6]
    r = c_read[i]
    src = rc if c_strand[i] else codes
    return src[offsets[r]:offsets[r + 1]]


def window(arrays, i, L):
    pos, clo, chi, e = arrays[6][i], arrays[7][i], arrays[8][i], arrays[9][i]
    return int(pos), int(clo), int(chi), int(e), max(clo, pos - e), min(chi, pos + L + e)


@pytest.fixture(scope="module")
def cases():
    return make_cases(7, 1500)


def candidate_batch(arrays):
    """The kernel's argument arrays as the CandidateBatch an extender takes."""
    codes, rc, offsets, ref = arrays[:4]
    n = offsets.size - 1
    reads = ReadBatch(codes, offsets, np.zeros(0, np.uint8), np.zeros(n + 1, np.int64), np.zeros(0, np.uint8),
                      rc_codes=rc)
    return CandidateBatch(reads, ref, *arrays[4:])


@pytest.fixture(scope="module")
def banded_out(cases):
    return kb.banded_align(*cases)


# ----------------------------------------------------------------------------- tests

def test_registered():
    assert isinstance(plugins.create("extender", "banded"), BandedExtender)
    assert isinstance(plugins.create("extender", "edlib"), EdlibExtender)


def test_banded_extender(cases, banded_out):
    """The extender returns the kernel's answer, end insertions soft-clipped."""
    from pymap.extenders.banded import clip_end_insertions
    cb = candidate_batch(cases)
    dist, start, cig, co = banded_out
    out = BandedExtender().extend(cb, traceback=True)
    cig = np.array(cig)
    clipped = clip_end_insertions(dist >= 0, np.array(dist), cig, co)
    assert np.any(clipped != dist)           # the cases hold end insertions
    assert np.array_equal(out.edits, clipped) and np.array_equal(out.found, dist >= 0)
    assert np.array_equal(out.start, start)
    assert np.array_equal(out.cigar, cig) and np.array_equal(out.cigar_offsets, co)
    out = BandedExtender().extend(cb, traceback=False)
    assert np.array_equal(out.edits, dist) and np.array_equal(out.start, start)


def test_distance_matches_edlib(cases, banded_out):
    dist, start, cig, co = banded_out
    d2, s2 = kb.banded_distances(*cases)
    assert np.array_equal(dist, d2) and np.array_equal(start, s2)
    ref = cases[3]
    found = 0
    for i in range(dist.size):
        read = oriented(cases, i)
        pos, clo, chi, e, lo, hi = window(cases, i, read.size)
        assert dist[i] == edlib_dist(read, ref, pos, clo, chi, e), i
        if dist[i] >= 0:
            found += 1
            ops, end = check_cigar(cig[co[i]:co[i + 1]], read, ref, start[i], dist[i], lo, hi)
            if ops:
                # no leading D / trailing D; leading / trailing I only at the window edges
                assert ops[0][0] != 2 and ops[-1][0] != 2
                assert ops[0][0] != 1 or start[i] == lo
                assert ops[-1][0] != 1 or end == hi
        else:
            assert co[i] == co[i + 1]
    assert found > dist.size // 2


def test_exact_against_reference_model(cases, banded_out):
    dist, start, cig, co = banded_out
    ref = cases[3]
    for i in range(0, dist.size, 3):
        read = oriented(cases, i)
        pos, clo, chi, e, lo, hi = window(cases, i, read.size)
        d, s, ops = ref_align([int(x) for x in read], ref, pos, clo, chi, e)
        got = [(int(x) & 15, int(x) >> 4) for x in cig[co[i]:co[i + 1]]]
        assert (dist[i], start[i] if d >= 0 else -1, got) == (d, s, ops), \
            (i, kb.cigar_to_string(cig[co[i]:co[i + 1]]))


def test_traceback_flag(cases):
    """The per-candidate kernel with and without writing the CIGAR: same distance, start, op count;
    on wider bands (1-3 words) also the reference model's CIGAR."""
    ref = kb._readonly(cases[3], np.uint8)       # the argument types of the batch kernel's call
    S = np.empty(4 * 400 * 3, np.uint64)
    B = np.empty(5 * 10, np.uint64)
    bufs = [np.full(200, 7, np.uint32) for _ in range(2)]
    rng = np.random.default_rng(5)
    for i in range(0, cases[4].size, 2):
        read = oriented(cases, i)
        pos, clo, chi, e, lo, hi = window(cases, i, read.size)
        if i % 4 == 2:                            # wider bands: 1-3 words
            e = int(rng.integers(11, 45))
            lo, hi = max(clo, pos - e), min(chi, pos + read.size + e)
        if hi - lo < read.size - e or hi < lo:
            continue
        args = (kb._readonly(read, np.uint8), 0, read.size, ref, pos, lo, hi, e, S, B)
        with_ops = kb._extend(*args, bufs[0], 0, True)
        assert kb._extend(*args, bufs[1], 0, False) == with_ops
        assert np.all(bufs[1] == 7)               # nothing written without the flag
        if i % 4 != 2:
            continue                              # narrow bands: test_exact_against_reference_model
        d, s, ops = ref_align([int(x) for x in read], ref, pos, clo, chi, e)
        got = [(int(x) & 15, int(x) >> 4) for x in bufs[0][:with_ops[2]]]
        assert (with_ops[0], with_ops[1] if d >= 0 else -1, got) == (d, s, ops), (i, e)


def test_word_boundaries():
    """Bands of exactly 63, 64 and 65 diagonals (one word, full and spilling into a second), 127-129
    and 191-193, on short and very long reads; narrow and wide candidates mixed in one batch."""
    rng = np.random.default_rng(17)
    ref = rng.integers(0, 4, 30_000).astype(np.uint8)
    reads, cand, widths = [], [], []
    for w in (1, 2, 31, 61, 62, 63, 64, 65, 66, 127, 128, 129, 191, 192, 193):
        for L in (40, 150, 2000, 6000):
            for rep in range(3):
                e = min((w + 2) // 4 + int(rng.integers(0, 4)), w - 1)     # 4e + 1 >= w >= e + 1
                pos = int(rng.integers(200, ref.size - L - 200))
                # contig [clo, chi): the window ends at pos + L + e and starts at clo, so that the band
                # hi - lo - L + 2e + 1 is exactly w
                chi = pos + L + e + int(rng.integers(0, 3))
                clo = pos + 3 * e - w + 1
                t = max(pos, clo) + int(rng.integers(0, 3))
                seg = [int(x) for x in ref[t:t + L]]
                for _ in range(int(rng.integers(0, e + 2)) if rep < 2 else 0):
                    kind, j = int(rng.integers(0, 3)), int(rng.integers(0, len(seg)))
                    if kind == 0:
                        seg[j] = (seg[j] + 1) % 4
                    elif kind == 1:
                        seg.insert(j, int(rng.integers(0, 4)))
                    elif len(seg) > 1:
                        del seg[j]
                if rep == 2:                          # unrelated read: no hit
                    seg = [int(x) for x in rng.integers(0, 4, L)]
                reads.append(np.array(seg[:L] if len(seg) > L else seg, np.uint8))
                strand = int(rng.integers(0, 2))
                if strand:
                    reads[-1] = reverse_complement_batch(reads[-1], np.array([0, reads[-1].size], np.int64))
                cand.append((len(reads) - 1, strand, pos, clo, chi, e))
                widths.append(w)
    offsets = np.zeros(len(reads) + 1, np.int64)
    offsets[1:] = np.cumsum([r.size for r in reads])
    codes = np.concatenate(reads)
    c = np.array(cand, np.int64)
    arrays = (codes, reverse_complement_batch(codes, offsets), offsets, ref, c[:, 0].astype(np.int32),
              c[:, 1].astype(np.int8), c[:, 2].copy(), c[:, 3].copy(), c[:, 4].copy(),
              c[:, 5].astype(np.int32))
    dist, start, cig, co = kb.banded_align(*arrays)
    d2, s2 = kb.banded_distances(*arrays)
    assert np.array_equal(dist, d2) and np.array_equal(start, s2)
    found = 0
    for i in range(dist.size):
        read = oriented(arrays, i)
        pos, clo, chi, e, lo, hi = window(arrays, i, read.size)
        if hi - lo >= read.size - e:
            assert hi - lo - read.size + 2 * e + 1 == widths[i]
        assert dist[i] == edlib_dist(read, ref, pos, clo, chi, e), (i, widths[i], read.size, e)
        if dist[i] >= 0:
            found += 1
            check_cigar(cig[co[i]:co[i + 1]], read, ref, start[i], dist[i], lo, hi)
            if read.size <= 150:
                d, s, ops = ref_align([int(x) for x in read], ref, pos, clo, chi, e)
                assert (dist[i], start[i]) == (d, s)
                assert [(int(x) & 15, int(x) >> 4) for x in cig[co[i]:co[i + 1]]] == ops
    assert found > dist.size // 2


def test_wide_band_multiword():
    arrays = make_cases(11, 60, lengths=(60, 150), emax=0)
    rng = np.random.default_rng(3)
    emax = rng.integers(16, 40, arrays[4].size).astype(np.int32)       # bands of 65..157 diagonals
    arrays = arrays[:9] + (emax,)
    arrays[6][:] += rng.integers(-emax, emax + 1)
    dist, start, cig, co = kb.banded_align(*arrays)
    ref = arrays[3]
    for i in range(dist.size):
        read = oriented(arrays, i)
        pos, clo, chi, e, lo, hi = window(arrays, i, read.size)
        assert dist[i] == edlib_dist(read, ref, pos, clo, chi, e)
        d, s, ops = ref_align([int(x) for x in read], ref, pos, clo, chi, e)
        assert (dist[i], start[i] if d >= 0 else -1) == (d, s)
        assert [(int(x) & 15, int(x) >> 4) for x in cig[co[i]:co[i + 1]]] == ops


def test_edlib_extender(cases, banded_out):
    cb = candidate_batch(cases)
    out = EdlibExtender().extend(cb, traceback=True)
    dist, start, cig, co = out.edits, out.start, out.cigar, out.cigar_offsets
    out2 = EdlibExtender().extend(cb, traceback=False)
    assert np.array_equal(dist, banded_out[0])
    assert np.array_equal(dist, out2.edits) and np.array_equal(start, out2.start)
    ref = cases[3]
    for i in np.flatnonzero(dist >= 0):
        read = oriented(cases, i)
        pos, clo, chi, e, lo, hi = window(cases, i, read.size)
        check_cigar(cig[co[i]:co[i + 1]], read, ref, start[i], dist[i], lo, hi)


def test_thread_count_determinism(cases):
    big = tuple(np.tile(a, 8) if k >= 4 else a for k, a in enumerate(cases))
    saved = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = kb.banded_align(*big) + kb.banded_distances(*big)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = kb.banded_align(*big) + kb.banded_distances(*big)
    finally:
        numba.set_num_threads(saved)
    for a, b in zip(one, many):
        assert np.array_equal(a, b)


def test_edge_cases():
    ref = np.frombuffer(b"\x00\x01\x02\x03" * 10, np.uint8).copy()           # ACGT x10, one contig
    read = ref[4:24].copy()
    codes = np.concatenate([read, read, np.array([4, 4, 4], np.uint8)])
    offsets = np.array([0, 20, 40, 43], np.int64)
    rc = reverse_complement_batch(codes, offsets)
    #        exact  window too short  off contig   all-N read (3 edits)  e=0 exact  shifted e=0
    c_read = np.array([0, 0, 1, 2, 0, 0], np.int32)
    c_pos = np.array([5, 30, 100, 10, 4, 5], np.int64)
    c_maxe = np.array([2, 1, 3, 3, 0, 0], np.int32)
    n = c_read.size
    args = (codes, rc, offsets, ref, c_read, np.zeros(n, np.int8), c_pos, np.zeros(n, np.int64),
            np.full(n, 40, np.int64), c_maxe)
    dist, start, cig, co = kb.banded_align(*args)
    assert dist.tolist() == [0, -1, -1, 3, 0, -1]
    assert start[0] == 4 and start[4] == 4 and start[1] == -1
    assert kb.cigar_to_string(cig[co[0]:co[1]]) == "20M"
    assert kb.cigar_to_string(cig[co[3]:co[4]]) == "3M"
    assert kb.cigar_to_string(kb.cigar_from_string("3M1I2D")) == "3M1I2D"
    assert EdlibExtender().extend(candidate_batch(args)).edits.tolist() == dist.tolist()


def test_tie_breaking_examples():
    """Gap left-alignment in a homopolymer, and no leading/trailing I when a mismatch does as well."""
    enc = {c: i for i, c in enumerate("ACGTN")}

    def run(read, ref, pos, e):
        r = np.array([enc[c] for c in read], np.uint8)
        g = np.array([enc[c] for c in ref], np.uint8)
        offsets = np.array([0, r.size], np.int64)
        out = kb.banded_align(r, reverse_complement_batch(r, offsets), offsets, g,
                                     np.zeros(1, np.int32), np.zeros(1, np.int8), np.array([pos], np.int64),
                                     np.zeros(1, np.int64), np.array([g.size], np.int64),
                                     np.array([e], np.int32))
        return int(out[0][0]), int(out[1][0]), kb.cigar_to_string(out[2])

    # deletion of one A from a run of four: left-aligned
    assert run("CCGTAAAGCTT", "TTTCCGTAAAAGCTTGGG", 3, 2) == (1, 3, "4M1D7M")
    # insertion of an extra A: left-aligned
    assert run("CCGTAAAAAGCTT", "TTTCCGTAAAAGCTTGGG", 3, 2) == (1, 3, "4M1I8M")
    # first read base wrong: a leading mismatch, not a leading insertion
    assert run("GCGTAAAAGCTT", "TTTCCGTAAAAGCTTGGG", 3, 2) == (1, 3, "12M")
    # last read base wrong, candidate diagonal one to the left, so the end closest to it would be
    # 11M1I: the trailing-insertion rule moves the end one column right -> trailing mismatch
    assert run("CCGTAAAAGCTA", "TTTCCGTAAAAGCTTGGG", 2, 2) == (1, 3, "12M")
