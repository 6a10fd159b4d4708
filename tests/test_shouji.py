"""Shouji filter: Numba kernel == a step-by-step Python transcription of the authors' C code
(CMU-SAFARI/Shouji, CPU_Implementation/Shouji.c), hand-derived cases, no false rejects vs Edlib,
the `undefined` option (accept / compare the raw characters like the C code) on pairs with N."""
import edlib
import numpy as np
import pytest

from pymap.kernels.encoding import ASCII_TO_CODE, N_CODE
from pymap.kernels.shouji import shouji_batch
from pymap.plugins import PluginError, create


# --------------------------------------------------------------------------------------------
# (a) Reference model: the authors' Shouji() transcribed statement by statement (debug output
# and commented-out code left out). It works on the raw characters like the C code (bytes compared
# with ==/!= like the C chars: 'N' == 'N', 'N' != 'A', 'a' != 'A'), and returns
# (accepted, the count the C code compares with E); for the shifted-diagonal early accept that
# count is "matches >= L - E", reported as L - matches.
# --------------------------------------------------------------------------------------------
def shouji_reference(read, ref, E, grid):
    L = len(read)
    ReadSeq, RefSeq = read, ref
    HammingMask = [None] * ((2 * E + 1) * L)
    count = 0
    for n in range(L - 1, -1, -1):
        if ReadSeq[n] != RefSeq[n]:
            HammingMask[n] = 1
            count += 1
        else:
            HammingMask[n] = 0
    if count <= E:
        return True, count
    if E == 0:
        return (count <= E), (count if count <= E else -1)
    # E > 0
    for e in range(1, E + 1):
        ii = e * L
        dd = ii + E * L
        for i0 in range(e - 1, -1, -1):
            HammingMask[ii + i0] = 1                    # deletion: shifted-in columns
            HammingMask[dd + (L - i0) - 1] = 1          # insertion: shifted-out columns
        count = 0
        for n in range(L - e - 1, -1, -1):
            if ReadSeq[n] != RefSeq[n + e]:
                HammingMask[ii + n + e] = 1
            else:
                HammingMask[ii + n + e] = 0
                count += 1
        if count >= L - E:
            return True, L - count
        count = 0
        for n in range(L - e - 1, -1, -1):
            if ReadSeq[n + e] != RefSeq[n]:
                HammingMask[dd + n] = 1
            else:
                HammingMask[dd + n] = 0
                count += 1
        if count >= L - E:
            return True, L - count

    def hm(index):
        # the C code may read one element past a row (or the array) in a tie test whose outcome
        # does not depend on it; any value works, use 1
        return HammingMask[index] if index < len(HammingMask) else 1

    ShoujiMask = [HammingMask[i0] for i0 in range(L)]
    d0 = 2 * E + 1
    for GridIndex in range(L):
        if GridIndex <= L - grid:
            MaxZeros = 0
            MaxZerosIndex = 0
            for i in range(d0):
                count = 0
                for i1 in range(grid):
                    if HammingMask[i * L + GridIndex + i1] == 0:
                        count += 1
                if count > MaxZeros:
                    MaxZeros = count
                    MaxZerosIndex = i
                elif count == MaxZeros:
                    b0 = hm(i * L + GridIndex) == 0
                    if b0 and hm(i * L + GridIndex + 1) == 0 and hm(i * L + GridIndex + 2) == 0:
                        MaxZerosIndex = i
                    elif b0 and hm(i * L + GridIndex + 1) == 0:
                        MaxZerosIndex = i
                    elif b0:
                        MaxZerosIndex = i
            MagnetCount = 0
            for i0 in range(grid):
                if ShoujiMask[GridIndex + i0] == 0:
                    MagnetCount += 1
            if MaxZeros > MagnetCount:
                for i0 in range(grid):
                    ShoujiMask[GridIndex + i0] = HammingMask[MaxZerosIndex * L + GridIndex + i0]
        elif GridIndex <= L - 3:
            MaxZeros = 0
            MaxZerosIndex = 0
            for i in range(d0):
                count = 0
                for i1 in range(L - GridIndex):
                    if HammingMask[i * L + GridIndex + i1] == 0:
                        count += 1
                if count > MaxZeros:
                    MaxZeros = count
                    MaxZerosIndex = i
                elif count == MaxZeros:
                    if (HammingMask[i * L + GridIndex] == 0 and HammingMask[i * L + GridIndex + 1] == 0
                            and HammingMask[MaxZerosIndex * L + GridIndex] == 1):
                        MaxZerosIndex = i
                    elif (HammingMask[i * L + GridIndex] == 0
                          and HammingMask[MaxZerosIndex * L + GridIndex] == 1):
                        MaxZerosIndex = i
            MagnetCount = 0
            for i0 in range(L - GridIndex):
                if ShoujiMask[GridIndex + i0] == 0:
                    MagnetCount += 1
            if MaxZeros > MagnetCount:
                for i0 in range(L - GridIndex):
                    ShoujiMask[GridIndex + i0] = HammingMask[MaxZerosIndex * L + GridIndex + i0]
        count = 0
        n = 0
        while n < GridIndex:                            # for (n = 0; n < GridIndex; n++)
            if ShoujiMask[n] == 1 and ShoujiMask[n + 1] == 1:
                count += 1
                n += 1
            elif ShoujiMask[n] == 1:
                count += 1
            n += 1
        if count > E:
            return False, -1
    count = 0
    n = 0
    padded = ShoujiMask + [1]                           # C reads ShoujiMask[L]; the count is the same
    while n < L:
        if padded[n] == 1 and padded[n + 1] == 1:
            count += 1
            n += 1
        elif padded[n] == 1:
            count += 1
        n += 1
    if count <= E:
        return True, count
    return False, -1


