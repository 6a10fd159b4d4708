"""The parasail extender (pymap.extenders.parasail_extender) against the Numba affine kernel.

The plugin solves the kernel's problem (kernels/affine.py) by full DP over the candidate's window;
the kernel is run with lo/hi set to that window and a band covering all of it, so both see the same
problem. Claimed exact (asserted on every candidate, several scoring sets): found, score, and which
read ends are clipped. Not claimed: start, NM, CIGAR (parasail's traceback picks its own co-optimal
alignment: gap placement in repeats, clip length ties, end ties); asserted equal only where the
optimum is unique (single non-shiftable indel, spaced substitutions, clear adapter, overhang), and
every CIGAR is checked to be valid and to re-score to the reported score and NM.
"""
import numpy as np
import parasail
import pytest

from pymap import plugins
from pymap.batch import CandidateBatch, ReadBatch
from pymap.extenders.parasail_extender import ParasailExtender
from pymap.kernels import affine as ka
from pymap.kernels.encoding import reverse_complement_batch

CONTIG = 1000
N_CONTIGS = 4
ADAPTER = np.array(["ACGT".index(c) for c in "AGATCGGAAGAGCACACGTCTGAACTCCAGTCAC"], np.uint8)
SETS = [
    dict(min_score=1),                                                   # bwa-mem scores
    dict(match=2, mismatch=3, gap_open=5, gap_ext=2, clip="3,8", min_score=1),   # asymmetric clips
    dict(clip=0, min_score=1),                                           # local alignment
    dict(clip=(100, 100), min_score=1),                                  # no clipping pays
    dict(gap_open=0, gap_ext=3, clip=(9, 2), min_score=1),               # linear gaps
]


def kernel_params(ext):
    cl, cr = ext.clip
    return ka.make_params(match=ext.match, mismatch=ext.mismatch, gap_open=ext.gap_open, gap_ext=ext.gap_ext,
                          clip_left=cl, clip_right=cr, n_score=-1, min_score=ext.min_score)


# ----------------------------------------------------------------------------- batches

def rc(codes):
    codes = np.asarray(codes, np.uint8)
    return reverse_complement_batch(codes, np.array([0, codes.size], np.int64))


def make_batch(ref, items):
    """items: (oriented read codes, strand, pos, lo, hi, max_edits). A strand-1 read is stored as
    the reverse complement of its oriented codes (so that its rc view is the oriented read)."""
    stored = [rc(r) if s else np.asarray(r, np.uint8) for r, s, *_ in items]
    offsets = np.zeros(len(items) + 1, np.int64)
    offsets[1:] = np.cumsum([x.size for x in stored])
    codes = np.concatenate(stored) if stored else np.zeros(0, np.uint8)
    reads = ReadBatch(codes, offsets, np.zeros(0, np.uint8), np.zeros(len(items) + 1, np.int64),
                      np.zeros(0, np.uint8))
    col = lambda k, dt: np.array([it[k] for it in items], dt)   # noqa: E731
    return CandidateBatch(reads, ref, np.arange(len(items), dtype=np.int32), col(1, np.int8),
                          col(2, np.int64), col(3, np.int64), col(4, np.int64), col(5, np.int32))


def windows(cands, band):
    """The plugin's reference windows, computed here from their definition."""
    w = np.full(len(cands), band, np.int64) if band is not None else np.maximum(cands.max_edits, 16)
    L = cands.lengths
    return np.maximum(cands.lo, cands.pos - w), np.minimum(cands.hi, cands.pos + L + w), w


def run_kernel(cands, ext):
    """The kernel on the plugin's windows, band covering each whole window: a list of
    (score, start, nm, clip_left, clip_right, ops) or None."""
    w0, w1, w = windows(cands, ext.band)
    r = cands.reads
    band = (cands.lengths + w + 1).astype(np.int32)
    s, a, b, cl, cr, nm, cig, co = ka.affine_align(r.codes, r.rc_codes, r.offsets, cands.ref_codes,
                                                   cands.read, cands.strand, cands.pos, w0, w1, band,
                                                   kernel_params(ext))
    return [None if a[i] < 0 else (int(s[i]), int(a[i]), int(nm[i]), int(cl[i]), int(cr[i]),
                                   [int(x) for x in cig[co[i]:co[i + 1]]]) for i in range(len(cands))]


