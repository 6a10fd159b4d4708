"""Banded semi-global edit-distance extension (Numba, CPU).

Problem, for one candidate (read index r, strand s, diagonal start pos, contig [clo, chi), threshold e):
the oriented read R (length L; strand 1 uses the reverse-complement codes) is aligned *entirely*
against a substring of the reference window W = ref[lo:hi], lo = max(clo, pos - e),
hi = min(chi, pos + L + e), with unit costs (mismatch, insertion, deletion = 1) and free leading and
trailing reference gaps (Edlib's "HW"/infix mode). An N (code 4) in the read or the reference
mismatches everything, N included. Result: the minimum distance D if D <= e (else -1), the global
start of the alignment on the reference and (align kernel) its CIGAR.

DP coordinates: cell (j, c) = j read bases consumed, reference consumed up to global column c
(exclusive end), lo <= c <= hi. D(0, c) = 0 (free start), D(j, c) = min(D(j-1, c-1) + sub,
D(j-1, c) + 1 [I], D(j, c-1) + 1 [D]); the distance is min_c D(L, c) (free end).
Diagonal of a cell: d = c - j - pos (the candidate diagonal is d = 0).

Band. The kernels evaluate the diagonals d in [lo - pos - e, hi - pos - L + e] (at most 4e + 1 of
them). This band is *exact* for the window: an alignment with at most e edits starts on a diagonal
d0 >= lo - pos, ends on d_L <= hi - pos - L, and every insertion moves it one diagonal down,
every deletion one up, so it never leaves [d0 - #I, d_L + #I] which lies inside the band. Hence
whenever the unbanded window optimum is <= e the banded one equals it (and every optimal path and
every predecessor value compared during traceback is the same), and when it is > e the banded
value is > e too. Note that a band of only +-e around the candidate diagonal would NOT be exact:
an alignment starting at pos - e with one insertion reaches d = -e - 1.

Algorithm (band width w <= 63): Myers/Hyyro bit-parallel DP over the band, one 64-bit word per
read row (the row-wise transpose of Myers' algorithm: the bit vector runs over the reference
columns of the band, the read is iterated, the band is diagonal-aligned so each row shifts the
previous row's vectors by one). Out-of-band neighbours are given a +1 delta (a value that never
wins or ties), cells left of the window get D(0, c) = lo - c and never-matching bases (strictly
worse than any path inside the window), cells right of the window are never used. Rows are
L steps of ~25 word operations; the four delta vectors of each row are kept (O(L) words of
per-thread scratch) for the traceback. A lower bound on the row minimum (value at bit 0 minus the
number of -1 deltas) stops hopeless candidates early. For w > 63 (e > 15) the same algorithm runs
on ceil(w / 64) words per row (horizontal carry chained between words as in Hyyro's / Edlib's
blocks). `_extend_scalar` is a plain banded DP with identical semantics and tie-breaking, kept as
an executable specification (the tests check all three agree).

Tie-breaking (both kernels return the same start):
  * end column: minimum distance, then the end diagonal closest to the candidate diagonal
    (|t - (pos + L)| smallest), then the smaller t; then, if the best path into that end has to
    finish with an insertion while t + 1 is also optimal, t + 1 is taken (the last read base is
    then a mismatch instead of a trailing insertion next to the free end);
  * traceback from the end, at every cell: diagonal (M) first, then insertion (I), then
    deletion (D). Diagonal-first while walking backwards keeps matches at the right and places gaps
    as far left as possible (left-aligned indels, as in GATK/bcftools normalisation); it also means
    that a leading I only occurs when the alignment starts at the window's left edge (no reference
    base to mismatch against) and a leading D never occurs (row 0 is free); a trailing D never
    occurs (the end is a column minimum) and a trailing I only at the window's right edge.
  * start = the column where the traceback reaches row 0. The distance-only kernel runs the same
    traceback (without writing ops) so that distances() and align() agree exactly.

CIGAR: BAM-style uint32 (len << 4 | op), M=0, I=1, D=2, adjacent ops merged; M covers matches and
mismatches. At most 2 * #indels + 1 <= 2e + 1 ops per candidate, which sizes the first-pass
buffer; the kernel then compacts to exact offsets.

Everything is per candidate, with no shared state, so results do not depend on the thread count.
"""
import numpy as np
from numba import njit, prange

OP_M = 0
OP_I = 1
OP_D = 2
_OPCHARS = "MIDNSHP=X"