# --------------------------------------------------------------------------------------------
BASES = np.frombuffer(b"ACGT", np.uint8)


def _mutate(rng, seq, n_edits, near_ends):
    s = bytearray(seq)
    for _ in range(n_edits):
        if near_ends and rng.random() < 0.6:
            off = int(rng.integers(0, 4))
            pos = off if rng.random() < 0.5 else len(s) - 1 - off
        else:
            pos = int(rng.integers(0, len(s)))
        t = rng.random()
        if t < 0.5:
            s[pos] = b"ACGT"[(b"ACGT".index(s[pos]) + int(rng.integers(1, 4))) % 4]
        elif t < 0.75:
            s.insert(pos, int(BASES[rng.integers(0, 4)]))
        else:
            del s[pos]
    return bytes(s)


def random_pairs(rng, L, n):
    """(reads, refs) uint8 (n, L): mutated pairs (subs/indels, some near the ends, some low
    complexity so diagonals tie), identical pairs and unrelated random pairs."""
    reads, refs = [], []
    for _ in range(n):
        k = rng.random()
        if k < 0.3:
            src = BASES[rng.integers(0, 2, L + 20)].tobytes()
        elif k < 0.4:
            unit = BASES[rng.integers(0, 4, int(rng.integers(1, 5)))].tobytes()
            src = (unit * (L + 20))[:L + 20]
        else:
            src = BASES[rng.integers(0, 4, L + 20)].tobytes()
        kind = rng.random()
        if kind < 0.05:
            a, b = src[:L], src[:L]
        elif kind < 0.1:
            a, b = BASES[rng.integers(0, 4, L)].tobytes(), src[:L]
        else:
            a = _mutate(rng, src, int(rng.integers(1, max(2, L // 7))), rng.random() < 0.5)
            b = src
            if rng.random() < 0.5:                     # keep the read ends aligned at the start or the end
                a, b = a[:L], b[:L]
            else:
                a, b = a[-L:], b[-L:]
            if rng.random() < 0.5:
                a, b = b, a
        reads.append(a)
        refs.append(b)
    return (np.frombuffer(b"".join(reads), np.uint8).reshape(n, L).copy(),
            np.frombuffer(b"".join(refs), np.uint8).reshape(n, L).copy())


def sprinkle(rng, reads, refs, share=0.7):
    """Copies of (reads, refs) with characters other than ACGT put into `share` of the pairs: N
    alone, N opposite N on the main or a shifted diagonal (so N meets N), runs of N, lower-case
    letters, IUPAC codes and other bytes, and a few pairs that are all N on one or both sides."""
    reads, refs = reads.copy(), refs.copy()
    n, L = reads.shape
    others = np.frombuffer(b"RYKMSWBDHVnx.-*", np.uint8)
    for i in range(n):
        if rng.random() >= share:
            continue
        if rng.random() < 0.04:
            refs[i] = ord("N")
            if rng.random() < 0.5:
                reads[i] = ord("N")
            continue
        for _ in range(int(rng.integers(1, 6))):
            side = reads if rng.random() < 0.5 else refs
            p = int(rng.integers(0, L))
            t = rng.random()
            if t < 0.3:
                side[i, p] = ord("N")
            elif t < 0.55:
                q = min(L - 1, max(0, p + int(rng.integers(-3, 4))))
                reads[i, p] = ord("N")
                refs[i, q] = ord("N")
            elif t < 0.7:
                side[i, p:p + int(rng.integers(2, 12))] = ord("N")
            elif t < 0.9:
                side[i, p] |= 0x20                     # lower case ('a', 'n', ...)
            else:
                side[i, p] = others[rng.integers(0, others.size)]
    return reads, refs


def is_undefined(read, ref):
    """The `accept` rule: a character other than A, C, G, T (either case) in the pair."""
    return bool((ASCII_TO_CODE[read] == N_CODE).any() or (ASCII_TO_CODE[ref] == N_CODE).any())


def _arr(*seqs):
    return np.frombuffer(b"".join(s.encode() if isinstance(s, str) else s for s in seqs),
                         np.uint8).reshape(len(seqs), -1).copy()


def run(read, ref, E, window=4, **opts):
    acc, est = create("filter", "shouji", window=window, **opts).filter_pairs(_arr(read), _arr(ref), E)
    return bool(acc[0]), int(est[0])


# --------------------------------------------------------------------------------------------
def test_kernel_equals_reference_model():
    rng = np.random.default_rng(2019)
    n_checked = 0
    for L in (50, 64, 100, 150, 200, 300):
        n = 160 if L <= 100 else 70
        reads, refs = random_pairs(rng, L, n)
        thresholds = sorted({0, 1, 2, L // 20, L // 10} | set(rng.integers(0, L // 10 + 1, 2).tolist()))
        windows = (4, 3, 7) if L <= 64 else (4,)
        for w in windows:
            for E in thresholds:
                acc, est = shouji_batch(reads, refs, E, w, False)
                for i in range(n):
                    ref_acc, ref_est = shouji_reference(reads[i].tobytes(), refs[i].tobytes(), E, w)
                    assert (bool(acc[i]), int(est[i])) == (ref_acc, ref_est), (L, E, w, i)
                    n_checked += 1
    assert n_checked > 5000


def test_undefined_options_equal_reference_model_on_pairs_with_n():
    # compare: the kernel equals the C transcription on the raw bytes of every pair; accept: pairs
    # with a non-ACGT character are accepted with -2, the others equal the model (case folded)
    rng = np.random.default_rng(2023)
    n_checked = n_undefined = n_differ = 0
    for L in (50, 100, 150):
        n = 120 if L <= 100 else 60
        reads, refs = sprinkle(rng, *random_pairs(rng, L, n))
        undefined = [is_undefined(reads[i], refs[i]) for i in range(n)]
        n_undefined += sum(undefined)
        thresholds = sorted({0, 1, 2, L // 20, L // 10} | set(rng.integers(0, L // 10 + 1, 2).tolist()))
        windows = (4, 3, 7) if L <= 50 else (4,)
        for w in windows:
            for E in thresholds:
                acc_c, est_c = shouji_batch(reads, refs, E, w, True)
                acc_a, est_a = shouji_batch(reads, refs, E, w, False)
                for i in range(n):
                    model = shouji_reference(reads[i].tobytes(), refs[i].tobytes(), E, w)
                    assert (bool(acc_c[i]), int(est_c[i])) == model, ("compare", L, E, w, i)
                    if undefined[i]:
                        expect = (True, -2)
                        n_differ += model != expect
                    else:
                        expect = shouji_reference(reads[i].tobytes().upper(), refs[i].tobytes().upper(), E, w)
                    assert (bool(acc_a[i]), int(est_a[i])) == expect, ("accept", L, E, w, i)
                    n_checked += 1
    assert n_checked > 2500 and n_undefined > 150
    assert n_differ > 500            # the two options do differ on pairs with N


def test_tail_window_tie_rule():
    # Found by cross-checking the kernel against the compiled authors' C code (window 7): the
    # tail-window tie-break (switch only when the current winner has a 1 at the column) decides.
    read = "TGGGCTTTAAGTGACAGAGGCGGCGTGGTCCTCTACTACAGGGAAGAGTTTCTGCTTCCGTCCC"
    ref = "TGGCTTTAAGTGACAGAGGCGGGGTGGTCCTCTACTACAGGGAAGAGTTTCTGCTTCGTCCGGT"
    assert shouji_reference(read.encode(), ref.encode(), 4, 7)[0] is True
    assert run(read, ref, 4, window=7)[0] is True


# (b) hand-derived cases on a period-4 sequence: its diagonals 1..3 never match by themselves
P = "ACGT" * 25                                          # L = 100


def sub(s, pos, new):
    return s[:pos] + new + s[pos + len(new):]


def test_identical_and_single_substitutions():
    assert run(P, P, 0) == (True, 0)
    for pos in (0, 1, 50, 98, 99):
        read = sub(P, pos, "T" if P[pos] != "T" else "A")
        assert run(read, P, 0) == (False, -1)
        assert run(read, P, 1) == (True, 1)                # Hamming count 1 <= E


def test_substitutions_at_both_ends():
    read = sub(sub(P, 0, "G"), 99, "A")                     # P[0] = A, P[99] = T
    assert run(read, P, 1) == (False, -1)                  # two isolated 1s -> 2 > 1
    assert run(read, P, 2) == (True, 2)                    # Hamming 2 <= 2


def test_runs_of_errors_count_pairs_once():
    # positions 40, 41 (A, C) -> G, T: no shifted diagonal matches there (checked by hand), so the
    # bit-vector stays the main diagonal ...0110...: '11' counts as one edit (Edlib says 2)
    two = sub(P, 40, "GT")
    assert edlib.align(two, P, mode="NW", task="distance")["editDistance"] == 2
    assert run(two, P, 0) == (False, -1)
    assert run(two, P, 1) == (True, 1)
    three = sub(P, 40, "GTT")                               # 111 -> 11 + 1 = 2 edits > 1
    assert run(three, P, 1) == (False, -1)
    pairs = sub(sub(P, 40, "GT"), 60, "GT")                 # 0110..0110 -> 2 edits > 1
    assert run(pairs, P, 1) == (False, -1)
    # (with E >= 2 a substituted base always matches some diagonal 2 or 3 of a period-4 sequence,
    # so larger hand cases would not stay on the main diagonal)
    apart = sub(sub(P, 40, "G"), 60, "G")                   # 1 ... 1 -> 2 edits
    assert run(apart, P, 1) == (False, -1)


def test_indels():
    # deletion of P[50] (then one base appended): deletion diagonal 1 matches from column 51 on;
    # the windows at G = 49, 50, ... copy it in, leaving ...0011000... -> 1 edit
    deleted = P[:50] + P[51:] + "A"
    assert run(deleted, P, 1) == (True, 1)
    assert run(deleted, P, 0) == (False, -1)
    # deletion of the first base: deletion diagonal 1 has L-1 matches -> early accept, estimate 1
    first = P[1:] + "A"
    assert run(first, P, 1) == (True, 1)
    # insertion at the very start: insertion diagonal 1 has L-1 matches
    ins = "T" + P[:-1]
    assert run(ins, P, 1) == (True, 1)
    # insertion of A before column 97 (Edlib: 2 = the insertion + the base pushed out): at G = 95
    # insertion diagonal 1 (zeros at 96..98) beats the bit-vector (0011) and is copied in as 1000,
    # so the final bits hold 1s at 95 and 99 -> 2 edits: rejected at E = 1
    end = P[:97] + "A" + P[97:99]
    assert run(end, P, 1) == (False, -1)


def test_undefined_and_case():
    acc, est = create("filter", "shouji").filter_pairs(_arr(sub(P, 10, "N"), P, P.lower()),
                                                      _arr(P, sub(P, 99, "N"), P), 0)
    assert acc.tolist() == [True, True, True]
    assert est.tolist() == [-2, -2, 0]


def test_compare_option_hand_cases():
    def cmp(read, ref, E):
        return run(read, ref, E, undefined="compare")
    n10 = sub(P, 10, "N")
    assert cmp(n10, n10, 0) == (True, 0)                   # N matches N
    assert cmp(n10, P, 0) == (False, -1)                   # N against a base is a mismatch
    assert cmp(n10, P, 1) == (True, 1)
    assert cmp(P, sub(P, 99, "N"), 1) == (True, 1)
    assert cmp("N" * 100, "N" * 100, 0) == (True, 0)
    assert cmp("N" * 100, P, 9) == (False, -1)
    assert cmp(P.lower(), P.lower(), 0) == (True, 0)
    assert cmp(P.lower(), P, 9) == (False, -1)             # case-sensitive like the C code
    assert cmp(sub(P, 40, "a"), P, 1) == (True, 1)
    assert cmp(sub(P, 40, "R"), sub(P, 40, "R"), 0) == (True, 0)
    # the shifted diagonals compare N too: the first base deleted (deletion diagonal 1 matches
    # columns 1..99), with N opposite N on that diagonal at column 50: still L-1 matches
    deleted = sub(P[1:] + "A", 49, "N")
    assert cmp(deleted, sub(P, 50, "N"), 1) == (True, 1)
    # accept (the default, and given explicitly) is unchanged: N pairs pass with -2, case folded
    for opts in ({}, {"undefined": "accept"}):
        assert run(n10, P, 0, **opts) == (True, -2)
        assert run(P.lower(), P, 0, **opts) == (True, 0)


def test_options_and_shapes():
    for bad in ("reject", "Accept", "", None, 1, True):
        with pytest.raises(ValueError, match=r"undefined.*'accept', 'compare'"):
            create("filter", "shouji", undefined=bad)
    assert create("filter", "shouji").undefined == "accept"
    assert create("filter", "shouji", undefined="compare").undefined == "compare"
    with pytest.raises(PluginError):
        create("filter", "shouji", window=0)
    with pytest.raises(PluginError):
        create("filter", "shouji", window="4")
    f = create("filter", "shouji")
    acc, est = f.filter_pairs(np.zeros((0, 100), np.uint8), np.zeros((0, 100), np.uint8), 3)
    assert acc.shape == (0,) and est.dtype == np.int32
    with pytest.raises(ValueError):
        f.filter_pairs(_arr(P), _arr(P[:-1] + "A", P), 1)


# (c) never rejects a pair within E edits (Edlib global distance)
def test_no_false_rejects_vs_edlib():
    rng = np.random.default_rng(7)
    f = create("filter", "shouji")
    for L in (50, 100, 150, 250):
        reads, refs = random_pairs(rng, L, 600)
        dist = np.array([edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance")
                         ["editDistance"] for i in range(len(reads))])
        for E in range(0, L // 10 + 1):
            acc, est = f.filter_pairs(reads, refs, E)
            false_rejects = np.flatnonzero((dist <= E) & ~acc)
            assert false_rejects.size == 0, (L, E, false_rejects[:5])
            assert np.all(est[acc] <= E)
            assert np.all(est[~acc] == -1)


def test_compare_no_false_rejects_vs_edlib():
    # Edlib compares raw bytes too (N == N, case-sensitive): `compare` never rejects a pair within E
    rng = np.random.default_rng(17)
    f = create("filter", "shouji", undefined="compare")
    for L in (50, 100, 150):
        reads, refs = sprinkle(rng, *random_pairs(rng, L, 300))
        dist = np.array([edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance")
                         ["editDistance"] for i in range(len(reads))])
        for E in range(0, L // 10 + 1):
            acc, est = f.filter_pairs(reads, refs, E)
            assert np.flatnonzero((dist <= E) & ~acc).size == 0, (L, E)
            assert np.all(est[acc] >= 0) and np.all(est[~acc] == -1)
