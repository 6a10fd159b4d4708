"""Shouji pre-alignment filter (Alser et al., Bioinformatics 2019), batch-parallel Numba kernel.

The decisions equal those of the authors' CPU implementation (CMU-SAFARI/Shouji,
CPU_Implementation/Shouji.c) for every ACGT pair, threshold and grid size; this module is an
independent implementation of the same procedure:

1. Hamming (main-diagonal) mismatch count h; accept when h <= E (estimate h). E == 0: reject.
2. For e = 1..E, deletion diagonal e (read[p-e] vs ref[p], positions p < e are 1) and then
   insertion diagonal e (read[p+e] vs ref[p], positions p > L-e-1 are 1): accept as soon as one
   has at least L-E matching positions (estimate L - matches, i.e. the 1s of that diagonal).
3. The 2E+1 "neighbourhood map" rows in the authors' order: 0 = main diagonal, 1..E = deletion
   diagonals, E+1..2E = insertion diagonals. The Shouji bit-vector starts as row 0. A window of
   `window` columns slides one column at a time, G = 0..L-1:
   - G <= L-window: the row with the most zeros in [G, G+window) wins; on a tie a later row i
     takes over when its bit at column G is 0 (the authors' three-level tie test reduces to this).
   - otherwise, while G <= L-3: the tail [G, L) is used; on a tie a later row i takes over only
     when its bit at G is 0 AND the current winner's bit at G is 1.
   - the winner's window is copied into the bit-vector when it has more zeros than the bit-vector
     has there now.
   - after each step the 1s of the bit-vector before G are counted (two adjacent 1s count as one
     edit, scanning left to right) and the pair is rejected when that count exceeds E.
4. The final count over the whole bit-vector (same counting) is the estimate; accept iff <= E.

Inputs are ASCII. Two ways to treat characters, chosen per call by the runtime flag `compare`
(the plugin option `undefined`):

* compare=False (`undefined=accept`, the default): lower-case acgt equal their upper-case bases; a
  pair holding any other character (N, ...) is "undefined": accepted with estimate -2.
* compare=True (`undefined=compare`): the raw bytes are compared, as the authors' code compares its
  `char`s: N matches N, N against a base is a mismatch, and the comparison is case-sensitive ('a'
  differs from 'A'). Every pair is filtered; the decisions and estimates are the authors' on any
  input.
"""
import numpy as np
from numba import njit, prange

from pymap.kernels.encoding import load_pair

UNDEFINED = -2
REJECTED = -1
_CHUNK = 64


@njit(cache=True, nogil=True)
def _greedy_ones(bits, start, stop, limit, count):
    """Advance the left-to-right '11 counts once' scan from `start` while < stop; (pos, count)."""
    p = start
    while p < stop:
        if bits[p] == 1:
            count += 1
            if p + 1 < limit and bits[p + 1] == 1:
                p += 2
            else:
                p += 1
        else:
            p += 1
    return p, count


@njit(cache=True, nogil=True)
def shouji_pair(rd, rf, e_max, window, mask, zeros, bits):
    """Shouji on one pair of uint8 sequences of length L (base codes or raw bytes: only equality
    matters). Returns the estimate (>= 0, accepted) or -1 (rejected). mask: uint8
    (>= 2*min(E,L)+1, L), zeros: int32 (same rows, L+1), bits: uint8 (L) scratch buffers."""
    L = rd.shape[0]
    ham = 0
    for p in range(L):
        if rd[p] != rf[p]:
            ham += 1
    if ham <= e_max:
        return ham
    if e_max <= 0:
        return REJECTED
    # here E < ham <= L, so every shift e <= E < L leaves at least one compared column
    rows = 2 * e_max + 1
    # row 0: main diagonal; zeros[r, p] = number of 0 bits of row r in columns [0, p)
    z = 0
    zeros[0, 0] = 0
    for p in range(L):
        b = 1 if rd[p] != rf[p] else 0
        mask[0, p] = b
        z += 1 - b
        zeros[0, p + 1] = z
    for e in range(1, e_max + 1):
        r = e  # deletion diagonal: read[p-e] against ref[p]
        z = 0
        zeros[r, 0] = 0
        for p in range(L):
            if p < e:
                b = 1
            else:
                b = 1 if rd[p - e] != rf[p] else 0
            mask[r, p] = b
            z += 1 - b
            zeros[r, p + 1] = z
        if z >= L - e_max:
            return L - z
        r = e + e_max  # insertion diagonal: read[p+e] against ref[p]
        z = 0
        zeros[r, 0] = 0
        for p in range(L):
            if p > L - e - 1:
                b = 1
            else:
                b = 1 if rd[p + e] != rf[p] else 0
            mask[r, p] = b
            z += 1 - b
            zeros[r, p + 1] = z
        if z >= L - e_max:
            return L - z

    for p in range(L):
        bits[p] = mask[0, p]
    pos = 0
    count = 0
    for g in range(L):
        if g <= L - window:
            width = window
            tail = False
        elif g <= L - 3:
            width = L - g
            tail = True
        else:
            width = 0
            tail = False
        if width > 0:
            best = 0
            best_row = 0
            for i in range(rows):
                c = zeros[i, g + width] - zeros[i, g]
                if c > best:
                    best = c
                    best_row = i
                elif c == best:
                    if tail:
                        if mask[i, g] == 0 and mask[best_row, g] == 1:
                            best_row = i
                    elif mask[i, g] == 0:
                        best_row = i
            magnet = 0
            for q in range(g, g + width):
                if bits[q] == 0:
                    magnet += 1
            if best > magnet:
                for q in range(g, g + width):
                    bits[q] = mask[best_row, q]
        # columns <= g are final now; count the prefix [0, g) (the scan may pair g-1 with g)
        pos, count = _greedy_ones(bits, pos, g, L, count)
        if count > e_max:
            return REJECTED
    pos, count = _greedy_ones(bits, pos, L, L, count)
    if count <= e_max:
        return count
    return REJECTED


@njit(cache=True, parallel=True)
def shouji_batch(reads, refs, max_edits, window, compare):
    """Shouji over a batch: reads, refs uint8 ASCII (n, L) -> (accept bool[n], estimate int32[n]).
    compare (bool, a runtime flag: one compiled version serves both settings): False = fold case and
    accept pairs with non-ACGT characters (estimate -2); True = compare the raw bytes like the
    authors' code."""
    n = reads.shape[0]
    L = reads.shape[1]
    accept = np.zeros(n, np.bool_)
    estimate = np.full(n, REJECTED, np.int32)
    e_rows = min(max_edits, L)
    if e_rows < 0:
        e_rows = 0
    rows = 2 * e_rows + 1
    n_chunks = (n + _CHUNK - 1) // _CHUNK
    for c in prange(n_chunks):
        mask = np.empty((rows, L), np.uint8)
        zeros = np.empty((rows, L + 1), np.int32)
        bits = np.empty(L, np.uint8)
        rd = np.empty(L, np.uint8)
        rf = np.empty(L, np.uint8)
        hi = min(n, (c + 1) * _CHUNK)
        for i in range(c * _CHUNK, hi):
            if load_pair(reads, refs, i, rd, rf, compare):
                accept[i] = True
                estimate[i] = UNDEFINED
                continue
            est = shouji_pair(rd, rf, max_edits, window, mask, zeros, bits)
            if est >= 0:
                accept[i] = True
            estimate[i] = est
    return accept, estimate
