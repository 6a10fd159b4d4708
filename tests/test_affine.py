"""Banded affine-gap alignment with end clipping (kernels.affine).

References:
  * parasail semi-global with free database (reference) ends, the read global (sg_dx), when the
    clip penalties are prohibitive: same scores;
  * parasail Smith-Waterman when the clip penalties are 0: same scores;
  * a pure-Python full-matrix DP (below) with the kernel's objective and tie rules, optionally
    restricted to the band: identical results (score, positions, clips, NM, CIGAR), and without
    the band the same score whenever its optimal path lies inside the band.
Plus properties of every reported alignment: the CIGAR consumes the read and exactly the reported
reference span, re-scores to the reported score, has no terminal gaps, S only at the ends, merged
ops, and its indels cannot be shifted left at equal score (left-aligned).
"""
import numba
import numpy as np
import parasail
import pytest

from pymap.kernels import affine as ka
from pymap.kernels.encoding import encode_ascii, reverse_complement_batch

from affine_sim import simulate

ASCII = np.frombuffer(b"ACGTN", np.uint8)
DEFAULT = dict(match=1, mismatch=4, gap_open=6, gap_ext=1, clip_left=5, clip_right=5)
NOCLIP = dict(DEFAULT, clip_left=10_000, clip_right=10_000, min_score=-10**6)
LOCAL = dict(DEFAULT, clip_left=0, clip_right=0)


def codes(s):
    return encode_ascii(np.frombuffer(s.encode(), np.uint8))


def text(c):
    return ASCII[np.minimum(np.asarray(c), 4)].tobytes().decode()


# ----------------------------------------------------------------------------- reference model

def sub_score(a, b, P):
    if a >= 4 or b >= 4:
        return P["n_score"]
    return P["match"] if a == b else -P["mismatch"]


def full_params(kw):
    P = dict(match=1, mismatch=4, gap_open=6, gap_ext=1, clip_left=5, clip_right=5, n_score=-1, min_score=1)
    P.update(kw)
    P.setdefault("gap_open_ins", P["gap_open"])
    P.setdefault("gap_ext_ins", P["gap_ext"])
    return P


def ref_align(read, ref, lo, hi, kw, pos, w=None):
    """Plain DP over all cells (j, c), lo < c <= hi (with w: only diagonals |c - j - pos| <= w).
    Values are (score, -[left clipped]) tuples compared lexicographically, i.e. equal objectives
    prefer fewer clipped ends. Returns (score, rstart, rend, clip_l, clip_r, nm,
    ops [(op, n)], path cells) or None."""
    P = full_params(kw)
    L = len(read)
    od, ed = P["gap_open"], P["gap_ext"]
    oi, ei = P["gap_open_ins"], P["gap_ext_ins"]
    CL, CR = P["clip_left"], P["clip_right"]
    NEG = (-10**12, 0)
    W = hi - lo
    if L == 0 or W <= 0:
        return None

    def inband(j, c):
        return lo < c <= hi and (w is None or abs(c - j - pos) <= w)

    def add(t, v):
        return (t[0] + v, t[1])

    H = [[NEG] * (W + 1) for _ in range(L + 1)]
    E = [[NEG] * (W + 1) for _ in range(L + 1)]
    F = [[NEG] * (W + 1) for _ in range(L + 1)]
    G = [[NEG] * (W + 1) for _ in range(L + 1)]
    gsrc = [[0] * (W + 1) for _ in range(L + 1)]     # 0 continue, 1 start
    hsrc = [[0] * (W + 1) for _ in range(L + 1)]     # 0 G, 1 F, 2 E
    fext = [[False] * (W + 1) for _ in range(L + 1)]
    eext = [[False] * (W + 1) for _ in range(L + 1)]
    for j in range(1, L + 1):
        start = (0, 0) if j == 1 else (-CL, -1)
        for i in range(1, W + 1):
            c = lo + i
            if not inband(j, c):
                continue
            cont = H[j - 1][i - 1]
            if cont > start:        # a tie (two clipped starts): start here, the longer clip
                G[j][i] = add(cont, sub_score(read[j - 1], ref[c - 1], P))
            else:
                G[j][i] = add(start, sub_score(read[j - 1], ref[c - 1], P))
                gsrc[j][i] = 1
            op_, ex_ = add(H[j - 1][i], -(oi + ei)), add(F[j - 1][i], -ei)
            F[j][i], fext[j][i] = (ex_, True) if ex_ > op_ else (op_, False)
            op_, ex_ = add(H[j][i - 1], -(od + ed)), add(E[j][i - 1], -ed)
            E[j][i], eext[j][i] = (ex_, True) if ex_ > op_ else (op_, False)
            if G[j][i] >= F[j][i] and G[j][i] >= E[j][i]:
                H[j][i] = G[j][i]
            elif F[j][i] >= E[j][i]:
                H[j][i], hsrc[j][i] = F[j][i], 1
            else:
                H[j][i], hsrc[j][i] = E[j][i], 2
    best = None
    for j in range(1, L + 1):
        for i in range(1, W + 1):
            if G[j][i][0] <= NEG[0] // 2:
                continue
            rc = 1 if j < L else 0
            obj = (G[j][i][0] - CR * rc, G[j][i][1] - rc)
            d = lo + i - j - pos
            # equal objectives: the read's end over a right clip, then the longer clip
            key = (obj, j == L, -j, -abs(d), -(d > 0))
            if best is None or key > best[0]:
                best = (key, j, i)
    if best is None:
        return None
    (obj, *_), j, i = best
    je = j
    rend = lo + i
    ops, path, nm = [], [], 0
    state, first = 0, True
    while True:
        path.append((j, lo + i))
        if state == 0:
            src = 0 if first else hsrc[j][i]
            first = False
            if src:
                state = src
                continue
            op = 0
            nm += int(read[j - 1] >= 4 or ref[lo + i - 1] >= 4 or read[j - 1] != ref[lo + i - 1])
        else:
            op = state
            nm += 1
        if ops and ops[-1][0] == op:
            ops[-1][1] += 1
        else:
            ops.append([op, 1])
        if op == 0:
            if gsrc[j][i]:
                break
            j, i = j - 1, i - 1
        elif op == 1:
            state = 1 if fext[j][i] else 0
            j -= 1
        else:
            state = 2 if eext[j][i] else 0
            i -= 1
    cl, cr = j - 1, L - je
    raw = obj[0] + CL * (cl > 0) + CR * (cr > 0)
    if raw < P["min_score"]:
        return None
    ops = [(o, n) for o, n in reversed(ops)]
    ops = ([(4, cl)] if cl else []) + ops + ([(4, cr)] if cr else [])
    return raw, lo + i - 1, rend, cl, cr, nm, ops, path