#: widest band handled by the bit-parallel kernel (one uint64, top bit kept free)
MAX_BITS = 63
#: at most this many candidates per parallel chunk (scratch is allocated once per chunk)
_CHUNK = 128

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_BIG = 1 << 28


@njit(inline="always")
def _popcount(x):
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@njit(inline="always")
def _bit(x, k):
    return np.int64((x >> np.uint64(k)) & _ONE)


@njit(inline="always")
def _delta(p, m, k):
    """+1 / 0 / -1 from the (P, M) delta vectors at bit k."""
    return _bit(p, k) - _bit(m, k)


@njit(inline="always")
def _is_match(read, ri, ref, q, lo, hi):
    if q < lo or q >= hi:
        return False
    a = read[ri]
    return a < 4 and a == ref[q]


@njit(inline="always")
def _emit(cig, cbase, nops, cur_op, cur_len, write):
    """Flush a run (ops are produced end-to-start and reversed afterwards)."""
    if write:
        cig[cbase + nops] = np.uint32((cur_len << 4) | cur_op)
    return nops + 1


@njit(inline="always")
def _finish_cigar(cig, cbase, nops, write):
    if write:
        a = cbase
        b = cbase + nops - 1
        while a < b:
            t = cig[a]
            cig[a] = cig[b]
            cig[b] = t
            a += 1
            b -= 1


@njit(cache=True, nogil=True)
def _extend_bits(read, ra, L, ref, pos, lo, hi, e, S, m, cig, cbase, write):
    """Bit-parallel banded kernel (band width <= MAX_BITS). Returns (dist, start, nops)."""
    dlo = lo - pos - e
    w = (hi - pos - L + e) - dlo + 1
    wu = np.uint64(w)
    mask = (_ONE << wu) - _ONE
    top = _ONE << np.uint64(w - 1)
    b0 = pos + dlo                      # column of bit 0 in row 0; row j: b0 + j
    # row 0: D(0, c) = max(0, lo - c); lo - b0 == e
    V = e
    Pv = _ZERO
    Mv = _ZERO
    for k in range(1, min(e, w - 1) + 1):
        Mv |= _ONE << np.uint64(k)
    S[2, 0] = Pv
    S[3, 0] = Mv
    # match masks per reference code (index 4: N/outside, never read), m[5] = 0 for read N
    for t in range(6):
        m[t] = _ZERO
    for k in range(w - 1):              # preload: bit k+1 <-> ref[b0 + k] (row 1 after its shift)
        q = b0 + k
        cc = 4
        if q >= lo and q < hi:
            cc = ref[q]
        m[cc] |= _ONE << np.uint64(k + 1)
    for j in range(1, L + 1):
        for t in range(5):
            m[t] >>= _ONE
        q = b0 + j + w - 2              # reference base of the new top bit
        cc = 4
        if q >= lo and q < hi:
            cc = ref[q]
        m[cc] |= top
        rb = read[ra + j - 1]
        eq = m[rb + (rb >> 2)]          # code 4 -> m[5] == 0
        # previous row, diagonal-aligned: bit k of row j-1 moves to bit k-1; out-of-band top = +1
        Pvp = (Pv >> _ONE) | top
        Mvp = Mv >> _ONE
        Xv = eq | Mvp
        Xh = (((eq & Pvp) + Pvp) ^ Pvp) | eq
        Ph = Mvp | ~(Xh | Pvp)          # bits >= w hold garbage that only flows upwards;
        Mh = Pvp & Xh                   # Mv is masked so that its shift brings in a clean top bit
        V += np.int64(Pvp & _ONE) - np.int64(Mvp & _ONE) + np.int64(Ph & _ONE) - np.int64(Mh & _ONE)
        S[0, j] = Ph
        S[1, j] = Mh
        Phs = (Ph << _ONE) | _ONE       # out-of-band left neighbour: +1
        Mhs = Mh << _ONE
        Pv = Mhs | ~(Xv | Phs)
        Mv = (Phs & Xv) & mask
        S[2, j] = Pv
        S[3, j] = Mv
        if (j & 7) == 0:
            if V - _popcount(Mv & ~_ONE) > e:
                return -1, -1, 0
    # end column on row L: min value, closest to the candidate diagonal, then smaller
    bL = b0 + L
    best = _BIG
    bestk = -1
    bestoff = _BIG
    v = V
    for k in range(w):
        if k > 0:
            v += _delta(Pv, Mv, k)
        c = bL + k
        if c < lo or c > hi:
            continue
        off = abs(c - pos - L)
        if v < best or (v == best and off < bestoff):
            best = v
            bestk = k
            bestoff = off
    if bestk < 0 or best > e:
        return -1, -1, 0
    D = best
    k = bestk
    # trailing-insertion fix: if the preferred last step is I and the next column is optimal too
    j = L
    if L > 0:
        c = bL + k
        up = D - _delta(S[0, j], S[1, j], k)
        dhp = 1
        if k + 1 < w:
            dhp = _delta(S[2, j - 1], S[3, j - 1], k + 1)
        is_diag = False
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            is_diag = up - dhp + sub == D
        if not is_diag and k + 1 < w and up + 1 == D and c + 1 <= hi and _delta(Pv, Mv, k + 1) == 0:
            k += 1
    # traceback: M > I > D
    v = D
    nops = 0
    cur_op = -1
    cur_len = 0
    while j > 0:
        # a match is always an optimal diagonal step (diagonal deltas are 0 or 1): run them off
        q = b0 + j + k - 1
        j0 = j
        while j > 0 and q >= lo and q < hi:
            a = read[ra + j - 1]
            if a >= 4 or a != ref[q]:
                break
            j -= 1
            q -= 1
        if j < j0:
            if cur_op == OP_M:
                cur_len += j0 - j
            else:
                if cur_op >= 0:
                    nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
                cur_op = OP_M
                cur_len = j0 - j
            if j == 0:
                break
        c = b0 + j + k
        up = v - _delta(S[0, j], S[1, j], k)
        dhp = 1
        if k + 1 < w:
            dhp = _delta(S[2, j - 1], S[3, j - 1], k + 1)
        diag = up - dhp
        op = OP_D
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            if diag + sub == v:
                op = OP_M
        if op == OP_D and k + 1 < w and up + 1 == v:
            op = OP_I
        if op == OP_M:
            j -= 1
            v = diag
        elif op == OP_I:
            j -= 1
            k += 1
            v = up
        else:
            v = v - _delta(S[2, j], S[3, j], k)
            k -= 1
        if op == cur_op:
            cur_len += 1
        else:
            if cur_op >= 0:
                nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
            cur_op = op
            cur_len = 1
    if cur_op >= 0:
        nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
    _finish_cigar(cig, cbase, nops, write)
    return D, b0 + k, nops