def oriented(cands, i):
    r = cands.reads
    a, b = r.offsets[cands.read[i]], r.offsets[cands.read[i] + 1]
    return (r.rc_codes if cands.strand[i] else r.codes)[a:b]


def rescore(ops, read, ref, start, ext):
    """(raw score, NM, read bases consumed, end) of BAM ops; checks the op structure."""
    kinds = [x & 15 for x in ops]
    lens = [x >> 4 for x in ops]
    assert ops and all(n > 0 for n in lens) and set(kinds) <= {0, 1, 2, 4}
    assert all(kinds[t] != kinds[t + 1] for t in range(len(ops) - 1)), "ops not merged"
    core = kinds[(1 if kinds[0] == 4 else 0):(len(kinds) - 1 if kinds[-1] == 4 else len(kinds))]
    assert core and core[0] == 0 and core[-1] == 0 and 4 not in core, f"bad op order {kinds}"
    j, q, s, nm = 0, start, 0, 0
    for op, n in zip(kinds, lens):
        if op == 4:
            j += n
        elif op == 0:
            a, b = read[j:j + n].astype(int), ref[q:q + n].astype(int)
            bad = (a >= 4) | (b >= 4)
            s += int(np.where(bad, -1, np.where(a == b, ext.match, -ext.mismatch)).sum())
            nm += int((bad | (a != b)).sum())
            j, q = j + n, q + n
        else:
            s -= ext.gap_open + n * ext.gap_ext
            nm += n
            j, q = (j + n, q) if op == 1 else (j, q + n)
    return s, nm, j, q


def clips(ops):
    return (ops[0] >> 4 if ops[0] & 15 == 4 else 0), (ops[-1] >> 4 if ops[-1] & 15 == 4 else 0)


def plugin_results(ext, cands):
    out = ext.extend(cands, traceback=True)
    plain = ext.extend(cands)                      # the score pass agrees with the traceback pass
    for f in ("found", "score", "edits", "start"):
        assert np.array_equal(getattr(plain, f)[plain.found], getattr(out, f)[out.found]), f
    assert np.array_equal(plain.found, out.found)
    co = out.cigar_offsets
    assert co.shape == (len(cands) + 1,) and co[0] == 0 and co[-1] == out.cigar.size
    assert np.all(np.diff(co) >= 0)
    res = []
    for i in range(len(cands)):
        if not out.found[i]:
            assert co[i] == co[i + 1]
            res.append(None)
            continue
        res.append((int(out.score[i]), int(out.start[i]), int(out.edits[i]),
                    [int(x) for x in out.cigar[co[i]:co[i + 1]]]))
    return res


def compare(ext, cands, unique=()):
    """Asserts the exact claims on every candidate; returns (found, CIGAR-equal) counts."""
    got = plugin_results(ext, cands)
    exp = run_kernel(cands, ext)
    w0, w1, _ = windows(cands, ext.band)
    cl, cr = ext.clip
    n_found = same = 0
    for i, (g, k) in enumerate(zip(got, exp)):
        assert (g is None) == (k is None), (i, g, k)
        if g is None:
            continue
        n_found += 1
        score, start, nm, ops = g
        read = oriented(cands, i)
        assert score == k[0] and score >= 1, (i, g, k)
        s, nm2, j, end = rescore(ops, read, cands.ref_codes, start, ext)
        assert (s, nm2, j) == (score, nm, read.size), (i, g)
        assert w0[i] <= start < end <= w1[i]
        lc, rc_ = clips(ops)
        assert (lc > 0, rc_ > 0) == (k[3] > 0, k[4] > 0), (i, g, k)   # same clip pattern: same objective
        if (start, nm, ops) == (k[1], k[2], k[5]):
            same += 1
        elif i in unique:
            raise AssertionError(f"candidate {i}: unique optimum, CIGAR differs: {g} vs kernel {k}")
    return n_found, same


