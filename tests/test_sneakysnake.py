"""SneakySnake filter: Numba kernel == a step-by-step Python transcription of the authors' C code
(CMU-SAFARI/SneakySnake, SneakySnake/SneakySnake.c), hand-derived cases, no false rejects vs Edlib,
the `undefined` option (accept / compare the raw characters like the C code) on pairs with N."""
import os
import subprocess
import sys

import edlib
import numpy as np
import pytest

from pymap.kernels.sneakysnake import sneakysnake_batch
from pymap.plugins import PluginError, create
try:
    from tests.test_shouji import P, _arr, is_undefined, random_pairs, sprinkle, sub
except ImportError:  # tests/ itself on sys.path (plain `pytest` with rootdir conftest)
    from test_shouji import P, _arr, is_undefined, random_pairs, sprinkle, sub


# --------------------------------------------------------------------------------------------
# (a) Reference model: the authors' SneakySnake() (DebugMode off) transcribed statement by
# statement; the gotos become flags/breaks. Returns (accepted, Edits) like the C code's state. It
# compares the raw characters like the C code ('N' == 'N', 'N' != 'A', 'a' != 'A').
# --------------------------------------------------------------------------------------------
def sneakysnake_reference(read, ref, EditThreshold, KmerSize, IterationNo):
    ReadLength = len(read)
    ReadSeq, RefSeq = read, ref
    Edits = 0
    for K in range(ReadLength // KmerSize):
        KmerStart = K * KmerSize
        if K < (ReadLength // KmerSize) - 1:
            KmerEnd = (K + 1) * KmerSize
        else:
            KmerEnd = ReadLength
        index = KmerStart
        roundsNo = 1
        while index < KmerEnd:
            GlobalCount = 0
            for n in range(index, KmerEnd):             # main diagonal
                if ReadSeq[n] != RefSeq[n]:
                    break                                # goto EXIT1
                GlobalCount += 1
            if GlobalCount == KmerEnd - KmerStart:
                break                                    # goto LOOP
            goto_loop = False
            for e in range(1, EditThreshold + 1):
                count = 0
                for n in range(index, KmerEnd):          # upper diagonals (deletion)
                    if n < e:
                        break                            # goto EXIT2
                    elif ReadSeq[n - e] != RefSeq[n]:
                        break
                    count += 1
                if count > GlobalCount:
                    GlobalCount = count
                if count == KmerEnd - KmerStart:
                    goto_loop = True
                    break
                count = 0
                for n in range(index, KmerEnd):          # lower diagonals (insertion)
                    if n > ReadLength - e - 1:
                        break                            # goto EXIT3
                    elif ReadSeq[n + e] != RefSeq[n]:
                        break
                    count += 1
                if count > GlobalCount:
                    GlobalCount = count
                if count == KmerEnd - KmerStart:
                    goto_loop = True
                    break
            if goto_loop:
                break
            index = index + GlobalCount
            if index < KmerEnd:
                Edits += 1
                index += 1
            if roundsNo > IterationNo:
                break                                    # goto LOOP
            roundsNo += 1
            if Edits > EditThreshold:
                return False, -1
        # LOOP:
        if Edits > EditThreshold:
            return False, -1
    return True, Edits


def run(read, ref, E, **opts):
    acc, est = create("filter", "sneakysnake", **opts).filter_pairs(_arr(read), _arr(ref), E)
    return bool(acc[0]), int(est[0])


def test_kernel_equals_reference_model():
    rng = np.random.default_rng(2020)
    n_checked = 0
    for L in (50, 64, 100, 150, 200, 300):
        n = 200 if L <= 100 else 120
        reads, refs = random_pairs(rng, L, n)
        thresholds = sorted({0, 1, 2, L // 20, L // 10} | set(rng.integers(0, L // 10 + 1, 2).tolist()))
        for E in thresholds:
            acc, est = sneakysnake_batch(reads, refs, E, 0, 0, False)  # the tool's short-read setting
            for i in range(n):
                expect = sneakysnake_reference(reads[i].tobytes(), refs[i].tobytes(), E, L, L)
                assert (bool(acc[i]), int(est[i])) == expect, (L, E, i)
                n_checked += 1
    assert n_checked > 5000


def test_partitions_and_iteration_limit_equal_reference_model():
    rng = np.random.default_rng(3)
    for L in (50, 101):
        reads, refs = random_pairs(rng, L, 150)
        for kmer, iters in ((L // 4, L), (10, 3), (L, 2), (7, 1), (L + 1, L)):
            for E in (0, 1, 3, L // 10):
                acc, est = sneakysnake_batch(reads, refs, E, kmer, iters, False)
                for i in range(len(reads)):
                    expect = sneakysnake_reference(reads[i].tobytes(), refs[i].tobytes(), E, kmer, iters)
                    assert (bool(acc[i]), int(est[i])) == expect, (L, kmer, iters, E, i)


def test_undefined_options_equal_reference_model_on_pairs_with_n():
    # compare: the kernel equals the C transcription on the raw bytes of every pair; accept: pairs
    # with a non-ACGT character are accepted with -2, the others equal the model (case folded)
    rng = np.random.default_rng(2024)
    n_checked = n_undefined = n_differ = 0
    for L, settings in ((50, ((0, 0), (12, 50), (10, 3), (7, 1), (51, 50))), (100, ((0, 0), (25, 2))),
                        (150, ((0, 0),))):
        n = 150 if L <= 100 else 80
        reads, refs = sprinkle(rng, *random_pairs(rng, L, n))
        undefined = [is_undefined(reads[i], refs[i]) for i in range(n)]
        n_undefined += sum(undefined)
        thresholds = sorted({0, 1, 2, L // 20, L // 10} | set(rng.integers(0, L // 10 + 1, 2).tolist()))
        for kmer, iters in settings:
            ks, it = kmer or L, iters or L
            for E in thresholds:
                acc_c, est_c = sneakysnake_batch(reads, refs, E, kmer, iters, True)
                acc_a, est_a = sneakysnake_batch(reads, refs, E, kmer, iters, False)
                for i in range(n):
                    model = sneakysnake_reference(reads[i].tobytes(), refs[i].tobytes(), E, ks, it)
                    assert (bool(acc_c[i]), int(est_c[i])) == model, ("compare", L, kmer, iters, E, i)
                    if undefined[i]:
                        expect = (True, -2)
                        n_differ += model != expect
                    else:
                        expect = sneakysnake_reference(reads[i].tobytes().upper(), refs[i].tobytes().upper(),
                                                       E, ks, it)
                    assert (bool(acc_a[i]), int(est_a[i])) == expect, ("accept", L, kmer, iters, E, i)
                    n_checked += 1
    assert n_checked > 5000 and n_undefined > 200
    assert n_differ > 1000           # the two options do differ on pairs with N


# (b) hand-derived cases on P = ACGT * 25: its diagonals 1..3 never match by themselves
def test_identical_and_end_substitutions():
    assert run(P, P, 0) == (True, 0)
    first = sub(P, 0, "T")
    assert run(first, P, 0) == (False, -1)       # obstacle at column 0
    assert run(first, P, 1) == (True, 1)         # then the main diagonal runs to the end
    last = sub(P, 99, "A")
    assert run(last, P, 0) == (False, -1)
    assert run(last, P, 1) == (True, 1)
    both = sub(first, 99, "A")
    assert run(both, P, 1) == (False, -1)
    assert run(both, P, 2) == (True, 2)


def test_runs_count_every_obstacle():
    two = sub(P, 40, "GT")                       # no diagonal passes columns 40, 41: 2 obstacles
    assert run(two, P, 1) == (False, -1)
    assert run(two, P, 2) == (True, 2)


def test_indels():
    deleted = P[:50] + P[51:] + "A"              # main diagonal to 49, obstacle at 50, deletion
    assert run(deleted, P, 1) == (True, 1)       # diagonal 1 from 51 to the end
    assert run(deleted, P, 0) == (False, -1)
    ins = "T" + P[:-1]                           # insertion diagonal 1 covers columns 0..98
    assert run(ins, P, 1) == (True, 1)
    first = P[1:] + "A"                          # deletion diagonal 1 starts at column 1 only:
    assert run(first, P, 1) == (True, 1)         # obstacle at 0, then columns 1..99
    end = P[:97] + "A" + P[97:99]                # main diagonal 0..96, obstacle at 97; from 98 the
    assert run(end, P, 1) == (False, -1)         # best run is insertion diagonal 1 (column 98 only),
                                                 # obstacle at 99 -> 2 edits
    assert run(end, P, 2) == (True, 2)


def test_undefined_and_case():
    acc, est = create("filter", "sneakysnake").filter_pairs(_arr(sub(P, 10, "N"), P.lower()),
                                                           _arr(P, P), 0)
    assert acc.tolist() == [True, True] and est.tolist() == [-2, 0]


def test_compare_option_hand_cases():
    def cmp(read, ref, E, **opts):
        return run(read, ref, E, undefined="compare", **opts)
    n10 = sub(P, 10, "N")
    assert cmp(n10, n10, 0) == (True, 0)                   # N matches N
    assert cmp(n10, P, 0) == (False, -1)                   # N against a base is an obstacle
    assert cmp(n10, P, 1) == (True, 1)
    assert cmp("N" * 100, "N" * 100, 0) == (True, 0)
    assert cmp("N" * 100, P, 9) == (False, -1)
    assert cmp(P.lower(), P.lower(), 0) == (True, 0)
    assert cmp(P.lower(), P, 9) == (False, -1)             # case-sensitive like the C code
    assert cmp(sub(P, 40, "y"), sub(P, 40, "y"), 0) == (True, 0)
    # first base deleted: obstacle at column 0, then deletion diagonal 1 runs to the end, across
    # N opposite N at column 50; with N on one side only that is a second obstacle
    deleted = sub(P[1:] + "A", 49, "N")
    assert cmp(deleted, sub(P, 50, "N"), 1) == (True, 1)
    assert cmp(deleted, P, 1) == (False, -1)
    assert cmp(deleted, P, 2) == (True, 2)
    assert cmp(sub(P, 0, "T"), P, 0, kmer_size=101) == (True, 0)   # no partition (authors' quirk)
    for opts in ({}, {"undefined": "accept"}):             # accept is unchanged
        assert run(n10, P, 0, **opts) == (True, -2)
        assert run(P.lower(), P, 0, **opts) == (True, 0)


def test_options():
    for bad in ("reject", "COMPARE", "", None, 0, False):
        with pytest.raises(ValueError, match=r"undefined.*'accept', 'compare'"):
            create("filter", "sneakysnake", undefined=bad)
    assert create("filter", "sneakysnake").undefined == "accept"
    assert create("filter", "sneakysnake", undefined="compare", kmer_size=10).undefined == "compare"
    with pytest.raises(PluginError):
        create("filter", "sneakysnake", kmer_size=-1)
    with pytest.raises(PluginError):
        create("filter", "sneakysnake", iterations=1.5)
    assert run(sub(P, 0, "T"), P, 0, kmer_size=101) == (True, 0)   # no partition at all (authors' quirk)


# (c) never rejects a pair within E edits (Edlib global distance)
def test_no_false_rejects_vs_edlib():
    rng = np.random.default_rng(8)
    f = create("filter", "sneakysnake")
    for L in (50, 100, 150, 250):
        reads, refs = random_pairs(rng, L, 800)
        dist = np.array([edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance")
                         ["editDistance"] for i in range(len(reads))])
        for E in range(0, L // 10 + 1):
            acc, est = f.filter_pairs(reads, refs, E)
            assert np.flatnonzero((dist <= E) & ~acc).size == 0, (L, E)
            assert np.all(est[acc] <= dist[acc])             # obstacles never exceed the edit distance
            assert np.all(est[~acc] == -1)


def test_compare_no_false_rejects_vs_edlib():
    # Edlib compares raw bytes too (N == N, case-sensitive): `compare` never rejects a pair within E
    rng = np.random.default_rng(18)
    f = create("filter", "sneakysnake", undefined="compare")
    for L in (50, 100, 150):
        reads, refs = sprinkle(rng, *random_pairs(rng, L, 300))
        dist = np.array([edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance")
                         ["editDistance"] for i in range(len(reads))])
        for E in range(0, L // 10 + 1):
            acc, est = f.filter_pairs(reads, refs, E)
            assert np.flatnonzero((dist <= E) & ~acc).size == 0, (L, E)
            assert np.all(est[acc] >= 0) and np.all(est[~acc] == -1)


# optional CUDA kernel, pair by pair against the CPU kernel under the CUDA simulator (a fresh
# process: the simulator must be chosen before numba.cuda is first imported)
_CUDASIM_CHECK = """
import numpy as np
from pymap.kernels.sneakysnake import sneakysnake_batch
from pymap.kernels.sneakysnake_cuda import sneakysnake_cuda
from test_shouji import random_pairs, sprinkle
rng = np.random.default_rng(4)
for L in (50, 100):
    reads, refs = random_pairs(rng, L, 40)
    reads[3, 7] = ord("N")
    n_reads, n_refs = sprinkle(rng, reads, refs)               # N, lower case, other letters
    for E, ks, it in ((0, 0, 0), (1, 0, 0), (L // 20, 0, 0), (L // 10, 0, 0), (3, L // 4, 0), (2, 10, 3)):
        a1, e1 = sneakysnake_batch(reads, refs, E, ks, it, False)
        a2, e2 = sneakysnake_cuda(reads, refs, E, ks, it)
        assert (a1 == a2).all() and (e1 == e2).all(), (L, E, ks, it)
        for compare in (False, True):                          # the undefined option
            a1, e1 = sneakysnake_batch(n_reads, n_refs, E, ks, it, compare)
            a2, e2 = sneakysnake_cuda(n_reads, n_refs, E, ks, it, compare=compare)
            assert (a1 == a2).all() and (e1 == e2).all(), (L, E, ks, it, compare)
print("ok")
"""


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_cuda_kernel_equals_cpu(where):
    pytest.importorskip("numba.cuda")
    if where == "gpu":
        from pymap.kernels.cuda_support import cuda_available
        if not cuda_available():
            pytest.skip("no CUDA GPU here (the simulator variant runs instead)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if where == "simulator" else "0",
               PYTHONPATH=os.pathsep.join([root, os.path.join(root, "tests"),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CUDASIM_CHECK], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