@njit(inline="always")
def _mdelta(S, tp, tm, row, nw, k):
    """+1 / 0 / -1 at bit k of the multi-word (P, M) vectors S[tp], S[tm] of one row."""
    x = row * nw + (k >> 6)
    return _bit(S[tp, x], k & 63) - _bit(S[tm, x], k & 63)


@njit(cache=True, nogil=True)
def _extend_multi(read, ra, L, ref, pos, lo, hi, e, SM, mm, Pv, Mv, cig, cbase, write):
    """Multi-word version of _extend_bits (any band width; Hyyro's block chaining of the
    horizontal carry between 64-bit words). Same semantics and results."""
    dlo = lo - pos - e
    w = (hi - pos - L + e) - dlo + 1
    nw = (w + 63) >> 6
    tw = (w - 1) & 63                   # top bit inside the last word
    topw = _ONE << np.uint64(tw)
    lastmask = (topw - _ONE) | topw
    b0 = pos + dlo
    V = e
    for i in range(nw):
        Pv[i] = _ZERO
        Mv[i] = _ZERO
        for t in range(6):
            mm[t, i] = _ZERO
    for k in range(1, min(e, w - 1) + 1):
        Mv[k >> 6] |= _ONE << np.uint64(k & 63)
    for i in range(nw):
        SM[2, i] = Pv[i]
        SM[3, i] = Mv[i]
    for k in range(w - 1):
        q = b0 + k
        cc = 4
        if q >= lo and q < hi:
            cc = ref[q]
        mm[cc, (k + 1) >> 6] |= _ONE << np.uint64((k + 1) & 63)
    s63 = np.uint64(63)
    for j in range(1, L + 1):
        for t in range(5):
            for i in range(nw - 1):
                mm[t, i] = (mm[t, i] >> _ONE) | (mm[t, i + 1] << s63)
            mm[t, nw - 1] >>= _ONE
        q = b0 + j + w - 2
        cc = 4
        if q >= lo and q < hi:
            cc = ref[q]
        mm[cc, nw - 1] |= topw
        rb = read[ra + j - 1]
        rbi = rb + (rb >> 2)
        hin = 1
        base = j * nw
        lowm = np.int64(0)
        for i in range(nw):
            if i + 1 < nw:
                Pvp = (Pv[i] >> _ONE) | (Pv[i + 1] << s63)
                Mvp = (Mv[i] >> _ONE) | (Mv[i + 1] << s63)
            else:
                Pvp = (Pv[i] >> _ONE) | topw
                Mvp = Mv[i] >> _ONE
            eq = mm[rbi, i]
            Xv = eq | Mvp
            if hin < 0:
                eq |= _ONE
            Xh = (((eq & Pvp) + Pvp) ^ Pvp) | eq
            Ph = Mvp | ~(Xh | Pvp)
            Mh = Pvp & Xh
            hout = np.int64(Ph >> s63) - np.int64(Mh >> s63)
            if i == 0:
                V += np.int64(Pvp & _ONE) - np.int64(Mvp & _ONE) + np.int64(Ph & _ONE) - np.int64(Mh & _ONE)
            SM[0, base + i] = Ph
            SM[1, base + i] = Mh
            Phs = Ph << _ONE
            Mhs = Mh << _ONE
            if hin > 0:
                Phs |= _ONE
            elif hin < 0:
                Mhs |= _ONE
            nPv = Mhs | ~(Xv | Phs)
            nMv = Phs & Xv
            if i + 1 == nw:
                nMv &= lastmask
            Pv[i] = nPv
            Mv[i] = nMv
            SM[2, base + i] = nPv
            SM[3, base + i] = nMv
            lowm += _popcount(nMv)
            hin = hout
        if (j & 7) == 0:
            if V - (lowm - np.int64(Mv[0] & _ONE)) > e:
                return -1, -1, 0
    bL = b0 + L
    best = _BIG
    bestk = -1
    bestoff = _BIG
    v = V
    for k in range(w):
        if k > 0:
            v += _mdelta(SM, 2, 3, L, nw, k)
        c = bL + k
        if c < lo or c > hi:
            continue
        off = abs(c - pos - L)
        if v < best or (v == best and off < bestoff):
            best = v
            bestk = k
            bestoff = off
    if bestk < 0 or best > e:
        return -1, -1, 0
    D = best
    k = bestk
    j = L
    if L > 0:
        c = bL + k
        up = D - _mdelta(SM, 0, 1, j, nw, k)
        dhp = 1
        if k + 1 < w:
            dhp = _mdelta(SM, 2, 3, j - 1, nw, k + 1)
        is_diag = False
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            is_diag = up - dhp + sub == D
        if not is_diag and k + 1 < w and up + 1 == D and c + 1 <= hi \
                and _mdelta(SM, 2, 3, j, nw, k + 1) == 0:
            k += 1
    v = D
    nops = 0
    cur_op = -1
    cur_len = 0
    while j > 0:
        q = b0 + j + k - 1
        j0 = j
        while j > 0 and q >= lo and q < hi:
            a = read[ra + j - 1]
            if a >= 4 or a != ref[q]:
                break
            j -= 1
            q -= 1
        if j < j0:
            if cur_op == OP_M:
                cur_len += j0 - j
            else:
                if cur_op >= 0:
                    nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
                cur_op = OP_M
                cur_len = j0 - j
            if j == 0:
                break
        c = b0 + j + k
        up = v - _mdelta(SM, 0, 1, j, nw, k)
        dhp = 1
        if k + 1 < w:
            dhp = _mdelta(SM, 2, 3, j - 1, nw, k + 1)
        diag = up - dhp
        op = OP_D
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            if diag + sub == v:
                op = OP_M
        if op == OP_D and k + 1 < w and up + 1 == v:
            op = OP_I
        if op == OP_M:
            j -= 1
            v = diag
        elif op == OP_I:
            j -= 1
            k += 1
            v = up
        else:
            v = v - _mdelta(SM, 2, 3, j, nw, k)
            k -= 1
        if op == cur_op:
            cur_len += 1
        else:
            if cur_op >= 0:
                nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
            cur_op = op
            cur_len = 1
    if cur_op >= 0:
        nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
    _finish_cigar(cig, cbase, nops, write)
    return D, b0 + k, nops