# ----------------------------------------------------------------------------- simulation

def reference(rng):
    ref = rng.integers(0, 4, N_CONTIGS * CONTIG).astype(np.uint8)
    for _ in range(6):
        a = int(rng.integers(0, ref.size - 3))
        ref[a:a + int(rng.integers(1, 4))] = 4
    return ref


def simulate(rng, ref, n):
    """Reads from the reference: substitutions, 1-10 bp indels, N, adapter or random junk at either
    end, low-quality tails, overhangs past a contig end, either strand; plus unrelated reads."""
    items = []
    for t in range(n):
        c = int(rng.integers(0, N_CONTIGS))
        lo, hi = c * CONTIG, (c + 1) * CONTIG
        L = int(rng.choice([30, 50, 76, 101, 150]))
        e = int(rng.integers(2, 16))
        strand = int(rng.integers(0, 2))
        if t % 10 == 9:                            # unrelated read
            read = rng.integers(0, 4, L).astype(np.uint8)
            items.append((read, strand, int(rng.integers(lo, hi - L)), lo, hi, e))
            continue
        if rng.random() < 0.15:                    # overhang (the neighbouring contig, or random, beyond)
            p = lo - int(rng.integers(1, 15)) if rng.random() < 0.5 else hi - L + int(rng.integers(1, 15))
        else:
            p = int(rng.integers(lo, hi - L))
        seg = [int(ref[q]) if 0 <= q < ref.size else int(rng.integers(0, 4)) for q in range(p, p + L)]
        for _ in range(int(rng.poisson(0.02 * L))):
            i = int(rng.integers(0, len(seg)))
            seg[i] = (seg[i] + int(rng.integers(1, 4))) % 4
        shift = 0
        for _ in range(int(rng.choice([0, 0, 1, 1, 2]))):
            k, i = int(rng.integers(1, 11)), int(rng.integers(5, len(seg) - 5))
            if rng.random() < 0.5:
                seg[i:i] = [int(x) for x in rng.integers(0, 4, k)]
            else:
                del seg[i:i + k]
                shift += k
        if rng.random() < 0.1:
            seg[int(rng.integers(0, len(seg)))] = 4
        kind = rng.random()
        if kind < 0.15:                            # adapter read-through at the right end
            m = int(rng.integers(5, 30))
            seg = seg[:len(seg) - m] + [int(x) for x in ADAPTER[:m]]
        elif kind < 0.25:                          # junk at the left end (adapter, chimera)
            m = int(rng.integers(3, 25))
            seg = [int(x) for x in rng.integers(0, 4, m)] + seg[m:]
        elif kind < 0.4:                           # low-quality tail: a third of the bases wrong
            m = int(rng.integers(5, 30))
            for i in range(len(seg) - m, len(seg)):
                if rng.random() < 0.35:
                    seg[i] = 4 if rng.random() < 0.2 else (seg[i] + int(rng.integers(1, 4))) % 4
        jit = int(rng.integers(-3, 4))
        items.append((np.array(seg, np.uint8), strand, p + jit, lo, hi, max(e, shift)))
    return items


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("opts", SETS, ids=["default", "asym", "local", "noclip", "linear"])
def test_scores_equal_kernel(opts):
    rng = np.random.default_rng(17)
    ref = reference(rng)
    cands = make_batch(ref, simulate(rng, ref, 1000))
    ext = ParasailExtender(**opts)
    n_found, same = compare(ext, cands)
    assert n_found > 750
    assert same > 0.7 * n_found          # co-optimal alternatives are the exception, not the rule