def rescore(ops, read, ref, start, kw):
    """Raw score, NM, read and reference bases consumed by a CIGAR."""
    P = full_params(kw)
    j, q, s, nm = 0, start, 0, 0
    for op, n in ops:
        if op == 4:
            j += n
        elif op == 0:
            for _ in range(n):
                s += sub_score(read[j], ref[q], P)
                nm += int(read[j] >= 4 or ref[q] >= 4 or read[j] != ref[q])
                j += 1
                q += 1
        elif op == 1:
            s -= P["gap_open_ins"] + n * P["gap_ext_ins"]
            nm += n
            j += n
        else:
            s -= P["gap_open"] + n * P["gap_ext"]
            nm += n
            q += n
    return s, nm, j, q


def check_alignment(res, read, ref, lo, hi, kw):
    """Structural properties + left-alignment of one reported alignment."""
    score, rs, re_, cl, cr, nm, ops = res[:7]
    L = len(read)
    assert ops and all(n > 0 for _, n in ops)
    assert all(ops[t][0] != ops[t + 1][0] for t in range(len(ops) - 1)), "ops not merged"
    core = ops[(1 if ops[0][0] == 4 else 0):(len(ops) - 1 if ops[-1][0] == 4 else len(ops))]
    assert core and core[0][0] == 0 and core[-1][0] == 0, "terminal gap"
    assert all(op in (0, 1, 2) for op, _ in core), "S inside"
    assert cl == (ops[0][1] if ops[0][0] == 4 else 0) and cr == (ops[-1][1] if ops[-1][0] == 4 else 0)
    s, nm2, j, q = rescore(ops, read, ref, rs, kw)
    assert j == L and q == re_ and lo <= rs < re_ <= hi
    assert s == score and nm2 == nm
    # left-aligned: moving any indel one base to the left never keeps the score
    P = full_params(kw)
    jj, qq = cl, rs
    for t, (op, n) in enumerate(core):
        if op in (1, 2) and t > 0 and core[t - 1][1] >= 2:
            # the base before the gap (read jj-1 vs ref qq-1) would pair with the gap's last base
            before = sub_score(read[jj - 1], ref[qq - 1], P)
            if op == 2:
                after = sub_score(read[jj - 1], ref[qq + n - 1], P)
            else:
                after = sub_score(read[jj + n - 1], ref[qq - 1], P)
            assert after < before, f"indel {t} of {core} can move left"
        if op in (0, 1):
            jj += n
        if op in (0, 2):
            qq += n


# ----------------------------------------------------------------------------- kernel calls