@njit(cache=True, nogil=True)
def _extend_scalar(read, ra, L, ref, pos, lo, hi, e, cig, cbase, write):
    """Plain banded DP with the same band, semantics and tie-breaking (any band width; reference)."""
    dlo = lo - pos - e
    w = (hi - pos - L + e) - dlo + 1
    b0 = pos + dlo
    cap = e + 1                          # values > e are saturated (never tie with a value <= e)
    INF = cap + 2
    T = np.empty((L + 1, w), np.int32)
    for k in range(w):
        c = b0 + k
        T[0, k] = 0 if (c >= lo and c <= hi) else INF
    for j in range(1, L + 1):
        rowmin = INF
        for k in range(w):
            c = b0 + j + k
            if c < lo or c > hi:
                T[j, k] = INF
                continue
            best = INF
            if c - 1 >= lo:
                sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
                best = T[j - 1, k] + sub
            if k + 1 < w:
                best = min(best, T[j - 1, k + 1] + 1)
            if k > 0:
                best = min(best, T[j, k - 1] + 1)
            if best > cap:
                best = cap
            T[j, k] = best
            rowmin = min(rowmin, best)
        if rowmin > e:
            return -1, -1, 0
    bL = b0 + L
    best = INF
    bestk = -1
    bestoff = _BIG
    for k in range(w):
        c = bL + k
        if c < lo or c > hi:
            continue
        v = T[L, k]
        off = abs(c - pos - L)
        if v < best or (v == best and off < bestoff):
            best = v
            bestk = k
            bestoff = off
    if bestk < 0 or best > e:
        return -1, -1, 0
    D = best
    k = bestk
    j = L
    if L > 0:
        c = bL + k
        is_diag = False
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            is_diag = T[j - 1, k] + sub == D
        if not is_diag and k + 1 < w and T[j - 1, k + 1] + 1 == D and c + 1 <= hi and T[j, k + 1] == D:
            k += 1
    v = D
    nops = 0
    cur_op = -1
    cur_len = 0
    while j > 0:
        c = b0 + j + k
        op = OP_D
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            if T[j - 1, k] + sub == v:
                op = OP_M
        if op == OP_D and k + 1 < w and T[j - 1, k + 1] + 1 == v:
            op = OP_I
        if op == OP_M:
            j -= 1
        elif op == OP_I:
            j -= 1
            k += 1
        else:
            k -= 1
        v = T[j, k]
        if op == cur_op:
            cur_len += 1
        else:
            if cur_op >= 0:
                nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
            cur_op = op
            cur_len = 1
    if cur_op >= 0:
        nops = _emit(cig, cbase, nops, cur_op, cur_len, write)
    _finish_cigar(cig, cbase, nops, write)
    return D, b0 + k, nops


