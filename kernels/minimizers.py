"""Canonical m-mers, signature-restricted minimizers and super k-mers on base-code arrays (CPU).

Definitions follow the papers in ../shared/papers: "canonical m-mers with or without signature
restriction" (000_7bcc3bac5dd5e7aa, supplementary algorithms 1-4) and RapidGKC (001_e23c6dd133ae98d6,
definitions 3-5 and section III-A).

Inputs are always a batch of sequences in CSR form: ``codes`` (uint8 mapping codes, A=0 C=1 G=2 T=3,
anything else >= 4, see kernels/encoding.py) and ``offsets`` (int64[n_seq + 1]; sequence s is
``codes[offsets[s]:offsets[s + 1]]``). Nothing crosses a sequence boundary. Outputs are arrays indexed
by the global position in ``codes`` (so a caller can keep per-sequence bookkeeping out of the kernels).

Values. An m-mer b_0..b_{m-1} is the integer sum b_i 4^(m-1-i) (first base most significant, so
integer order is lexicographic order); its reverse complement likewise. m <= 31.

* canonical m-mer: min(forward, reverse complement);
* signature rule f (definition 4 of RapidGKC): an orientation x may be chosen only if f(x) holds;
  the signature value of an m-mer is the smaller of the orientations that pass f, or
  ``not_signature(m) = 4**m`` (the largest m-mer value plus one, as in paper 000) when neither does.
  Both orientations are tried, so an m-mer and its reverse complement get the same value and a
  k-mer and its reverse complement the same minimizer (what canonical counting needs). Rules:

  - ``RULE_NONE`` (0): every m-mer passes (the plain canonical minimizer, definition 3);
  - ``RULE_KMC2`` (1): no AAA or ACA at the start and no AA anywhere but at the start (KMC2's
    signature as paper 000 states it);
  - ``RULE_RAPIDGKC`` (2, the default): no AAA, ACA, CAA or CCA at the start and no AAA at the end,
    an O(1) test: ``((x >> 2(m-3)) & 0b101011) != 0 and (x & 0b111111) != 0`` (RapidGKC III-A).

  The two signature rules need m >= 3.
* minimizer of a k-mer (k >= m): the smallest signature value among its w = k - m + 1 m-mers; among
  equal values the rightmost m-mer is the chosen one (paper 000, algorithm 3: "the one that has a
  greater position is chosen ... to favor the construction of more extensive super k-mers").
* a k-mer (or m-mer) holding a code >= 4 is invalid and gets ``NO_VALUE`` (-1); so does a position
  whose k-mer (m-mer) would run past the end of its sequence.
* super k-mer (definition 5): a maximal run of consecutive valid k-mers of one sequence whose
  minimizer values are equal. ``max_kmers`` > 0 cuts longer runs into pieces of at most that many
  k-mers (a partitioner that stores super k-mers in fixed-size records wants that).

Kernels are @njit(nogil=True): callers may run them on Python threads over disjoint sequence ranges
(kernels/threads.py); the ``*_range`` variants write into caller-allocated outputs for that.
The CUDA twins of the m-mer and super k-mer steps are in kernels/minimizers_cuda.py.
"""
import numpy as np
from numba import njit

RULE_NONE = 0
RULE_KMC2 = 1
RULE_RAPIDGKC = 2
RULES = {"none": RULE_NONE, "kmc2": RULE_KMC2, "rapidgkc": RULE_RAPIDGKC}
NO_VALUE = -1
MAX_M = 31


def not_signature(m):
    """The value of an m-mer neither of whose orientations passes the signature rule: 4**m."""
    return 1 << (2 * m)


def rule_code(rule):
    """'none' | 'kmc2' | 'rapidgkc' (or the integer constant) -> the integer constant."""
    if isinstance(rule, str):
        if rule not in RULES:
            raise ValueError(f"unknown signature rule {rule!r} (one of {', '.join(RULES)})")
        return RULES[rule]
    if int(rule) not in RULES.values():
        raise ValueError(f"unknown signature rule {rule!r}")
    return int(rule)


def check_params(k, m, rule):
    """Validate (k, m, rule) once at the edge; returns the rule's integer code."""
    r = rule_code(rule)
    if not 1 <= m <= MAX_M:
        raise ValueError(f"m must be in 1..{MAX_M}, got {m}")
    if k is not None and k < m:
        raise ValueError(f"k must be >= m, got k={k}, m={m}")
    if r != RULE_NONE and m < 3:
        raise ValueError(f"signature rules need m >= 3, got m={m} (use rule 'none')")
    return r


def _csr(codes, offsets):
    return (np.ascontiguousarray(codes, dtype=np.uint8),
            np.ascontiguousarray(offsets, dtype=np.int64))


# --------------------------------------------------------------------------------------------------
# scalar helpers (inlined into every kernel that uses them; the CUDA module has its own copies)

