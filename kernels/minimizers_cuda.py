"""The m-mer, minimizer and super k-mer steps of kernels/minimizers.py on the GPU (Numba CUDA).

Same specification, inputs and outputs as the CPU kernels (see there); the tests compare them value
by value under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1). The layout follows paper 000's pattern of
one thread per position, without its tiles: each thread recomputes its own m-mer (O(m)) and then its
own window minimum (O(w), w = k - m + 1) from the m-mer array, so no thread depends on another's
rolling state; the sequence a position belongs to is found by a binary search in the offsets
(contigs.contig_of, compiled for the device).

    mm = canonical_mmers_cuda(codes, offsets, m, rule)              # int64[n]
    values, positions = kmer_minimizers_cuda(codes, offsets, k, m, rule)
    starts, n_kmers, minimizers = super_kmers_cuda(codes, offsets, k, m, rule, max_kmers)

Super k-mers: one thread a position flags the first and the last k-mer of each run of equal
minimizers; the flags are compacted on the host (np.flatnonzero), where a run longer than max_kmers
is cut as the CPU kernel cuts it. Arrays may be host (NumPy) or device arrays; results come back as
NumPy arrays.
"""
import numpy as np

from pymap.kernels.contigs import contig_of
from pymap.kernels.cuda_support import cuda, kernel_callable
from pymap.kernels.minimizers import (NO_VALUE, RULE_KMC2, RULE_NONE, RULE_RAPIDGKC, check_params)

THREADS_PER_BLOCK = 256
_contig_of = kernel_callable(contig_of)


@cuda.jit(device=True)
def _fails(x, m, rule):
    if rule == RULE_RAPIDGKC:
        head_ok = ((x >> (2 * (m - 3))) & 0b101011) != 0
        tail_ok = (x & 0b111111) != 0
        return 0 if (head_ok and tail_ok) else 1
    if rule == RULE_KMC2:
        head = (x >> (2 * (m - 3))) & 0b111111
        if head == 0 or head == 0b000100:
            return 1
        y = x
        for _ in range(m - 2):
            if (y & 0b1111) == 0:
                return 1
            y >>= 2
        return 0
    return 0


@cuda.jit(device=True)
def _signature(fwd, rc, m, rule):
    if rule == RULE_NONE:
        return fwd if fwd < rc else rc
    inf = 1 << (2 * m)
    kf = fwd + _fails(fwd, m, rule) * inf
    kr = rc + _fails(rc, m, rule) * inf
    v = kf if kf < kr else kr
    return v if v < inf else inf


@cuda.jit
def canonical_mmers_kernel(codes, offsets, m, rule, out):
    """out[j]: the signature value of the m-mer starting at j (NO_VALUE if invalid)."""
    j = cuda.grid(1)
    if j >= codes.shape[0]:
        return
    if j + m > offsets[_contig_of(offsets, j) + 1]:
        out[j] = NO_VALUE
        return
    fwd = 0
    rc = 0
    for t in range(m):
        c = int(codes[j + t])
        if c > 3:
            out[j] = NO_VALUE
            return
        fwd = (fwd << 2) | c
        rc = rc | ((3 - c) << (2 * t))
    out[j] = _signature(fwd, rc, m, rule)


@cuda.jit
def kmer_minimizers_kernel(mm, offsets, k, m, values, positions):
    """values[i], positions[i]: the minimum of mm over the k-mer at i and its rightmost position."""
    i = cuda.grid(1)
    if i >= mm.shape[0]:
        return
    values[i] = NO_VALUE
    positions[i] = NO_VALUE
    if i + k > offsets[_contig_of(offsets, i) + 1]:
        return
    w = k - m + 1
    best = mm[i]
    bp = i
    if best == NO_VALUE:
        return
    for q in range(i + 1, i + w):
        x = mm[q]
        if x == NO_VALUE:
            return
        if x <= best:
            best = x
            bp = q
    values[i] = best
    positions[i] = bp


