"""GateKeeper-GPU / GateKeeper filters: the CPU twin against a literal reference implementation, hand
cases, the CUDA kernels (under the simulator) against the CPU twin, ends=full, zero false rejects.

The reference below follows the specification (docs/gatekeeper.md, steps 1-7) word by word, bit by bit,
on the published 32-bit layout; it is slow and only used here.
"""
import doctest
import json
import os
import random
import subprocess
import sys
import textwrap

import edlib
import numpy as np
import pytest

from pymap.kernels.gatekeeper_cpu import (MODE_FULL, MODE_NONE, MODE_PUBLISHED, encode_pair_words,
                                    filter_ascii_pairs)
from pymap.plugins import Filter, create

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"published": MODE_PUBLISHED, "none": MODE_NONE, "full": MODE_FULL}

# --------------------------------------------------------------------------------------------------
# The literal reference (steps 1-7)

CODE = {ord("A"): 0, ord("C"): 1, ord("G"): 2, ord("T"): 3}
LUT = list(range(16))
LUT[0b0101] = 0b0111
LUT[0b1001] = 0b1111
LUT[0b1011] = 0b1111
LUT[0b1101] = 0b1111
TWO_ERRORS = {0b0101, 0b0110, 0b1001, 0b1010, 0b1011, 0b1101}