def run_batch(items, kw, threads=None):
    """items: (read codes (oriented), ref codes, strand, pos, lo, hi, w). All items share one
    reference array (the first one's)."""
    reads = []
    for it in items:
        r = np.asarray(it[0], np.uint8)
        if it[2]:                                 # store the reverse complement: the kernel's rc view is r
            r = reverse_complement_batch(r, np.array([0, r.size], np.int64))
        reads.append(r)
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    rc = np.concatenate(reads) if reads else np.zeros(0, np.uint8)
    args = (rc, reverse_complement_batch(rc, off), off, items[0][1], np.arange(len(items), dtype=np.int32),
            np.array([it[2] for it in items], np.int8), np.array([it[3] for it in items], np.int64),
            np.array([it[4] for it in items], np.int64), np.array([it[5] for it in items], np.int64),
            np.array([it[6] for it in items], np.int32))
    P = ka.make_params(**kw)
    if threads:
        old = numba.get_num_threads()
        numba.set_num_threads(threads)
    try:
        out = ka.affine_align(*args, params=P)
        sc = ka.affine_scores(*args, params=P)
    finally:
        if threads:
            numba.set_num_threads(old)
    for a, b in zip(out[:6], sc):
        assert np.array_equal(a, b)
    res = []
    s, a, b, cl, cr, nm, cig, co = out
    for i in range(len(items)):
        if a[i] < 0:
            assert s[i] == ka.NO_SCORE and co[i] == co[i + 1]
            res.append(None)
        else:
            ops = [(int(x) & 15, int(x) >> 4) for x in cig[co[i]:co[i + 1]]]
            res.append((int(s[i]), int(a[i]), int(b[i]), int(cl[i]), int(cr[i]), int(nm[i]), ops))
    return res


def one(read, ref, pos, w, kw=DEFAULT, lo=0, hi=None, strand=0):
    r = codes(read) if isinstance(read, str) else read
    g = codes(ref) if isinstance(ref, str) else ref
    return run_batch([(r, g, strand, pos, lo, len(g) if hi is None else hi, w)], kw)[0]


def cig(res):
    return "".join(f"{n}{'MIDNS'[op]}" for op, n in res[6])


# ----------------------------------------------------------------------------- tests