def test_random_options_and_short_reads():
    """Random scoring (zeros included: free gaps, match 0, mismatch 0), reads of 1-12 bases on a
    low-complexity reference full of N (many ties), tiny windows and contigs."""
    rng = np.random.default_rng(41)
    ref = np.where(rng.random(400) < 0.85, rng.integers(0, 3, 400), rng.integers(0, 5, 400)).astype(np.uint8)
    long_ref = reference(rng)
    long_items = simulate(rng, long_ref, 40)
    for trial in range(40):
        items = []
        for _ in range(30):
            L = int(rng.integers(1, 13))
            lo = int(rng.integers(0, 300))
            hi = lo + int(rng.integers(1, 60))
            p = int(rng.integers(lo - 10, hi))
            read = ref[max(p, 0):max(p, 0) + L].copy() if rng.random() < 0.5 else rng.integers(0, 3, L)
            read = np.where(rng.random(read.size) < 0.2, rng.integers(0, 5, read.size), read).astype(np.uint8)
            items.append((read, int(rng.integers(0, 2)), p, lo, hi, int(rng.integers(0, 4))))
        opts = dict(match=int(rng.integers(0, 4)), mismatch=int(rng.integers(0, 7)),
                    gap_open=int(rng.integers(0, 9)), gap_ext=int(rng.integers(0, 4)),
                    clip=(int(rng.integers(0, 13)), int(rng.integers(0, 13))), min_score=1)
        compare(ParasailExtender(band=int(rng.integers(0, 5)), **opts), make_batch(ref, items))
        if trial % 4 == 0:
            band = None if trial % 8 else int(rng.integers(0, 30))
            compare(ParasailExtender(band=band, **opts), make_batch(long_ref, long_items))


def test_plain_parasail_modes_are_not_enough():
    """Why the plugin anchors read ends: on the simulated reads, the best of plain sg_dx (clipping
    nothing) and sw - clip_left - clip_right (clipping both) is not the kernel's score wherever the
    optimum clips one end; with prohibitive clip penalties plain sg_dx ends reads with insertions.
    The plugin's scores equal the kernel's on all of them (test_scores_equal_kernel)."""
    rng = np.random.default_rng(17)
    ref = reference(rng)
    cands = make_batch(ref, simulate(rng, ref, 400))
    w0, w1, _ = windows(cands, None)
    for opts, expect in ((dict(), 80), (dict(clip=100), 25)):
        ext = ParasailExtender(**opts)
        exp = run_kernel(cands, ext)
        m = parasail.matrix_create("ACGTN", ext.match, -ext.mismatch)
        for x in range(5):
            m.set_value(x, 4, -1)
            m.set_value(4, x, -1)
        o, e = ext.gap_open + ext.gap_ext, ext.gap_ext
        differ = 0
        for i, k in enumerate(exp):
            q = "".join("ACGTN"[x] for x in oriented(cands, i))
            t = "".join("ACGTN"[x] for x in ref[w0[i]:w1[i]])
            sg, sw = parasail.sg_dx_scan_32(q, t, o, e, m).score, parasail.sw_scan_32(q, t, o, e, m).score
            naive = sg if sg >= sw - sum(ext.clip) else sw
            differ += (naive if naive >= 1 else None) != (k[0] if k else None)
        assert differ >= expect, differ


def test_band_option_and_narrow_windows():
    rng = np.random.default_rng(5)
    ref = reference(rng)
    items = simulate(rng, ref, 200)
    for band in (0, 3, 40):
        ext = ParasailExtender(band=band)
        n_found, _ = compare(ext, make_batch(ref, items))
        assert n_found > 100
    # a candidate whose window lies outside its contig, and an empty read: not found
    cands = make_batch(ref, [(ref[10:40], 0, 2 * CONTIG + 50, 0, CONTIG, 5),
                             (np.zeros(0, np.uint8), 0, 100, 0, CONTIG, 5)])
    out = ParasailExtender().extend(cands, traceback=True)
    assert not out.found.any() and out.cigar.size == 0 and out.cigar_offsets.tolist() == [0, 0, 0]


def _shiftable_deletion(ref, a, k):
    return ref[a - 1] == ref[a + k - 1] or ref[a] == ref[a + k]