@cuda.jit
def run_flags_kernel(values, offsets, first, last):
    """first[i] / last[i] = 1 where a run of equal valid minimizer values of one sequence starts /
    ends at position i."""
    i = cuda.grid(1)
    if i >= values.shape[0]:
        return
    v = values[i]
    f = 0
    g = 0
    if v != NO_VALUE:
        if i == offsets[_contig_of(offsets, i)] or values[i - 1] != v:
            f = 1
        if i + 1 == offsets[_contig_of(offsets, i) + 1] or values[i + 1] != v:
            g = 1
    first[i] = f
    last[i] = g


def _blocks(n):
    return max(1, (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)


def _device(a, dtype):
    if hasattr(a, "copy_to_host"):       # already a device array
        return a
    return cuda.to_device(np.ascontiguousarray(a, dtype=dtype))


def _mmers_device(d_codes, d_offsets, n, m, r):
    d_mm = cuda.device_array(n, np.int64)
    if n:
        canonical_mmers_kernel[_blocks(n), THREADS_PER_BLOCK](d_codes, d_offsets, m, r, d_mm)
    return d_mm


def canonical_mmers_cuda(codes, offsets, m, rule=RULE_RAPIDGKC):
    """GPU twin of minimizers.canonical_mmers."""
    r = check_params(None, m, rule)
    n = int(codes.shape[0])
    d = _mmers_device(_device(codes, np.uint8), _device(offsets, np.int64), n, m, r)
    return d.copy_to_host()


def _minimizers_device(codes, offsets, k, m, rule):
    r = check_params(k, m, rule)
    n = int(codes.shape[0])
    d_offsets = _device(offsets, np.int64)
    d_mm = _mmers_device(_device(codes, np.uint8), d_offsets, n, m, r)
    d_val = cuda.device_array(n, np.int64)
    d_pos = cuda.device_array(n, np.int64)
    if n:
        kmer_minimizers_kernel[_blocks(n), THREADS_PER_BLOCK](d_mm, d_offsets, k, m, d_val, d_pos)
    return d_offsets, d_val, d_pos


def kmer_minimizers_cuda(codes, offsets, k, m, rule=RULE_RAPIDGKC):
    """GPU twin of minimizers.kmer_minimizers: (values, positions)."""
    _, d_val, d_pos = _minimizers_device(codes, offsets, k, m, rule)
    return d_val.copy_to_host(), d_pos.copy_to_host()


def super_kmers_cuda(codes, offsets, k, m, rule=RULE_RAPIDGKC, max_kmers=0):
    """GPU twin of minimizers.super_kmers: (starts, n_kmers, minimizers)."""
    d_offsets, d_val, _ = _minimizers_device(codes, offsets, k, m, rule)
    n = int(codes.shape[0])
    d_first = cuda.device_array(n, np.uint8)
    d_last = cuda.device_array(n, np.uint8)
    if n:
        run_flags_kernel[_blocks(n), THREADS_PER_BLOCK](d_val, d_offsets, d_first, d_last)
    starts = np.flatnonzero(d_first.copy_to_host()).astype(np.int64)
    ends = np.flatnonzero(d_last.copy_to_host()).astype(np.int64)
    lengths = ends - starts + 1
    mins = d_val.copy_to_host()[starts] if starts.size else np.empty(0, np.int64)
    if max_kmers > 0 and starts.size and lengths.max() > max_kmers:
        pieces = (lengths + max_kmers - 1) // max_kmers
        first_piece = np.repeat(np.cumsum(pieces) - pieces, pieces)
        j = np.arange(int(pieces.sum())) - first_piece              # piece number within its run
        run = np.repeat(np.arange(starts.size), pieces)
        new_starts = starts[run] + j * max_kmers
        lengths = np.minimum(max_kmers, lengths[run] - j * max_kmers)
        return new_starts, lengths.astype(np.int64), mins[run]
    return starts, lengths.astype(np.int64), mins