def test_exact_vs_reference_random():
    """Every field equal to the banded Python reference, on simulated hits (indels, junk, N,
    contig ends) and unrelated pairs; with the band wide enough the unbanded optimum too."""
    rng = np.random.default_rng(11)
    ref, items = simulate(rng, 220)
    for _ in range(40):                           # unrelated read: random, mostly no alignment
        L = int(rng.integers(5, 40))
        p = int(rng.integers(0, 1500))
        items.append((rng.integers(0, 4, L).astype(np.uint8), ref, 0, p, (p // 400) * 400,
                      (p // 400 + 1) * 400, int(rng.integers(0, 10))))
    for kw in (DEFAULT, dict(DEFAULT, gap_open=5, gap_ext=2, gap_open_ins=3, gap_ext_ins=3, clip_left=3,
                                clip_right=8), dict(DEFAULT, clip_left=0, clip_right=0, min_score=8)):
        got = run_batch(items, kw)
        contained = 0
        for i, ((read, _, _, pos, lo, hi, w), res) in enumerate(zip(items, got)):
            exp = ref_align(read, ref, lo, hi, kw, pos, w)
            if exp is None:
                assert res is None
                continue
            assert res == exp[:7], (text(read), pos, lo, hi, w, res, exp[:7])
            check_alignment(res, read, ref, lo, hi, kw)
            if i % 2:                                 # (saves time in the pure-Python DPs)
                continue
            full = ref_align(read, ref, lo, hi, kw, pos)
            if all(abs(c - j - pos) <= w for j, c in full[7]):
                contained += 1
                assert full[:7] == exp[:7]
        assert contained > 30


def test_ungapped_shortcut_matches_the_dp():
    """Reads with 0 or 1 mismatch on their own diagonal (answered without the DP when provably
    optimal) inside tandem repeats, next to N and contig ends, under scorings where the shortcut
    must decline (cheap gaps, clip penalty <= mismatch): every field as the Python reference."""
    rng = np.random.default_rng(5)
    parts = []
    for period in (2, 3, 5, 8, 13):
        unit = rng.integers(0, 4, period)
        parts += [rng.integers(0, 4, 60), np.tile(unit, 120 // period + 1)[:120]]
    ref = np.concatenate(parts).astype(np.uint8)
    ref[rng.integers(0, ref.size, 6)] = 4
    items = []
    for _ in range(160):
        L = int(rng.integers(20, 60))
        p = int(rng.integers(0, ref.size - L))
        read = ref[p:p + L].copy()
        if rng.random() < 0.5:
            k = int(rng.integers(0, L))
            read[k] = (read[k] + int(rng.integers(1, 4))) % 4
        read[read == 4] = 0 if rng.random() < 0.5 else 4
        lo = 0 if rng.random() < 0.7 else max(0, p - int(rng.integers(0, 5)))
        items.append((read, ref, int(rng.integers(0, 2)), p, lo, ref.size, int(rng.integers(0, 17))))
    for kw in (DEFAULT, dict(DEFAULT, clip_left=4, clip_right=4), dict(DEFAULT, gap_open=2, gap_ext=1),
               dict(DEFAULT, min_score=45)):
        got = run_batch(items, kw)
        for (read, _, _, pos, lo, hi, w), res in zip(items, got):
            exp = ref_align(read, ref, lo, hi, kw, pos, w)
            assert res == (None if exp is None else exp[:7]), (text(read), pos, lo, hi, w, kw, res, exp)


def test_threads_and_long_cigars():
    """Thread count does not change results; CIGARs longer than the first-pass slot (16 ops)."""
    rng = np.random.default_rng(5)
    ref = rng.integers(0, 4, 3000).astype(np.uint8)
    items = []
    for t in range(30):
        p = 100 + 90 * t
        seg = list(ref[p:p + 240])
        for x in range(200, 0, -20):              # alternating 1-bp deletions and insertions
            if (x // 20) % 2:
                del seg[x]
            else:
                seg.insert(x, (seg[x] + 1) % 4)
        items.append((np.array(seg, np.uint8), ref, t % 2, p, 0, 3000, 8))
    a = run_batch(items, DEFAULT, threads=1)
    b = run_batch(items, DEFAULT, threads=2)
    assert a == b
    assert all(len(r[6]) > 16 for r in a)
    for (read, _, _, pos, lo, hi, w), res in zip(items, a):
        check_alignment(res, read, ref, lo, hi, DEFAULT)
        assert res[5] == 10 and res[3] == res[4] == 0


def test_large_batch_chunks_and_defaults():
    """Many parallel chunks, default params (params=None), 1 vs 2 threads; a sample against the
    reference."""
    rng = np.random.default_rng(21)
    ref, items = simulate(rng, 3000, lengths=(30, 60, 100))
    a = run_batch(items, DEFAULT, threads=1)
    b = run_batch(items, DEFAULT, threads=2)
    assert a == b
    reads = [it[0] for it in items]
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    rc = np.concatenate(reads)
    strand = np.zeros(len(items), np.int8)
    out = ka.affine_align(rc, reverse_complement_batch(rc, off), off, ref, np.arange(len(items)), strand,
                          [it[3] for it in items], [it[4] for it in items], [it[5] for it in items],
                          [it[6] for it in items])          # params=None, list inputs converted
    for i in range(0, len(items), 30):
        read, _, _, pos, lo, hi, w = items[i]
        exp = ref_align(read, ref, lo, hi, DEFAULT, pos, w)
        if exp is None:
            assert out[1][i] < 0
        else:
            ops = [(int(x) & 15, int(x) >> 4) for x in out[6][out[7][i]:out[7][i + 1]]]
            got = (int(out[0][i]), int(out[1][i]), int(out[2][i]), int(out[3][i]), int(out[4][i]),
                   int(out[5][i]), ops)
            assert got == exp[:7]


def _parasail_matrix(a, b):
    m = parasail.matrix_create("ACGTN", a, -b)
    for i in range(5):
        m.set_value(i, 4, -1)
        m.set_value(4, i, -1)
    return m


def _parasail_ops(res):
    import re
    return [(op, int(n)) for n, op in re.findall(r"(\d+)([=XMID])", res.cigar.decode.decode())]


def test_noclip_vs_parasail_sg():
    """Prohibitive clip penalties: the read is global, reference ends free = parasail sg_dx."""
    rng = np.random.default_rng(3)
    ref = rng.integers(0, 4, 5000).astype(np.uint8)
    m = _parasail_matrix(1, 4)
    items = []
    for _ in range(150):
        L = int(rng.choice([30, 80, 150]))
        p = int(rng.integers(50, 4800 - L))
        seg = list(ref[p:p + L])
        for _ in range(int(rng.poisson(0.04 * L))):
            i = int(rng.integers(0, L))
            seg[i] = (seg[i] + int(rng.integers(1, 4))) % 4
        for _ in range(int(rng.integers(0, 3))):
            k, i = int(rng.integers(1, 8)), int(rng.integers(8, len(seg) - 8))
            if rng.random() < 0.5:
                seg[i:i] = [int(x) for x in rng.integers(0, 4, k)]
            else:
                del seg[i:i + k]
        if rng.random() < 0.2:
            seg[int(rng.integers(0, len(seg)))] = 4
        lo, hi = p - 30, p + L + 30
        items.append((np.array(seg, np.uint8), ref, int(rng.integers(0, 2)), p, lo, hi, 10_000))
    got = run_batch(items, NOCLIP)
    terminal_ins = 0
    for (read, _, _, pos, lo, hi, w), res in zip(items, got):
        pr = parasail.sg_dx_trace_scan_32(text(read), text(ref[lo:hi]), 7, 1, m)
        pops = _parasail_ops(pr)
        while pops and pops[0][0] == "D":
            pops.pop(0)
        while pops and pops[-1][0] == "D":
            pops.pop()
        assert res is not None and res[3] == res[4] == 0
        assert res[0] <= pr.score
        if pops[0][0] == "I" or pops[-1][0] == "I":   # parasail may end on an insertion; we never do
            terminal_ins += 1
        else:
            assert res[0] == pr.score, (text(read), res, pr.cigar.decode)
        check_alignment(res, read, ref, lo, hi, NOCLIP)
    assert terminal_ins <= 3


def test_local_vs_parasail_sw():
    """Clip penalties 0: the best local alignment of the read in the window = parasail sw."""
    rng = np.random.default_rng(4)
    ref, items = simulate(rng, 200, lengths=(30, 60, 100), contig=1000)
    items = [(r, g, s, p, lo, hi, 10_000) for r, g, s, p, lo, hi, w in items]
    m = _parasail_matrix(1, 4)
    got = run_batch(items, LOCAL)
    for (read, _, _, pos, lo, hi, w), res in zip(items, got):
        sw = parasail.sw_trace_scan_32(text(read), text(ref[lo:hi]), 7, 1, m).score
        if sw <= 0:
            assert res is None
        else:
            assert res[0] == sw
            check_alignment(res, read, ref, lo, hi, LOCAL)


def leftmost_gap(longer, shorter, K):
    """Smallest i with longer[:i] + longer[i + K:] == shorter (the left-aligned gap start)."""
    return min(i for i in range(len(shorter) + 1) if longer[:i] + longer[i + K:] == shorter)


def test_left_alignment_homopolymer_and_repeats():
    rng = np.random.default_rng(12)
    kw = dict(DEFAULT, clip_left=100, clip_right=100, min_score=-1000)   # gaps near the ends: no clips
    checked = 0
    for unit in ("A", "T", "CA", "GTC", "AGGT", "ACACG"):
        for reps in (2, 3, 6):
            for _ in range(3):
                fl = "".join("ACGT"[x] for x in rng.integers(0, 4, 14))
                fr = "".join("ACGT"[x] for x in rng.integers(0, 4, 16))
                core = fl + unit * reps + fr
                refseq = "CCTTG" + core + "GGATC"
                for k in range(1, reps + 1):
                    K = k * len(unit)
                    if K > 12:                        # longer: other alignments can tie
                        continue
                    gap = -(6 + K)
                    for strand in (0, 1):
                        r_del = fl + unit * (reps - k) + fr
                        res = one(r_del, refseq, 5, 32, kw=kw, strand=strand)
                        i = leftmost_gap(core, r_del, K)
                        if 3 <= i <= len(r_del) - 3:    # a gap this close to an end is not an indel
                            assert res[0] >= len(r_del) + gap
                            if res[0] == len(r_del) + gap:   # the gap is optimal: left-aligned
                                checked += 1
                                assert cig(res) == f"{i}M{K}D{len(r_del) - i}M", (core, r_del)
                                assert res[1] == 5 and res[5] == K
                        r_ins = fl + unit * (reps + k) + fr
                        res = one(r_ins, refseq, 5, 32, kw=kw, strand=strand)
                        i = leftmost_gap(r_ins, core, K)
                        if 3 <= i <= len(core) - 3:
                            assert res[0] >= len(core) + gap
                            if res[0] == len(core) + gap:
                                checked += 1
                                assert cig(res) == f"{i}M{K}I{len(core) - i}M", (core, r_ins)
                                assert res[1] == 5 and res[5] == K
    assert checked > 250
    # a deletion in a homopolymer starts at the run's first base
    refseq = "ACGTGCTAGCTAG" + "TTTTTT" + "CAGTCAGGACTTAGC"
    read = "ACGTGCTAGCTAG" + "TTTT" + "CAGTCAGGACTTAGC"
    for strand in (0, 1):
        res = one(read, refseq, 0, 5, strand=strand)
        assert cig(res) == "13M2D19M"


def test_mismatch_next_to_gap_goes_right():
    # read base X could pair before or after the gap with the same score: gap placed left
    refseq = "GATCCGTAGCTTAGGCAT" + "CGA" + "TTGACCGTAGTCAAGCT"
    read = "GATCCGTAGCTTAGGCAT" + "G" + "TTGACCGTAGTCAAGCT"
    res = one(read, refseq, 0, 5)
    check_alignment(res, codes(read), codes(refseq), 0, len(refseq), DEFAULT)
    assert cig(res) == "18M2D18M"


def test_overhanging_contig_ends_are_clipped():
    rng = np.random.default_rng(9)
    contig = "".join("ACGT"[x] for x in rng.integers(0, 4, 200))
    whole = "GGGGGGGGGG" + contig + "CCCCCCCCCC"       # neighbouring contigs
    lo, hi = 10, 210
    # left overhang: 7 bases before the contig start (they even match the neighbour)
    read = whole[3:10] + contig[:60]
    res = one(read, whole, 3, 10, lo=lo, hi=hi)
    assert res[3] == 7 and res[1] == lo and cig(res) == "7S60M"
    # right overhang
    read = contig[-50:] + whole[210:219]
    res = one(read, whole, 160, 10, lo=lo, hi=hi)
    assert res[4] == 9 and res[2] == hi and cig(res) == "50M9S"
    # with prohibitive clip penalties the overhang is inserted before a last aligned base (the
    # objective says so), never left as a trailing insertion
    res = one(read, whole, 160, 10, kw=NOCLIP, lo=lo, hi=hi)
    assert res[6][-1][0] == 0 and res[2] <= hi and res[3] == res[4] == 0
    # candidate entirely outside its contig: no alignment
    assert one(contig[:30], whole, 300, 5, lo=lo, hi=hi) is None


def test_adapter_clipping():
    rng = np.random.default_rng(2)
    refseq = "".join("ACGT"[x] for x in rng.integers(0, 4, 300))
    adapter = "AGATCGGAAGAGCACACGTC"
    read = refseq[100:180] + adapter
    res = one(read, refseq, 100, 10)
    check_alignment(res, codes(read), codes(refseq), 0, 300, DEFAULT)
    assert res[6][-1][0] == 4 and res[6][-1][1] >= 10 and res[1] == 100 and res[0] >= 80
    read = adapter + refseq[100:180]
    res = one(read, refseq, 100 - len(adapter), 25)
    check_alignment(res, codes(read), codes(refseq), 0, 300, DEFAULT)
    assert res[6][0][0] == 4 and res[6][0][1] >= 10 and res[2] == 180 and res[0] >= 80
    # a poor tail: 6 bases with 3 mismatches (+3 - 12 < -5) is clipped
    tail = list(refseq[180:186])
    for i in (0, 2, 4):
        tail[i] = "ACGT"[("ACGT".index(tail[i]) + 1) % 4]
    read = refseq[100:180] + "".join(tail)
    res = one(read, refseq, 100, 10)
    assert cig(res) == "80M6S" and res[0] == 80 and res[2] == 180 and res[4] == 6


def test_clip_tie_prefers_no_clipping():
    # last base mismatches: 1M would give -4, clipping 1 base costs clip_right = 4 -> tie: not clipped
    refseq = "TTTTACGATCGGATCCATGCAGTTTT"
    read = "ACGATCGGATCCATGCAGC"
    kw = dict(DEFAULT, clip_right=4)
    res = one(read, refseq, 4, 3, kw=kw)
    assert cig(res) == "19M" and res[0] == 18 - 4 and res[5] == 1
    kw = dict(DEFAULT, clip_right=3)
    res = one(read, refseq, 4, 3, kw=kw)
    assert cig(res) == "18M1S" and res[0] == 18


def test_n_handling():
    refseq = "GGGG" + "ACGTACGGTCAGTNCATG" + "GGGG"
    read = "ACGTANGGTCAGTACATG"                   # N in the read, N in the reference
    res = one(read, refseq, 4, 3)
    assert cig(res) == "18M" and res[0] == 16 - 2 and res[5] == 2
    res = one("NNNNNNNNNN", refseq, 4, 3, kw=dict(DEFAULT, min_score=-100))
    # one N aligned and one end clipped (objective -1 - 5) beats 10 aligned Ns (-10); ties between the
    # two ends go to the longer alignment prefix (the right end is kept)
    assert res[0] == -1 and res[5] == 1 and cig(res) == "9S1M" and res[1:3] == (13, 14)
    res = one("NNNNNNNNNN", refseq, 4, 3, kw=dict(DEFAULT, min_score=-100, clip_left=50, clip_right=50))
    assert res[0] == -10 and res[5] == 10 and cig(res) == "10M"
    assert one("NNNNNNNNNN", refseq, 4, 3) is None


def test_empty_short_reads_and_min_score():
    refseq = "ACGTTGCAAGCTTGCA"
    assert one("", refseq, 3, 3) is None
    res = one("G", refseq, 2, 2)
    assert res[0] == 1 and cig(res) == "1M" and res[1] == 2
    res = one("C", refseq, 2, 0)                  # no C within the band: a lone mismatch is < 1
    assert res is None
    rng = np.random.default_rng(8)
    ref, items = simulate(rng, 120, lengths=(40, 60))
    a = run_batch(items, DEFAULT)
    b = run_batch(items, dict(DEFAULT, min_score=30))
    for x, y in zip(a, b):
        assert y == (x if x is not None and x[0] >= 30 else None)


def test_negative_band_and_empty_batch():
    assert one("ACGT", "ACGTACGT", 0, -1) is None
    s, a, b, cl, cr, nm, cg, co = ka.affine_align(np.zeros(0, np.uint8), np.zeros(0, np.uint8),
                                                   np.zeros(1, np.int64), codes("ACGT"),
                                                   np.zeros(0, np.int32), np.zeros(0, np.int8),
                                                   np.zeros(0, np.int64), np.zeros(0, np.int64),
                                                   np.zeros(0, np.int64), np.zeros(0, np.int32))
    assert s.size == 0 and cg.size == 0 and co.tolist() == [0]


def test_params_validation():
    with pytest.raises(ValueError):
        ka.make_params(mismatch=-4)


def test_per_candidate_minimum_score():
    """min_score per candidate gives, candidate by candidate, what a run with that minimum in the
    parameters gives (the mapper raises it for a read's further candidates once one scores well)."""
    rng = np.random.default_rng(9)
    ref, items = simulate(rng, 120)
    P = ka.make_params()
    mins = rng.choice([1, 25, 40, 60], len(items)).astype(np.int64)
    reads = []
    for it in items:
        r = np.asarray(it[0], np.uint8)
        if it[2]:
            r = reverse_complement_batch(r, np.array([0, r.size], np.int64))
        reads.append(r)
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    rc = np.concatenate(reads)
    args = (rc, reverse_complement_batch(rc, off), off, ref, np.arange(len(items), dtype=np.int32),
            np.array([it[2] for it in items], np.int8), np.array([it[3] for it in items], np.int64),
            np.array([it[4] for it in items], np.int64), np.array([it[5] for it in items], np.int64),
            np.array([it[6] for it in items], np.int32))
    got = ka.affine_align(*args, params=P, min_score=mins)
    for m in np.unique(mins):
        exp = ka.affine_align(*args, params=ka.make_params(min_score=int(m)))
        sel = np.flatnonzero(mins == m)
        for a, b in zip(got[:6], exp[:6]):
            assert np.array_equal(a[sel], b[sel])
    assert (got[1] < 0).sum() > (ka.affine_align(*args, params=P)[1] < 0).sum()


def test_qgram_bound_skips_only_hopeless_candidates():
    """Candidates on diverged copies of a repeat with a raised minimum score: the q-gram bound
    (kernels.affine._hopeless) skips many of them, and every result equals the DP's own."""
    rng = np.random.default_rng(31)
    unit = rng.integers(0, 4, 400).astype(np.uint8)
    parts, starts = [], []
    for div in np.linspace(0.0, 0.25, 24):
        parts.append(rng.integers(0, 4, 300).astype(np.uint8))
        copy = unit.copy()
        k = rng.random(copy.size) < div
        copy[k] = (copy[k] + rng.integers(1, 4, int(k.sum()))) % 4
        starts.append(sum(p.size for p in parts))
        parts.append(copy)
    ref = np.concatenate(parts + [rng.integers(0, 4, 300).astype(np.uint8)])
    items, mins = [], []
    for r0 in range(0, 240, 30):                    # reads of 150 bases from the first (exact) copy
        read = ref[starts[0] + r0:starts[0] + r0 + 150].copy()
        for s in starts:                            # a candidate on every copy
            for m in (1, 60, 100, 130):
                items.append((read, ref, 0, s + r0 + int(rng.integers(-3, 4)), 0, ref.size, 16))
                mins.append(m)
    mins = np.array(mins, np.int64)
    P = ka.make_params()
    reads = [np.asarray(it[0], np.uint8) for it in items]
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    rc = np.concatenate(reads)
    args = (rc, reverse_complement_batch(rc, off), off, ref, np.arange(len(items), dtype=np.int32),
            np.zeros(len(items), np.int8), np.array([it[3] for it in items], np.int64),
            np.zeros(len(items), np.int64), np.full(len(items), ref.size, np.int64), np.full(len(items), 16, np.int32))
    got = ka.affine_align(*args, params=P, min_score=mins)
    for m in np.unique(mins):
        exp = ka.affine_align(*args, params=ka.make_params(min_score=int(m)))
        sel = np.flatnonzero(mins == m)
        for a, b in zip(got, exp):
            if a.shape == b.shape and a.shape[0] == len(items):
                assert np.array_equal(a[sel], b[sel])
    bits = np.zeros(1 << (2 * ka.Q - 6), np.uint64)
    skipped = sum(ka._hopeless(rc, off[i], 150, ref, args[6][i], 0, ref.size, 16, P, mins[i], bits)
                  for i in range(len(items)) if mins[i] > 1)
    assert skipped > len(items) // 8 and not bits.any()
    full = ka.affine_align(*args, params=P)
    assert all(full[0][i] < mins[i] for i in range(len(items))
               if mins[i] > 1 and ka._hopeless(rc, off[i], 150, ref, args[6][i], 0, ref.size, 16, P, mins[i], bits))


@numba.njit
def _one_by_one(read_codes, rc_codes, off, ref, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P):
    """Every candidate through the ungapped shortcut, else the one-candidate DP (as the GPU runs them):
    7 values and CIGAR each."""
    n = c_read.shape[0]
    maxl, maxb = ka._scratch_dims(off, c_read, c_pos, c_lo, c_hi, c_band)
    H, F, G, X, GC, Y, dirs, rev, out = ka._scratch(maxl, maxb)
    vals = np.empty((n, 7), np.int64)
    cigars = np.zeros((n, 2 * maxl + 3), np.uint32)
    for i in range(n):
        ra = np.int64(off[c_read[i]])
        L = np.int64(off[c_read[i] + 1]) - ra
        read = rc_codes if c_strand[i] != 0 else read_codes
        pos, lo, hi, w = np.int64(c_pos[i]), np.int64(c_lo[i]), np.int64(c_hi[i]), np.int64(c_band[i])
        res = ka._shortcut(read, ra, L, ref, pos, lo, hi, w, P, c_min[i], out)
        if res[0] == ka.NO_SCORE:
            res = ka._align_one(read, ra, L, ref, pos, lo, hi, w, P, c_min[i], H, F, G, X, GC, Y, dirs, rev, out)
        for t in range(7):
            vals[i, t] = res[t]
        for t in range(res[6]):
            cigars[i, t] = out[t]
    return vals, cigars


def test_lanes_equal_one_by_one():
    """Candidates aligned side by side in int16 SIMD lanes (groups of the same read length and band,
    contig ends inside a group, N, adapter junk, raised minimum scores, a positive N score, reads of
    1024 bases, where the lanes' int16 range ends at the default scoring) give exactly what each gives
    alone; scorings the lanes cannot hold go one by one. Most candidates here do go through lanes
    (checked)."""
    rng = np.random.default_rng(17)
    ref, items = simulate(rng, 1500, lengths=(50, 150))
    items = [(r, g, s, p, lo, hi, int(rng.choice([6, 16]))) for r, g, s, p, lo, hi, _ in items]
    big = rng.integers(0, 4, 2000).astype(np.uint8)   # reads of 1024 bases, two mismatches (no shortcut)
    long_read = big[100:1124].copy()
    long_read[[300, 700]] = (long_read[[300, 700]] + 1) % 4
    items += [(long_read, big, 0, 100 + int(rng.integers(-2, 3)), 0, big.size, 4) for _ in range(8)]
    reads = [np.asarray(it[0], np.uint8) for it in items]
    refs = [it[1] for it in items]
    base = np.concatenate([ref, big])
    shift = np.array([0 if g is ref else ref.size for g in refs], np.int64)
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    rc = np.concatenate(reads)
    args = (rc, reverse_complement_batch(rc, off), off, base, np.arange(len(items), dtype=np.int32),
            np.array([it[2] for it in items], np.int8), np.array([it[3] for it in items], np.int64) + shift,
            np.array([it[4] for it in items], np.int64) + shift, np.array([it[5] for it in items], np.int64) + shift,
            np.array([it[6] for it in items], np.int32))
    mins = rng.choice([1, 1, 40, 100], len(items)).astype(np.int64)
    for kw, fits in ((DEFAULT, True), (dict(DEFAULT, gap_open=5, gap_ext=2, gap_open_ins=3, gap_ext_ins=3,
                                                clip_left=3, clip_right=8), True),
                     (LOCAL, True), (dict(DEFAULT, n_score=1), True), (dict(DEFAULT, clip_left=2000), False)):
        P = ka.make_params(**kw)
        for c_min in (np.full(len(items), P[ka.P_MIN], np.int64), np.maximum(mins, P[ka.P_MIN])):
            got = ka._affine_batch(*ka._prep(*args), c_min, P, True)
            vals, cigars = _one_by_one(*ka._prep(*args), c_min, P)
            for t, a in enumerate(got[:6]):
                assert np.array_equal(a, vals[:, t]), (kw, t)
            co = got[7]
            assert np.array_equal(np.diff(co), vals[:, 6])
            for i in range(len(items)):
                assert np.array_equal(got[6][co[i]:co[i + 1]], cigars[i, :vals[i, 6]]), (kw, i)
            assert (vals[-8:, 0] == 1014).all()
        a = ka._prep(*args)
        sizes = ka._lane_groups(a[2], a[4], *a[6:10], P, np.arange(len(items)))[2]
        assert (sizes.sum() > 0.6 * len(items)) == fits, (kw, sizes.sum())