@njit(cache=True, nogil=True)
def _extend_one(read_codes, rc_codes, read_offsets, ref, r, strand, pos, clo, chi, e, S, m, SM, mm, Pvw,
                Mvw, cig, cbase, write):
    ra = np.int64(read_offsets[r])
    L = np.int64(read_offsets[r + 1]) - ra
    pos = np.int64(pos)
    clo = np.int64(clo)
    chi = np.int64(chi)
    e = np.int64(e)
    if e < 0:
        return -1, -1, 0
    lo = max(clo, pos - e)
    hi = min(chi, pos + L + e)
    if hi - lo < L - e or hi < lo:     # window too short, or not overlapping the contig
        return -1, -1, 0
    read = rc_codes if strand != 0 else read_codes
    w = (hi - pos - L + e) - (lo - pos - e) + 1
    if w <= MAX_BITS:
        return _extend_bits(read, ra, L, ref, pos, lo, hi, e, S, m, cig, cbase, write)
    return _extend_multi(read, ra, L, ref, pos, lo, hi, e, SM, mm, Pvw, Mvw, cig, cbase, write)


@njit(cache=True, nogil=True)
def _chunk(n):
    """Chunk size: <= _CHUNK, and >= 64 chunks on small batches (load balance)."""
    return max(1, min(_CHUNK, n // 64))


@njit(cache=True, nogil=True)
def _scratch_dims(read_offsets, c_maxe):
    """(longest read, words per row needed by the widest band when it exceeds MAX_BITS, else 1)."""
    mx = 0
    for r in range(read_offsets.shape[0] - 1):
        mx = max(mx, read_offsets[r + 1] - read_offsets[r])
    emax = 0
    for i in range(c_maxe.shape[0]):
        emax = max(emax, np.int64(c_maxe[i]))
    nw = 1
    if 4 * emax + 1 > MAX_BITS:
        nw = (4 * emax + 1 + 63) >> 6
    return mx, nw


@njit(parallel=True, cache=True, nogil=True)
def banded_distances(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                     c_maxe):
    """Distance pass: (dist int32[n], start int64[n]); -1 / -1 where no alignment within e."""
    n = c_read.shape[0]
    dist = np.full(n, -1, np.int32)
    start = np.full(n, -1, np.int64)
    maxl, nwm = _scratch_dims(read_offsets, c_maxe)
    write = n < 0                       # a runtime bool (not a literal): one compiled variant of the
    #                                     per-candidate functions serves both kernels and the tests
    cs = _chunk(n)
    nch = (n + cs - 1) // cs
    for ch in prange(nch):
        S = np.empty((4, maxl + 1), np.uint64)
        m = np.empty(6, np.uint64)
        nws = nwm if nwm > 1 else 0
        SM = np.empty((4, (maxl + 1) * nws), np.uint64)
        mm = np.empty((6, nws), np.uint64)
        Pvw = np.empty(nws, np.uint64)
        Mvw = np.empty(nws, np.uint64)
        cig = np.empty(0, np.uint32)
        for i in range(ch * cs, min(n, (ch + 1) * cs)):
            d, s, _ = _extend_one(read_codes, rc_codes, read_offsets, ref_codes, c_read[i], c_strand[i],
                                  c_pos[i], c_lo[i], c_hi[i], c_maxe[i], S, m, SM, mm, Pvw, Mvw,
                                  cig, maxl * 0, write)   # non-literal 0: same reason
            dist[i] = d
            start[i] = s
    return dist, start


@njit(parallel=True, cache=True, nogil=True)
def banded_align(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 c_maxe):
    """Alignment pass: (dist, start, cigar uint32[], cigar_offsets int64[n+1])."""
    n = c_read.shape[0]
    dist = np.full(n, -1, np.int32)
    start = np.full(n, -1, np.int64)
    bound = np.empty(n + 1, np.int64)   # first pass: 2e+1 ops per candidate
    bound[0] = 0
    for i in range(n):
        bound[i + 1] = bound[i] + 2 * max(c_maxe[i], 0) + 1
    tmp = np.empty(bound[n], np.uint32)
    nops = np.zeros(n, np.int64)
    maxl, nwm = _scratch_dims(read_offsets, c_maxe)
    write = n >= 0
    cs = _chunk(n)
    nch = (n + cs - 1) // cs
    for ch in prange(nch):
        S = np.empty((4, maxl + 1), np.uint64)
        m = np.empty(6, np.uint64)
        nws = nwm if nwm > 1 else 0
        SM = np.empty((4, (maxl + 1) * nws), np.uint64)
        mm = np.empty((6, nws), np.uint64)
        Pvw = np.empty(nws, np.uint64)
        Mvw = np.empty(nws, np.uint64)
        for i in range(ch * cs, min(n, (ch + 1) * cs)):
            d, s, k = _extend_one(read_codes, rc_codes, read_offsets, ref_codes, c_read[i], c_strand[i],
                                  c_pos[i], c_lo[i], c_hi[i], c_maxe[i], S, m, SM, mm, Pvw, Mvw,
                                  tmp, bound[i], write)
            dist[i] = d
            start[i] = s
            nops[i] = k
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + nops[i]
    cigar = np.empty(offsets[n], np.uint32)
    for i in prange(n):
        a = bound[i]
        o = offsets[i]
        for t in range(nops[i]):
            cigar[o + t] = tmp[a + t]
    return dist, start, cigar, offsets


def cigar_to_string(cigar):
    """BAM-style uint32 CIGAR ops -> text, e.g. '40M1I59M' (empty string for no ops)."""
    return "".join(f"{int(x) >> 4}{_OPCHARS[int(x) & 15]}" for x in np.asarray(cigar).ravel())


def cigar_from_string(text):
    """'40M1I59M' -> BAM-style uint32 array (test helper, inverse of cigar_to_string)."""
    import re
    ops = [(int(n), _OPCHARS.index(o)) for n, o in re.findall(r"(\d+)([MIDNSHP=X])", text)]
    return np.array([(n << 4) | o for n, o in ops], dtype=np.uint32)