def ref_encode(seq):
    """Step 1: 16 bases per 32-bit word, first base in the two most significant bits, padding 00."""
    w = (len(seq) + 15) // 16
    words = [0] * w
    for j, c in enumerate(seq):
        words[j // 16] |= CODE[c] << (30 - 2 * (j % 16))
    return words


def ref_gatekeeper(read, ref, e, mode="published"):
    """(accept, estimate) of GateKeeper-GPU (mode 'published'), GateKeeper ('none') or 'full'."""
    length = len(read)
    # step 1: undefined pairs
    if any(c not in CODE for c in read) or any(c not in CODE for c in ref):
        return True, -2
    w = (length + 15) // 16
    m = (w + 1) // 2
    r_words, f_words = ref_encode(read), ref_encode(ref)

    def shift(words, nbits, right):
        # the W-word vector as one number, shifted with carries across words; bits pushed out are lost
        big = 0
        for x in words:
            big = (big << 32) | x
        big = big >> nbits if right else (big << nbits) & ((1 << (32 * w)) - 1)
        return [(big >> (32 * (w - 1 - i))) & 0xFFFFFFFF for i in range(w)]

    def mask(a, b):
        # step 2: XOR, OR of the two bits of each slot; two 16-slot words per 32-bit mask word
        out = [0] * m
        for i in range(w):
            x = a[i] ^ b[i]
            for slot in range(16):
                pair = (x >> (30 - 2 * slot)) & 3
                if (pair >> 1) | (pair & 1):
                    out[i // 2] |= 1 << ((31 if i % 2 == 0 else 15) - slot)
        return out

    def amend(words):
        # step 5: in-place 4-bit sliding window (offsets 0..28), then the cross-word tests
        for i in range(m):
            if words[i] == 0:
                continue
            x = words[i]
            for o in range(29):
                v = (x >> o) & 0xF
                x = (x & ~(0xF << o)) | (LUT[v] << o)
            if i > 0:
                p = words[i - 1]
                if (p >> 2) & 1 and (x >> 31) & 1:
                    p |= 0b11
                if (p >> 1) & 1 and (x >> 30) & 1:
                    x |= 1 << 31
                    p |= 1
                if p & 1 and (x >> 29) & 1:
                    x |= 0b11 << 30
                words[i - 1] = p
            words[i] = x
        return words

    def set_slot(words, s):
        if 0 <= s < 32 * m:
            words[s // 32] |= 1 << (31 - s % 32)

    hamming = mask(r_words, f_words)
    count = sum(bin(x).count("1") for x in hamming)       # step 3
    if count <= e:
        return True, count
    if e == 0:
        return False, -1
    masks = [amend(hamming)]
    for k in range(1, e + 1):                              # step 4
        d = amend(mask(shift(r_words, 2 * k, True), f_words))
        ins = amend(mask(shift(r_words, 2 * k, False), f_words))
        if mode == "published":                            # step 6 (slot k-1; bit k-1 of the last word)
            set_slot(d, k - 1)
            set_slot(ins, 32 * m - k)
        elif mode == "full":
            for s in range(min(k, length)):
                set_slot(d, s)
            for s in range(max(length - k, 0), length):
                set_slot(ins, s)
        masks += [d, ins]
    est = 0
    for i in range(m):                                     # step 7
        x = 0xFFFFFFFF
        for mk in masks:
            x &= mk[i]
        for nib in range(8):
            v = (x >> (4 * nib)) & 0xF
            est += 0 if v == 0 else (2 if v in TWO_ERRORS else 1)
    return (True, est) if est <= e else (False, -1)


# --------------------------------------------------------------------------------------------------
# Pair generation

def mutate(rng, seq, nerr):
    s = list(seq)
    for _ in range(nerr):
        if not s:
            break
        pos = rng.choice([0, 1, 2, len(s) - 1, len(s) - 2, rng.randrange(len(s))])
        pos = max(0, min(pos, len(s) - 1))
        t = rng.random()
        if t < 0.4:
            s[pos] = rng.choice(b"ACGT")
        elif t < 0.7:
            s.insert(pos, rng.choice(b"ACGT"))
        else:
            del s[pos]
    return s


def make_group(rng, length, e, n):
    reads, refs = [], []
    for _ in range(n):
        ref = [rng.choice(b"ACGT") for _ in range(length + 8)]
        r = rng.random()
        if r < 0.1:
            read = list(ref)
        elif r < 0.2:
            read = [rng.choice(b"ACGT") for _ in range(length)]
        else:
            read = mutate(rng, ref, rng.randint(1, e + 3))
            if rng.random() < 0.3:                         # cut the extra bases off the front
                read = read[len(read) - length:] if len(read) >= length else read
                ref = ref[len(ref) - length:]
        read = read[:length]
        ref = ref[:length]
        while len(read) < length:
            read.append(rng.choice(b"ACGT"))
        if rng.random() < 0.05:                            # N, IUPAC, lower case -> undefined
            (read if rng.random() < 0.5 else ref)[rng.randrange(length)] = rng.choice(b"NRYKMnacgt")
        reads.append(bytes(read))
        refs.append(bytes(ref))
    return reads, refs


def as_array(seqs, length):
    return np.frombuffer(b"".join(seqs), np.uint8).reshape(-1, length)


def ascii_kernel(reads, refs, e, mode, est):
    """filter_ascii_pairs through its prange kernel whatever the number of pairs (small inputs go
    through the candidate kernel otherwise)."""
    from pymap.kernels import gatekeeper_cpu as G
    saved, G.SMALL_PAIRS = G.SMALL_PAIRS, -1
    try:
        filter_ascii_pairs(reads, refs, e, mode, est)
    finally:
        G.SMALL_PAIRS = saved


def cpu_estimates(reads, refs, e, mode):
    """The CPU twin's estimates, the same through both routes of filter_ascii_pairs."""
    length = len(reads[0])
    est = np.empty(len(reads), np.int32)
    filter_ascii_pairs(as_array(reads, length), as_array(refs, length), e, MODES[mode], est)
    big = np.empty(len(reads), np.int32)
    ascii_kernel(as_array(reads, length), as_array(refs, length), e, MODES[mode], big)
    assert np.array_equal(est, big), (length, e, mode)
    return est


# --------------------------------------------------------------------------------------------------
# (a) the CPU twin against the literal reference

@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_cpu_twin_matches_reference(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(40):
        if rng.random() < 0.6:
            length = rng.randint(16, 300)
        else:
            length = rng.choice([16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 100, 127, 128, 129, 150,
                                 250, 300])
        e = rng.randint(0, length // 10) if rng.random() < 0.9 else rng.randint(length // 10,
                                                                                length // 4 + 3)
        mode = rng.choice(list(MODES))
        reads, refs = make_group(rng, length, e, 28)
        est = cpu_estimates(reads, refs, e, mode)
        for i in range(len(reads)):
            acc, exp = ref_gatekeeper(reads[i], refs[i], e, mode)
            assert est[i] == exp, (mode, length, e, reads[i], refs[i])
            checked += 1
    assert checked >= 1000


def test_cpu_twin_long_reads_and_large_thresholds():
    """E >= 64 (the generic mask loop), reads longer than 512, and tiny L."""
    rng = random.Random(7)
    for length, e, mode in [(640, 64, "published"), (700, 70, "full"), (520, 66, "none"),
                            (512, 51, "published"), (16, 40, "published"), (17, 20, "full"),
                            (5, 2, "published"), (1, 1, "full"), (8, 1, "none"), (12, 3, "published")]:
        reads, refs = make_group(rng, length, e, 6)
        est = cpu_estimates(reads, refs, e, mode)
        exp = [ref_gatekeeper(reads[i], refs[i], e, mode)[1] for i in range(len(reads))]
        assert list(est) == exp, (length, e, mode)


def test_host_encoding_is_the_published_word_layout():
    rng = random.Random(5)
    for length in (16, 17, 40, 100, 150, 256, 300):
        reads, refs = make_group(rng, length, 3, 20)
        w = (length + 15) // 16
        rw = np.empty((w, len(reads)), np.uint32)
        fw = np.empty((w, len(reads)), np.uint32)
        defined = np.empty(len(reads), np.uint8)
        encode_pair_words(as_array(reads, length), as_array(refs, length), rw, fw, defined)
        for i in range(len(reads)):
            ok = all(c in CODE for c in reads[i]) and all(c in CODE for c in refs[i])
            assert defined[i] == ok
            if ok:
                assert list(rw[:, i]) == ref_encode(reads[i])
                assert list(fw[:, i]) == ref_encode(refs[i])


# --------------------------------------------------------------------------------------------------
# (b) hand-derived cases

def gk(read, ref, e, mode="published"):
    read, ref = read.encode(), ref.encode()
    est = int(cpu_estimates([read], [ref], e, mode)[0])
    assert est == ref_gatekeeper(read, ref, e, mode)[1]
    return est


REF50 = "ACGTTGCAAGCTTAGCCGATAGGCTACGTAACGTTAGCATGCATCGAGTC"


def test_identical_and_substitutions_at_the_ends():
    assert gk(REF50, REF50, 0) == 0
    assert gk(REF50, REF50, 5) == 0
    first = "T" + REF50[1:]          # substitution at the first base: one mismatch in H
    last = REF50[:-1] + "A"          # substitution at the last base
    for read in (first, last):
        assert gk(read, REF50, 1) == 1
        assert gk(read, REF50, 0) == -1      # E = 0: any mismatch rejects
    both = "T" + REF50[1:-1] + "A"
    assert gk(both, REF50, 2) == 2           # H has two ones <= E: accepted at step 3


def test_run_of_errors_in_a_homopolymer():
    """A*32 against A*10 C*6 A*16 with E = 3: H = slots 10-15, D_k = slots 10+k..15+k,
    I_k = slots 10-k..15-k (all runs, nothing to amend); D_3 and I_3 do not overlap, so the AND is
    empty and GateKeeper accepts with estimate 0 (its known weakness on such runs)."""
    ref = "A" * 32
    read = "A" * 10 + "C" * 6 + "A" * 16
    assert gk(read, ref, 3) == 0
    assert gk(read, ref, 3, "full") == 0
    assert gk(read, ref, 6) == 6             # six ones in H <= 6
    assert gk(read, ref, 0) == -1


def test_deletion_of_the_first_base():
    """read = ref[1:] + 'A' (first base deleted), ref starting 'CGTA..' so that ref[0] = 'C'.
    D_1 compares read base j with ref slot j + 1: all match, except slot 0 (vacated A against C)
    which is 1 anyway (and step 6 sets it). So the AND is at most slot 0, which is 1 in every mask:
    H (read[0] = G vs C), D_2 (A vs C), I_1 (read[1] = T vs C), I_2 (read[2] = A vs C): one error."""
    ref = "CGTAGCATTACGGATCCTAGCATGCAATCGTC"
    read = ref[1:] + "A"
    for mode in ("published", "none", "full"):
        assert gk(read, ref, 2, mode) == 1


def test_leading_amendment_published_versus_full():
    """read = ref[1:] + 'A' with ref = 'ACGT...' (ref[0] = 'A'). D_1 matches everywhere (slot 0:
    vacated A = A), so the AND is at most slot 0. D_2's vacated slot 0 also reads A = A: the published
    step 6 only sets slot k - 1 = 1 of D_2, slot 0 stays 0 and the estimate is 0; ends=full sets
    slots 0 and 1, and H, D_1 (forced), I_1 (G vs A), I_2 (T vs A) all have slot 0: estimate 1."""
    ref = "ACGTGCATTACGGATCCTAGCATGCAATCGTC"
    read = ref[1:] + "A"
    assert gk(read, ref, 2, "published") == 0
    assert gk(read, ref, 2, "none") == 0
    assert gk(read, ref, 2, "full") == 1


def test_trailing_amendment_in_the_padding():
    """L = 40 (two mask words, slots 40-63 padding): read = 'G' + ref[:39] (a base inserted in front),
    ref ending '..TGCA'. I_1 compares read base j + 1 with ref slot j: all match but the last slot
    (vacated A against ref[39] = A: match too), so the AND is at most slot 39. The published step 6
    sets bit k - 1 of the last mask word, i.e. slots 63, 62 (padding, cleared by the AND with H):
    estimate 0. ends=full sets slots 39 (I_1) and 38-39 (I_2); H (C vs A), D_1 (G vs A) and D_2
    (T vs A) have slot 39 too: estimate 1 (slot 39 = bit 24, the nibble 0001)."""
    ref = "ACGTGCATTACGGATCCTAGCATGCAATCGTCAGCTTGCA"
    assert len(ref) == 40 and ref[-4:] == "TGCA"
    read = "G" + ref[:39]
    assert gk(read, ref, 2, "published") == 0
    assert gk(read, ref, 2, "full") == 1


def test_undefined_pairs():
    for bad in ("N", "R", "a", "n", "-"):
        read = REF50[:20] + bad + REF50[21:]
        assert gk(read, REF50, 2) == -2
        assert gk(REF50, read, 0) == -2
    f = create("filter", "gatekeeper", device="cpu")
    acc, est = f.filter_pairs(as_array([b"ACGTNACGTACGTACGTACG"], 20), as_array([b"A" * 20], 20), 1)
    assert acc[0] and est[0] == -2


# --------------------------------------------------------------------------------------------------
# (d) ends=full and zero false rejects

def test_never_rejects_a_pair_within_the_threshold():
    """Random similar pairs (incl. low-complexity sequences) and every single-edit neighbour of a few
    references: whenever Edlib's global edit distance is <= E, no mode rejects (none seen)."""
    rng = random.Random(11)
    for _ in range(60):
        length = rng.randint(16, 200)
        e = rng.randint(1, max(1, length // 10))
        alpha = rng.choice([b"ACGT", b"ACGT", b"AC", b"A"])
        reads, refs = [], []
        for _ in range(30):
            ref = [rng.choice(alpha) for _ in range(length + 8)]
            read = (mutate(rng, ref, rng.randint(1, e)) + [65] * length)[:length]
            reads.append(bytes(read))
            refs.append(bytes(ref[:length]))
        dist = [edlib.align(r, f, mode="NW", task="distance")["editDistance"] for r, f in zip(reads, refs)]
        for mode in MODES:
            est = cpu_estimates(reads, refs, e, mode)
            for i, d in enumerate(dist):
                if d <= e:
                    assert est[i] >= 0, (mode, e, d, reads[i], refs[i])
    for length in (16, 33, 64, 100):
        ref = bytes(rng.choice(b"ACGT") for _ in range(length + 2))
        neigh = set()
        for p in range(length):
            for b in b"ACGT":
                neigh.add((ref[:p] + bytes([b]) + ref[p + 1:])[:length])
                neigh.add((ref[:p] + bytes([b]) + ref[p:])[:length])
                neigh.add((ref[1:p + 1] + bytes([b]) + ref[p + 1:])[:length])
            neigh.add((ref[:p] + ref[p + 1:])[:length])
        reads = sorted(neigh)
        refs = [ref[:length]] * len(reads)
        for mode in MODES:
            est = cpu_estimates(reads, refs, 1, mode)
            for i, r in enumerate(reads):
                if edlib.align(r, refs[i], mode="NW", task="distance")["editDistance"] <= 1:
                    assert est[i] >= 0, (mode, r, refs[i])


def test_plugins_wire_the_amendment_variants():
    """gatekeeper-gpu (ends=published / full) and gatekeeper compute the three reference variants."""
    rng = random.Random(3)
    reads, refs = make_group(rng, 64, 4, 200)
    full = create("filter", "gatekeeper-gpu", device="cpu", ends="full")
    pub = create("filter", "gatekeeper-gpu", device="cpu")
    fpga = create("filter", "gatekeeper", device="cpu")
    a_full, e_full = full.filter_pairs(as_array(reads, 64), as_array(refs, 64), 4)
    a_pub, e_pub = pub.filter_pairs(as_array(reads, 64), as_array(refs, 64), 4)
    a_fpga, e_fpga = fpga.filter_pairs(as_array(reads, 64), as_array(refs, 64), 4)
    for i in range(len(reads)):
        assert e_full[i] == ref_gatekeeper(reads[i], refs[i], 4, "full")[1]
        assert e_pub[i] == ref_gatekeeper(reads[i], refs[i], 4, "published")[1]
        assert e_fpga[i] == ref_gatekeeper(reads[i], refs[i], 4, "none")[1]
    assert (a_full == (e_full != -1)).all() and (a_pub == (e_pub != -1)).all()
    assert (e_full != e_pub).any()          # the two amendments do differ on these pairs


# --------------------------------------------------------------------------------------------------
# Plugin contract

def test_plugin_options_are_validated():
    for kw, word in [(dict(device="tpu"), "device"), (dict(encode="gpu"), "encode"),
                     (dict(ends="both"), "ends"), (dict(threads=0), "threads"),
                     (dict(threads="2"), "threads")]:
        with pytest.raises(ValueError, match=word):
            create("filter", "gatekeeper-gpu", **kw)
    with pytest.raises(ValueError):
        create("filter", "gatekeeper", ends="full")
    from numba import cuda
    if not cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            create("filter", "gatekeeper-gpu", device="gpu")
        assert create("filter", "gatekeeper-gpu").device == "cpu"
    f = create("filter", "gatekeeper-gpu", device="cpu", threads=1)
    assert isinstance(f, Filter) and f.name == "gatekeeper-gpu"
    assert isinstance(create("filter", "gatekeeper", device="cpu"), Filter)
    acc, est = f.filter_pairs(np.zeros((0, 100), np.uint8), np.zeros((0, 100), np.uint8), 3)
    assert acc.shape == (0,) and est.dtype == np.int32


def test_docstring_example():
    import pymap.filters.gatekeeper as mod
    assert doctest.testmod(mod).failed == 0


def make_candidates(seed, n_reads=12, n_cand=120):
    """A small mapper batch: reference codes with N runs and two contigs, reads of two lengths,
    candidates on both strands, some running off a contig end."""
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 4, 3000).astype(np.uint8)
    ref[700:705] = 4
    lengths = rng.choice([100, 150], n_reads)
    offsets = np.zeros(n_reads + 1, np.int64)
    offsets[1:] = np.cumsum(lengths)
    codes = np.empty(offsets[-1], np.uint8)
    starts = rng.integers(0, 2700, n_reads)
    for r in range(n_reads):
        start = int(starts[r])
        seg = ref[start:start + lengths[r]].copy()
        seg[seg == 4] = 1
        for _ in range(int(rng.integers(0, 4))):
            seg[int(rng.integers(0, lengths[r]))] = rng.integers(0, 4)
        codes[offsets[r]:offsets[r + 1]] = seg
    codes[offsets[3] + 5] = 4                                   # an N in read 3
    rc = np.where(codes < 4, 3 - codes, 4).astype(np.uint8)
    for r in range(n_reads):
        rc[offsets[r]:offsets[r + 1]] = rc[offsets[r]:offsets[r + 1]][::-1]
    c_read = rng.integers(0, n_reads, n_cand).astype(np.int32)
    c_strand = rng.integers(0, 2, n_cand).astype(np.int8)
    c_pos = rng.integers(-50, 2950, n_cand).astype(np.int64)
    true = np.arange(n_cand) % 3 == 0                           # a third at the read's own locus
    c_pos[true] = starts[c_read[true]]
    c_strand[true] = 0
    c_lo = np.where(c_pos < 1500, 0, 1500).astype(np.int64)
    c_hi = np.where(c_pos < 1500, 1500, 3000).astype(np.int64)
    c_maxe = rng.choice([3, 6], n_cand).astype(np.int32)
    return codes, rc, offsets, ref, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe


def as_batch(args):
    """make_candidates' arrays as the CandidateBatch that Filter.filter_candidates takes."""
    from pymap.batch import CandidateBatch, ReadBatch
    codes, rc, offsets, ref = args[:4]
    n = offsets.shape[0] - 1
    reads = ReadBatch(codes=codes, offsets=offsets, names=np.empty(0, np.uint8),
                      name_offsets=np.zeros(n + 1, np.int64), quals=np.empty(0, np.uint8), rc_codes=rc)
    return CandidateBatch(reads, ref, *args[4:])


def test_cpu_candidate_path_matches_the_host_cut():
    args = make_candidates(1)
    for name, kw in [("gatekeeper-gpu", {}), ("gatekeeper-gpu", {"ends": "full"}), ("gatekeeper", {})]:
        f = create("filter", name, device="cpu", **kw)
        acc, est = f.filter_candidates(as_batch(args))
        acc0, est0 = Filter.filter_candidates(f, as_batch(args))
        assert (est == est0).all() and (acc == acc0).all()
        assert (est == -2).any() and (est == -1).any() and (est >= 0).any()


@pytest.mark.parametrize("length,e", [(1, 0), (17, 2), (63, 4), (64, 5), (65, 3), (128, 9), (250, 12),
                                      (100, 70)])
def test_candidate_kernel_equals_the_pair_kernel(length, e):
    """filter_code_candidates (codes read one plane word at a time, N and contig ends undefined, on
    several threads) gives what the ASCII kernel gives on the same pairs cut by hand, for lengths
    around the 64-slot words and a threshold above 63 (the unvectorised path)."""
    import numba

    from pymap.kernels import gatekeeper_cpu as G
    rng = np.random.default_rng(length * 100 + e)
    n_reads, per_read = 300, 8
    ref = rng.integers(0, 4, 20000).astype(np.uint8)
    ref[5000:5003] = 4
    starts = rng.integers(0, 20000 - length, n_reads)
    codes = ref[starts[:, None] + np.arange(length)[None, :]].copy()
    for _ in range(3):                                  # a few substitutions
        rows = rng.integers(0, n_reads, n_reads // 2)
        codes[rows, rng.integers(0, length, rows.size)] = rng.integers(0, 4, rows.size)
    codes[::37, rng.integers(0, length)] = 4            # Ns in some reads
    rc = np.where(codes < 4, 3 - codes, 4)[:, ::-1]
    codes, rc = np.ascontiguousarray(codes.reshape(-1), np.uint8), np.ascontiguousarray(rc.reshape(-1), np.uint8)
    offsets = np.arange(n_reads + 1, dtype=np.int64) * length
    c_read = np.repeat(np.arange(n_reads, dtype=np.int32), per_read)
    c_strand = (rng.random(c_read.size) < 0.5).astype(np.int8)
    c_pos = rng.integers(-10, 20000 - length + 10, c_read.size).astype(np.int64)
    c_pos[::per_read] = starts
    c_strand[::per_read] = 0
    c_lo = np.where(c_pos < 10000, 0, 10000).astype(np.int64)        # two contigs
    c_hi = np.where(c_pos < 10000, 10000, 20000).astype(np.int64)
    table = np.frombuffer(b"ACGTN", np.uint8)
    reads = np.empty((c_read.size, length), np.uint8)
    refs = np.empty_like(reads)
    for i in range(c_read.size):
        src = rc if c_strand[i] else codes
        reads[i] = table[src[offsets[c_read[i]]:offsets[c_read[i]] + length]]
        q = c_pos[i] + np.arange(length)
        inside = (q >= c_lo[i]) & (q < c_hi[i])
        refs[i] = np.where(inside, table[ref[np.clip(q, 0, ref.size - 1)]], ord("N"))
    for mode in (MODE_PUBLISHED, MODE_FULL):
        expected = np.empty(c_read.size, np.int32)
        ascii_kernel(reads, refs, e, mode, expected)
        idx = rng.permutation(c_read.size).astype(np.int64)
        old = numba.get_num_threads()
        for threads, grain in ((1, G.GRAIN), (numba.config.NUMBA_NUM_THREADS, 64)):
            got = np.full(c_read.size, 99, np.int32)
            numba.set_num_threads(threads)
            saved, G.GRAIN = G.GRAIN, grain
            try:
                G.filter_code_candidates(codes, rc, offsets, ref, c_read, c_strand, c_pos, c_lo, c_hi, idx, length,
                                         e, mode, got)
            finally:
                G.GRAIN = saved
                numba.set_num_threads(old)
            assert np.array_equal(got, expected), (mode, threads)
        assert (expected == G.UNDEFINED).any() and (expected >= 0).any()


# --------------------------------------------------------------------------------------------------
# (c) the CUDA kernels under the simulator, pair by pair against the CPU twin

SIM_SCRIPT = textwrap.dedent(r'''
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    from pymap.kernels.gatekeeper_cpu import filter_ascii_pairs
    from pymap.kernels.gatekeeper_cuda import GateKeeperCUDA, pinned_pairs
    from pymap.plugins import Filter, create
    import test_gatekeeper as T
    rng = np.random.default_rng(5)
    out = {"pairs": 0, "mismatch": [], "candidates": 0}
    configs = [(100, 5, 0), (37, 3, 2), (150, 4, 1), (16, 0, 0), (70, 7, 0), (250, 2, 0), (129, 13, 2)]
    for length, e, mode in configs:
        reads, refs = T.make_group(__import__("random").Random(length), length, e, 24)
        R = T.as_array(reads, length)
        F = T.as_array(refs, length)
        exp = np.empty(len(reads), np.int32)
        filter_ascii_pairs(R, F, e, mode, exp)
        PR, PF = pinned_pairs(*R.shape)
        PR[:] = R
        PF[:] = F
        for enc, (a, b) in (("host", (R, F)), ("device", (R, F)), ("device+pinned", (PR, PF))):
            got = GateKeeperCUDA(mode=mode, encode=enc.split("+")[0], max_batch=10).filter_pairs(a, b, e)
            out["pairs"] += len(reads)
            if not np.array_equal(got, exp):
                out["mismatch"].append([length, e, mode, enc, got.tolist(), exp.tolist()])
    args = T.make_candidates(2, n_reads=8, n_cand=60)
    for name, kw in [("gatekeeper-gpu", {}), ("gatekeeper", {}), ("gatekeeper-gpu", {"ends": "full"})]:
        f = create("filter", name, device="gpu", **kw)
        acc, est = f.filter_candidates(T.as_batch(args))
        acc0, est0 = Filter.filter_candidates(create("filter", name, device="cpu", **kw), T.as_batch(args))
        out["candidates"] += len(est)
        if not (np.array_equal(est, est0) and np.array_equal(acc, acc0)):
            out["mismatch"].append([name, "candidates", est.tolist(), est0.tolist()])
        # one read length and one threshold: the kernel's identity-index path
        lens = (args[2][1:] - args[2][:-1])[args[4]]
        keep = lens == lens[0]
        one = (args[:4] + tuple(np.ascontiguousarray(x[keep]) for x in args[4:9])
               + (np.full(int(keep.sum()), 5, np.int32),))
        acc, est = f.filter_candidates(T.as_batch(one))
        acc0, est0 = Filter.filter_candidates(create("filter", name, device="cpu", **kw), T.as_batch(one))
        out["candidates"] += len(est)
        if not np.array_equal(est, est0):
            out["mismatch"].append([name, "candidates, one key", est.tolist(), est0.tolist()])
        a1, e1 = f.filter_pairs(R, F, 3)
        a2, e2 = create("filter", name, device="cpu", **kw).filter_pairs(R, F, 3)
        if not np.array_equal(e1, e2):
            out["mismatch"].append([name, "plugin pairs"])
    print(json.dumps(out))
''')


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_cuda_kernels_equal_the_cpu_twin(where):
    """Pair by pair, both input paths and the candidate path; on a real GPU too when there is one."""
    if where == "gpu":
        from pymap.kernels.cuda_support import cuda_available
        if not cuda_available():
            pytest.skip("no CUDA GPU here (the simulator variant runs instead)")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if where == "simulator" else "0")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT, ROOT, os.path.dirname(__file__)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["mismatch"] == []
    assert res["pairs"] >= 300 and res["candidates"] >= 150