def test_unique_optima_same_cigar_as_kernel():
    """Single non-shiftable 1-10 bp indels away from the ends, spaced substitutions, clear adapters:
    one optimal alignment, so CIGAR, start and NM equal the kernel's, on both strands."""
    rng = np.random.default_rng(23)
    ref = reference(rng)
    ref[ref == 4] = 0
    items, expected = [], []
    while len(items) < 240:
        c = int(rng.integers(0, N_CONTIGS))
        lo, hi = c * CONTIG, (c + 1) * CONTIG
        L = int(rng.choice([60, 100, 150]))
        p = int(rng.integers(lo + 20, hi - L - 20))
        k, i = int(rng.integers(1, 11)), int(rng.integers(20, L - 20))
        strand = int(rng.integers(0, 2))
        kind = len(items) % 4
        seg = ref[p:p + L + k].copy()
        if kind == 0:                              # deletion of ref[p+i : p+i+k]
            if _shiftable_deletion(ref, p + i, k):
                continue
            read = np.concatenate([seg[:i], seg[i + k:L + k]])[:L]
            cig = [i << 4, k << 4 | 2, (L - i) << 4]
        elif kind == 1:                            # insertion of k random bases before read base i
            ins = rng.integers(0, 4, k).astype(np.uint8)
            if ins[-1] == ref[p + i - 1] or ins[0] == ref[p + i]:
                continue
            read = np.concatenate([seg[:i], ins, seg[i:L - k]])
            cig = [i << 4, k << 4 | 1, (L - k - i) << 4]
        elif kind == 2:                            # substitutions, none within 3 bases of an end
            read = seg[:L].copy()
            for x in rng.choice(np.arange(3, L - 3), size=int(rng.integers(1, 4)), replace=False):
                read[x] = (read[x] + int(rng.integers(1, 4))) % 4
            cig = [L << 4]
        else:                                      # adapter of m bases after L - m genomic bases
            m = int(rng.integers(8, 30))
            read = np.concatenate([seg[:L - m], ADAPTER[:m]])
            sub = np.where(read[L - m:] == ref[p + L - m:p + L], 1, -4)
            if np.cumsum(sub).max() >= 0 or sub.sum() >= -5:
                continue                           # extending the M into the adapter could tie
            cig = [(L - m) << 4, m << 4 | 4]
        items.append((read, strand, p + int(rng.integers(-3, 4)), lo, hi, 12))
        expected.append(cig)
    cands = make_batch(ref, items)
    ext = ParasailExtender()
    n_found, same = compare(ext, cands, unique=set(range(len(items))))
    assert n_found == same == len(items)
    got = plugin_results(ext, cands)
    for g, cig in zip(got, expected):
        assert g[3] == cig, (g, cig)


def test_overhang_and_adapter_examples():
    rng = np.random.default_rng(9)
    ref = rng.integers(0, 4, 3 * 200).astype(np.uint8)
    lo, hi = 200, 400                              # the middle contig
    contig = ref[lo:hi]
    items = [(np.concatenate([ref[lo - 7:lo], contig[:60]]), 0, lo - 7, lo, hi, 10),   # left overhang
             (np.concatenate([contig[-50:], ref[hi:hi + 9]]), 1, hi - 50, lo, hi, 10),   # right overhang
             (np.concatenate([contig[20:100], ADAPTER[:20]]), 0, lo + 20, lo, hi, 10),
             (np.concatenate([ADAPTER[:20], contig[20:100]]), 1, lo, lo, hi, 25)]
    cands = make_batch(ref, items)
    compare(ParasailExtender(), cands)
    got = plugin_results(ParasailExtender(), cands)
    txt = ["".join(f"{x >> 4}{'MIDNS'[x & 15]}" for x in g[3]) for g in got]
    assert txt[0] == "7S60M" and got[0][1] == lo and got[0][0] == 60
    assert txt[1] == "50M9S" and got[1][1] == hi - 50
    assert txt[2].startswith("80M") and txt[2].endswith("S") and got[2][1] == lo + 20
    assert txt[3].startswith("20S") or txt[3].startswith("19S")
    assert got[3][0] >= 80 - 1
    # the same overhangs with prohibitive clip penalties: aligned to the end, no trailing gap
    got = plugin_results(ParasailExtender(clip=1000), cands)
    assert all(not (g[3][0] & 15 == 4 or g[3][-1] & 15 == 4) for g in got)
    compare(ParasailExtender(clip=1000), cands)


