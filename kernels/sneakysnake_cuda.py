"""SneakySnake on the GPU (Numba CUDA): one thread per pair, same decisions and estimates as the
CPU kernel in kernels/sneakysnake.py (see there for the algorithm and the authors' quirks).

`compare` works as in the CPU kernel: False folds case and accepts pairs with non-ACGT characters
(estimate -2); True compares the raw bytes like the authors' code (the kernel then reads the
sequences through an identity table and skips the undefined-pair scan).

Works under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) too; the tests compare it pair by pair
with the CPU kernel there. Not registered as a plugin.
"""
import numpy as np
from pymap.kernels.cuda_support import cuda

from pymap.kernels.encoding import ASCII_TO_CODE, N_CODE

UNDEFINED = -2
REJECTED = -1
THREADS_PER_BLOCK = 128
_IDENTITY = np.arange(256, dtype=np.uint8)   # byte -> itself: raw comparison (compare=True)


@cuda.jit(device=True)
def _same(table, reads, refs, i, p_read, p_ref):
    return table[reads[i, p_read]] == table[refs[i, p_ref]]


@cuda.jit
def sneakysnake_kernel(reads, refs, max_edits, kmer_size, iterations, table, compare, accept, estimate):
    i = cuda.grid(1)
    if i >= reads.shape[0]:
        return
    L = reads.shape[1]
    if not compare:
        for p in range(L):
            if table[reads[i, p]] == N_CODE or table[refs[i, p]] == N_CODE:
                accept[i] = True
                estimate[i] = UNDEFINED
                return
    n_kmers = L // kmer_size
    edits = 0
    for k in range(n_kmers):
        k_start = k * kmer_size
        k_end = L
        if k < n_kmers - 1:
            k_end = (k + 1) * kmer_size
        part = k_end - k_start
        index = k_start
        rounds = 1
        while index < k_end:
            p = index
            while p < k_end and _same(table, reads, refs, i, p, p):
                p += 1
            longest = p - index
            if longest == part:
                break
            room = k_end - index
            if longest < room:
                for e in range(1, max_edits + 1):
                    p = index
                    if p >= e:
                        while p < k_end and _same(table, reads, refs, i, p - e, p):
                            p += 1
                    if p - index > longest:
                        longest = p - index
                    p = index
                    stop = min(k_end, L - e)
                    while p < stop and _same(table, reads, refs, i, p + e, p):
                        p += 1
                    if p - index > longest:
                        longest = p - index
                    if longest == room:
                        break
            index += longest
            if index < k_end:
                edits += 1
                index += 1
            if rounds > iterations:
                break
            rounds += 1
            if edits > max_edits:
                accept[i] = False
                estimate[i] = REJECTED
                return
        if edits > max_edits:
            accept[i] = False
            estimate[i] = REJECTED
            return
    accept[i] = True
    estimate[i] = edits


def sneakysnake_cuda(reads, refs, max_edits, kmer_size=0, iterations=0, compare=False):
    """Host wrapper: uint8 ASCII (n, L) host arrays -> (accept bool[n], estimate int32[n]).
    compare=False: ASCII_TO_CODE table (case folded, non-ACGT pairs undefined); True: raw bytes."""
    reads = np.ascontiguousarray(reads, dtype=np.uint8)
    refs = np.ascontiguousarray(refs, dtype=np.uint8)
    n, length = reads.shape
    accept = np.zeros(n, np.bool_)
    estimate = np.full(n, REJECTED, np.int32)
    if n == 0:
        return accept, estimate
    if length == 0:
        accept[:] = True
        estimate[:] = 0
        return accept, estimate
    ks = kmer_size if kmer_size > 0 else length
    it = iterations if iterations > 0 else length
    d_acc = cuda.to_device(accept)
    d_est = cuda.to_device(estimate)
    compare = bool(compare)
    table = _IDENTITY if compare else ASCII_TO_CODE
    blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
    sneakysnake_kernel[blocks, THREADS_PER_BLOCK](cuda.to_device(reads), cuda.to_device(refs), int(max_edits),
                                                  ks, it, cuda.to_device(table), compare, d_acc, d_est)
    return d_acc.copy_to_host(), d_est.copy_to_host()