@njit(inline="always")
def fails(x, m, rule):
    """1 if the m-mer value x (one orientation) breaks the signature rule, else 0 (branch-free: the
    outcome is data-dependent and unpredictable, a branch on it would cost a misprediction)."""
    if rule == RULE_RAPIDGKC:
        head_ok = ((x >> (2 * (m - 3))) & 0b101011) != 0
        tail_ok = (x & 0b111111) != 0
        return np.int64(1) - np.int64(head_ok & tail_ok)
    if rule == RULE_KMC2:
        head = (x >> (2 * (m - 3))) & 0b111111
        # bit 2i of `a` is set when base m-1-i is A; `aa` marks bases that follow an A
        a = ~(x | (x >> 1)) & np.int64(0x5555555555555555)
        aa = a & (a >> 2)
        inner = aa & ((np.int64(1) << (2 * (m - 3) + 1)) - 1)     # pairs (j, j+1) with j >= 1
        return np.int64((head == 0) | (head == 0b000100) | (inner != 0))
    return np.int64(0)


def passes(x, m, rule):
    """Does the m-mer value x (one orientation) satisfy the signature rule? (Python; for tests)"""
    return not _fails_py(int(x), int(m), rule_code(rule))


@njit(cache=True)
def _fails_py(x, m, rule):
    return fails(np.int64(x), m, rule)


@njit(inline="always")
def signature_value(fwd, rc, m, rule):
    """The signature value of an m-mer from its two orientations (see the module docstring)."""
    if rule == RULE_NONE:
        return fwd if fwd < rc else rc
    inf = np.int64(1) << (2 * m)
    kf = fwd | (fails(fwd, m, rule) << (2 * m))        # >= inf when fwd fails
    kr = rc | (fails(rc, m, rule) << (2 * m))
    v = kf if kf < kr else kr
    return v if v < inf else inf


@njit(inline="always")
def partition_of(value, log2_parts):
    """Partition of a minimizer value: the top log2_parts bits of a multiplicative (Fibonacci) hash,
    so neighbouring values spread. 0 when log2_parts == 0."""
    if log2_parts == 0:
        return 0
    h = np.uint64(value) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(64 - log2_parts))


def partition_of_value(value, log2_parts):
    """partition_of for Python callers."""
    return int(_partition_of(np.int64(value), int(log2_parts)))


@njit(cache=True)
def _partition_of(value, log2_parts):
    return partition_of(value, log2_parts)


# --------------------------------------------------------------------------------------------------
# canonical m-mers

def canonical_mmers(codes, offsets, m, rule=RULE_RAPIDGKC):
    """int64[len(codes)]: the signature value of the m-mer starting at each position (NO_VALUE where
    it holds a non-ACGT code or runs past its sequence's end; 4**m where no orientation passes)."""
    r = check_params(None, m, rule)
    codes, offsets = _csr(codes, offsets)
    out = np.empty(codes.shape[0], np.int64)
    canonical_mmers_range(codes, offsets, 0, offsets.shape[0] - 1, m, r, out)
    return out


@njit(cache=True, nogil=True)
def canonical_mmers_range(codes, offsets, s_lo, s_hi, m, rule, out):
    """canonical_mmers for sequences s_lo..s_hi-1 into out (positions of those sequences only)."""
    mask = (np.int64(1) << (2 * m)) - 1
    shift = 2 * (m - 1)
    for s in range(s_lo, s_hi):
        a = offsets[s]
        b = offsets[s + 1]
        fwd = np.int64(0)
        rc = np.int64(0)
        run = 0
        for j in range(a, b):
            out[j] = NO_VALUE
            c = np.int64(codes[j])
            if c > 3:
                run = 0
                continue
            fwd = ((fwd << 2) | c) & mask
            rc = (rc >> 2) | ((3 - c) << shift)
            run += 1
            if run >= m:
                out[j - m + 1] = signature_value(fwd, rc, m, rule)


# --------------------------------------------------------------------------------------------------
# minimizers of k-mers

def kmer_minimizers(codes, offsets, k, m, rule=RULE_RAPIDGKC):
    """(values, positions), int64[len(codes)] each: for the k-mer starting at each position, its
    minimizer value and the start of the chosen m-mer (rightmost of equal minima); NO_VALUE in both
    where the k-mer is invalid. Expected O(1) per base (see window_push)."""
    r = check_params(k, m, rule)
    codes, offsets = _csr(codes, offsets)
    values = np.empty(codes.shape[0], np.int64)
    positions = np.empty(codes.shape[0], np.int64)
    kmer_minimizers_range(codes, offsets, 0, offsets.shape[0] - 1, k, m, r, values, positions)
    return values, positions