def test_strand_one_uses_reverse_complement():
    rng = np.random.default_rng(4)
    ref = rng.integers(0, 4, CONTIG).astype(np.uint8)
    read = ref[300:400].copy()
    cands = make_batch(ref, [(read, 0, 300, 0, CONTIG, 5), (read, 1, 300, 0, CONTIG, 5)])
    # candidate 2: the forward read proposed on strand 1 (stored as given: its rc does not align)
    reads = ReadBatch(read.copy(), np.array([0, 100], np.int64), np.zeros(0, np.uint8),
                      np.zeros(2, np.int64), np.zeros(0, np.uint8))
    wrong = CandidateBatch(reads, ref, np.zeros(1, np.int32), np.ones(1, np.int8), np.array([300]),
                           np.zeros(1, np.int64), np.array([CONTIG]), np.array([5], np.int32))
    out = ParasailExtender().extend(cands, traceback=True)
    assert out.found.all() and out.score.tolist() == [100, 100] and out.start.tolist() == [300, 300]
    assert out.cigar.tolist() == [100 << 4, 100 << 4]
    got, exp = ParasailExtender().extend(wrong), run_kernel(wrong, ParasailExtender())
    assert bool(got.found[0]) == (exp[0] is not None)
    if got.found[0]:
        assert got.score[0] == exp[0][0] < 30


def test_subset_is_deterministic():
    rng = np.random.default_rng(31)
    ref = reference(rng)
    cands = make_batch(ref, simulate(rng, ref, 120))
    ext = ParasailExtender()
    full = ext.extend(cands)
    idx = np.flatnonzero(full.found)[::3]
    sub = ext.extend(cands.take(idx), traceback=True)
    assert sub.found.all()
    for f in ("score", "edits", "start"):
        assert np.array_equal(getattr(sub, f), getattr(full, f)[idx])


def test_registry_create_and_options():
    assert "parasail" in plugins.available("extender")
    assert plugins.load_class("extender", "parasail") is ParasailExtender
    ext = plugins.create("extender", "parasail", match=2, mismatch=5, gap_open=4, gap_ext=2, clip="3,8",
                         band=20)
    assert isinstance(ext, ParasailExtender) and ext.name == "parasail" and ext.scoring == "affine"
    settings = lambda x: (x.match, x.mismatch, x.gap_open, x.gap_ext, x.clip, x.band)   # noqa: E731
    assert settings(ext) == (2, 5, 4, 2, (3, 8), 20)
    d = plugins.create("extender", "parasail")
    assert settings(d) == (1, 4, 6, 1, (5, 5), None)
    assert plugins.create("extender", "parasail", clip=7).clip == (7, 7)
    assert plugins.create("extender", "parasail", clip=(2, 0)).clip == (2, 0)
    assert plugins.create("extender", "parasail", clip="4").clip == (4, 4)
    assert plugins.option_names(ParasailExtender) == {"match", "mismatch", "gap_open", "gap_ext", "clip",
                                                      "min_score", "band"}
    with pytest.raises(plugins.PluginError, match="no option 'width'"):
        plugins.create("extender", "parasail", width=3)
    for bad in (dict(clip="a,b"), dict(clip="1,2,3"), dict(clip=-1), dict(clip=(1,)), dict(band=-1),
                dict(match=True), dict(mismatch=-4), dict(gap_open=1.5), dict(gap_ext=5000)):
        with pytest.raises(plugins.PluginError, match=f"option '{next(iter(bad))}'"):
            plugins.create("extender", "parasail", **bad)


def test_empty_batch():
    ref = np.zeros(50, np.uint8)
    out = ParasailExtender().extend(make_batch(ref, []), traceback=True)
    assert len(out) == 0 and out.cigar.size == 0 and out.cigar_offsets.tolist() == [0]
