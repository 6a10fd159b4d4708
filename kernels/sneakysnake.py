"""SneakySnake pre-alignment filter (Alser et al., Bioinformatics 2020), batch-parallel Numba kernel.

The decisions equal those of the authors' CPU implementation (CMU-SAFARI/SneakySnake,
SneakySnake/SneakySnake.c) for every ACGT pair and threshold; this is an independent
implementation of the same procedure. With the short-read defaults of the authors' tool
(KmerSize = ReadLength: one partition spanning the read; IterationNo = ReadLength) it is:

    index = 0, edits = 0
    while index < L:
        longest = the longest run of matches starting at column `index` on the main diagonal,
                  the deletion diagonals e = 1..E (read[p-e] vs ref[p], none when index < e) and
                  the insertion diagonals e = 1..E (read[p+e] vs ref[p], ending at column L-e-1)
        index += longest
        if index < L: edits += 1 (the obstacle at `index`), index += 1
        reject as soon as edits > E
    accept, estimate = edits

General partitions (`kmer_size` < L) and iteration limits reproduce the authors' code too,
including its quirks: the last partition runs to the read end, a run ends at the partition end,
a partition stops early (its remaining columns uncounted) after more than `iterations` rounds,
and kmer_size > L means zero partitions (every pair accepted with estimate 0).

Characters, chosen per call by the runtime flag `compare` (the plugin option `undefined`):
compare=False (`undefined=accept`, the default): lower-case acgt equal their upper-case bases and a
pair holding any other character (N, ...) is "undefined": accepted with estimate -2. compare=True
(`undefined=compare`): the raw bytes are compared like the authors' `char`s (N matches N, N against
a base is a mismatch, case-sensitive), so the decisions and Edits counts are the authors' on any
input.
"""
import numpy as np
from numba import njit, prange

from pymap.kernels.encoding import load_pair

UNDEFINED = -2
REJECTED = -1
_CHUNK = 64


@njit(cache=True, nogil=True)
def sneakysnake_pair(rd, rf, e_max, kmer_size, iterations):
    """SneakySnake on one pair of uint8 sequences of length L (codes or raw bytes: only equality
    matters). Returns edits (accepted) or -1."""
    L = rd.shape[0]
    n_kmers = L // kmer_size
    edits = 0
    for k in range(n_kmers):
        k_start = k * kmer_size
        k_end = (k + 1) * kmer_size if k < n_kmers - 1 else L
        part = k_end - k_start
        index = k_start
        rounds = 1
        while index < k_end:
            # main diagonal
            p = index
            while p < k_end and rd[p] == rf[p]:
                p += 1
            longest = p - index
            if longest == part:
                break
            room = k_end - index  # nothing can run further than the partition end
            if longest < room:
                for e in range(1, e_max + 1):
                    # deletion diagonal e: read[p-e] vs ref[p]; no run when index < e
                    p = index
                    if p >= e:
                        while p < k_end and rd[p - e] == rf[p]:
                            p += 1
                    run = p - index
                    if run > longest:
                        longest = run
                    # insertion diagonal e: read[p+e] vs ref[p], p <= L-e-1
                    p = index
                    last = L - e  # first column past the diagonal
                    stop = k_end if k_end < last else last
                    while p < stop and rd[p + e] == rf[p]:
                        p += 1
                    run = p - index
                    if run > longest:
                        longest = run
                    if longest == room:
                        break
            index += longest
            if index < k_end:
                edits += 1
                index += 1
            if rounds > iterations:
                break
            rounds += 1
            if edits > e_max:
                return REJECTED
        if edits > e_max:
            return REJECTED
    return edits


@njit(cache=True, parallel=True)
def sneakysnake_batch(reads, refs, max_edits, kmer_size, iterations, compare):
    """SneakySnake over a batch of uint8 ASCII pairs (n, L) -> (accept bool[n], estimate int32[n]).
    kmer_size <= 0 or iterations <= 0 mean the read length (the authors' short-read setting).
    compare (bool, a runtime flag: one compiled version serves both settings): False = fold case and
    accept pairs with non-ACGT characters (estimate -2); True = compare the raw bytes like the
    authors' code."""
    n = reads.shape[0]
    L = reads.shape[1]
    accept = np.zeros(n, np.bool_)
    estimate = np.full(n, REJECTED, np.int32)
    ks = kmer_size if kmer_size > 0 else L
    it = iterations if iterations > 0 else L
    if ks <= 0:  # L == 0: nothing to compare
        accept[:] = True
        estimate[:] = 0
        return accept, estimate
    n_chunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(n_chunks):
        rd = np.empty(L, np.uint8)
        rf = np.empty(L, np.uint8)
        hi = min(n, (c + 1) * _CHUNK)
        for i in range(c * _CHUNK, hi):
            if load_pair(reads, refs, i, rd, rf, compare):
                accept[i] = True
                estimate[i] = UNDEFINED
                continue
            est = sneakysnake_pair(rd, rf, max_edits, ks, it)
            if est >= 0:
                accept[i] = True
            estimate[i] = est
    return accept, estimate