@njit(inline="always")
def ring_size(w):
    """Size of the ring of the last w m-mer values that window_push keeps (a power of two)."""
    cap = 1
    while cap < w:
        cap *= 2
    return cap


@njit(inline="always")
def window_push(ring, cm, w, v, p, cur_v, cur_p):
    """Slide the minimizer window of w m-mers by one: the m-mer starting at p with value v enters.
    Returns the window's (minimum, its rightmost position) given the previous ones (cur_p < 0: none
    yet). The minimum is kept and the window rescanned only when it leaves (minimap2's scheme:
    expected O(1) per base on non-repetitive sequence, and almost no mispredicted branches)."""
    ring[p & cm] = v
    if cur_p < 0 or v <= cur_v:                       # <=: the rightmost of equal minima
        return v, p
    lo = p - w + 1
    if cur_p >= lo:
        return cur_v, cur_p
    best = ring[lo & cm]
    bp = lo
    for q in range(lo + 1, p + 1):
        x = ring[q & cm]
        if x <= best:
            best = x
            bp = q
    return best, bp


@njit(cache=True, nogil=True)
def kmer_minimizers_range(codes, offsets, s_lo, s_hi, k, m, rule, values, positions):
    """kmer_minimizers for sequences s_lo..s_hi-1 into values, positions."""
    mask = (np.int64(1) << (2 * m)) - 1
    shift = 2 * (m - 1)
    w = k - m + 1
    cap = ring_size(w)
    ring = np.empty(cap, np.int64)
    cm = cap - 1
    for s in range(s_lo, s_hi):
        a = offsets[s]
        b = offsets[s + 1]
        fwd = np.int64(0)
        rc = np.int64(0)
        run = 0
        cur_v = np.int64(NO_VALUE)
        cur_p = np.int64(NO_VALUE)
        for j in range(a, b):
            values[j] = NO_VALUE
            positions[j] = NO_VALUE
            c = np.int64(codes[j])
            if c > 3:
                run = 0
                cur_p = NO_VALUE
                continue
            fwd = ((fwd << 2) | c) & mask
            rc = (rc >> 2) | ((3 - c) << shift)
            run += 1
            if run < m:
                continue
            cur_v, cur_p = window_push(ring, cm, w, signature_value(fwd, rc, m, rule), j - m + 1,
                                       cur_v, cur_p)
            if run >= k:
                i = j - k + 1
                values[i] = cur_v
                positions[i] = cur_p


# --------------------------------------------------------------------------------------------------
# super k-mers

def super_kmers(codes, offsets, k, m, rule=RULE_RAPIDGKC, max_kmers=0):
    """(starts, n_kmers, minimizers): each super k-mer's first k-mer start (global position), its
    number of k-mers, and its minimizer value; in position order. max_kmers > 0 caps the length."""
    values, _ = kmer_minimizers(codes, offsets, k, m, rule)
    return super_kmers_from_minimizers(values, offsets, max_kmers)


def super_kmers_from_minimizers(values, offsets, max_kmers=0):
    """Super k-mers from the per-position minimizer values of kmer_minimizers (or its CUDA twin)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    flags = np.empty(values.shape[0], np.uint8)
    super_kmer_flags_range(values, offsets, 0, offsets.shape[0] - 1, max_kmers, flags)
    starts = np.flatnonzero(flags).astype(np.int64)
    n_kmers, mins = super_kmer_lengths(values, starts, max_kmers)
    return starts, n_kmers, mins


@njit(cache=True, nogil=True)
def super_kmer_flags_range(values, offsets, s_lo, s_hi, max_kmers, flags):
    """flags[i] = 1 where a super k-mer starts at position i (sequences s_lo..s_hi-1), else 0: the
    k-mer is valid and the previous position of its sequence holds no k-mer or another minimizer
    (or, with max_kmers > 0, the current piece already holds max_kmers k-mers)."""
    for s in range(s_lo, s_hi):
        a = offsets[s]
        b = offsets[s + 1]
        run = 0
        for i in range(a, b):
            v = values[i]
            f = 0
            if v != NO_VALUE:
                if i == a or values[i - 1] != v or (max_kmers > 0 and run == max_kmers):
                    f = 1
                    run = 0
                run += 1
            flags[i] = f


@njit(cache=True, nogil=True)
def super_kmer_lengths(values, starts, max_kmers):
    """Number of k-mers and minimizer of the super k-mers starting at `starts` (from flags)."""
    n = starts.shape[0]
    n_kmers = np.empty(n, np.int64)
    mins = np.empty(n, np.int64)
    for t in range(n):
        i = starts[t]
        v = values[i]
        end = starts[t + 1] if t + 1 < n else values.shape[0]
        j = i + 1
        while j < end and values[j] == v and (max_kmers <= 0 or j - i < max_kmers):
            j += 1
        n_kmers[t] = j - i
        mins[t] = v
    return n_kmers, mins
