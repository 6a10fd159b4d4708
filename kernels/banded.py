"""Banded semi-global edit-distance extension (Numba, CPU).

Problem, for one candidate (read index r, strand s, diagonal start pos, contig [clo, chi), threshold e):
the oriented read R (length L; strand 1 uses the reverse-complement codes) is aligned *entirely*
against a substring of the reference window W = ref[lo:hi], lo = max(clo, pos - e),
hi = min(chi, pos + L + e), with unit costs (mismatch, insertion, deletion = 1) and free leading and
trailing reference gaps (Edlib's "HW"/infix mode). An N (code 4) in the read or the reference
mismatches everything, N included. Result: the minimum distance D if D <= e (else -1), the global
start of the alignment on the reference and (alignment pass) its CIGAR.

DP coordinates: cell (j, c) = j read bases consumed, reference consumed up to global column c
(exclusive end), lo <= c <= hi. D(0, c) = 0 (free start), D(j, c) = min(D(j-1, c-1) + sub,
D(j-1, c) + 1 [I], D(j, c-1) + 1 [D]); the distance is min_c D(L, c) (free end).
Diagonal of a cell: d = c - j - pos (the candidate diagonal is d = 0).

Band. The kernel evaluates the diagonals d in [lo - pos - e, hi - pos - L + e] (at most 4e + 1 of
them). This band is *exact* for the window: an alignment with at most e edits starts on a diagonal
d0 >= lo - pos, ends on d_L <= hi - pos - L, and every insertion moves it one diagonal down,
every deletion one up, so it never leaves [d0 - #I, d_L + #I] which lies inside the band. Hence
whenever the unbanded window optimum is <= e the banded one equals it (and every optimal path and
every predecessor value compared during traceback is the same), and when it is > e the banded
value is > e too. Note that a band of only +-e around the candidate diagonal would NOT be exact:
an alignment starting at pos - e with one insertion reaches d = -e - 1.

Algorithm: Myers/Hyyro bit-parallel DP over the band (the row-wise transpose of Myers' algorithm:
the bit vector runs over the reference columns of the band, the read is iterated, the band is
diagonal-aligned so each row shifts the previous row's vectors by one), on nw = ceil(w / 64)
64-bit words per read row (one word whenever w <= 64, always so for e <= 15). Between the words of a row the
horizontal delta is carried as in Hyyro's / Edlib's blocks. Out-of-band neighbours are given a +1
delta (a value that never wins or ties), cells left of the window get D(0, c) = lo - c and
never-matching bases (strictly worse than any path inside the window), cells right of the window
are never used. Rows are L steps of ~25 operations per word; the four delta vectors of each row
are kept (O(L * nw) words of per-thread scratch) for the traceback. A lower bound on the row
minimum (value at bit 0 minus the number of -1 deltas) stops hopeless candidates early. The
distance and the alignment pass run the same kernel; a runtime flag says whether the traceback
writes its CIGAR.

Tie-breaking (both passes return the same start):
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
  * start = the column where the traceback reaches row 0. The distance pass runs the same
    traceback (without writing ops) so that distances() and align() agree exactly.

CIGAR: BAM-style uint32 (len << 4 | op), M=0, I=1, D=2, adjacent ops merged; M covers matches and
mismatches. At most 2 * #indels + 1 <= 2e + 1 ops per candidate, which sizes the first-pass
buffer; the kernel then compacts to exact offsets.

Everything is per candidate, with no shared state, so results do not depend on the thread count.

Compilation: banded_distances and banded_align are Python functions that pass their arrays on as
read-only C-contiguous views of fixed dtypes, so one compiled batch kernel (with the pass as a
runtime flag) serves both passes and every caller.
"""
import numpy as np
from numba import njit, prange

OP_M = 0
OP_I = 1
OP_D = 2
_OPCHARS = "MIDNSHP=X"

#: at most this many candidates per parallel chunk (scratch is allocated once per chunk)
_CHUNK = 128

_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_S63 = np.uint64(63)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_BIG = 1 << 28


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> np.uint64(2)) & _M2)
    x = (x + (x >> np.uint64(4))) & _M4
    return np.int64((x * _H01) >> np.uint64(56))


@njit(cache=True, nogil=True)
def _delta(S, tp, row, nw, k):
    """+1 / 0 / -1 at band bit k of row `row` of the delta pair (P, M) = (S[.. + tp], S[.. + tp + 1])."""
    x = 4 * (row * nw + (k >> 6)) + tp
    b = np.uint64(k & 63)
    return np.int64((S[np.uint64(x)] >> b) & _ONE) - np.int64((S[np.uint64(x + 1)] >> b) & _ONE)


@njit(cache=True, nogil=True)
def _is_match(read, ri, ref, q, lo, hi):
    if q < lo or q >= hi:
        return False
    a = read[np.uint64(ri)]
    return a < 4 and a == ref[np.uint64(q)]


@njit(cache=True, nogil=True)
def _step(Pvp, Mvp, eq, hp, hm):
    """One 64-bit word of a row: vertical deltas (Pvp, Mvp) of the row above (diagonal-aligned),
    match mask eq, horizontal carry (hp, hm) into bit 0. Returns the horizontal deltas (Ph, Mh)
    and the new vertical ones (Pv, Mv). Bits above the band hold garbage that only flows upwards."""
    Xv = eq | Mvp
    eq |= hm
    Xh = (((eq & Pvp) + Pvp) ^ Pvp) | eq
    Ph = Mvp | ~(Xh | Pvp)
    Mh = Pvp & Xh
    Phs = (Ph << _ONE) | hp
    Mhs = (Mh << _ONE) | hm
    return Ph, Mh, Mhs | ~(Xv | Phs), Phs & Xv


@njit(cache=True, nogil=True)
def _extend(read, ra, L, ref, pos, lo, hi, e, S, B, cig, cbase, write):
    """Banded distance, start and (if `write`) CIGAR of read[ra:ra + L] in the window [lo, hi).

    S: uint64 scratch, >= 4 * (L + 1) * nw: word i of row j holds at 4 * (j * nw + i) the
    horizontal (P, M) deltas and at + 2 the vertical (P, M) deltas.
    B: uint64 scratch, >= 5 * (((L - 1) >> 6) + nw + 1): match bits over the window columns per base
    code A, C, G, T (bit x <-> reference column b0 + x); code 4 gets none (read N matches nothing).
    cig: CIGAR output, ops written from cig[cbase] on (only when `write`).
    Returns (dist, start, number of CIGAR ops), or (-1, -1, 0) when the distance exceeds e."""
    dlo = lo - pos - e
    w = (hi - pos - L + e) - dlo + 1
    nw = (w + 63) >> 6
    topw = _ONE << np.uint64((w - 1) & 63)     # top band bit, inside the last word
    lastmask = (topw - _ONE) | topw
    b0 = pos + dlo                              # column of bit 0 in row 0; row j: b0 + j
    # row 0: D(0, c) = max(0, lo - c); lo - b0 == e, so bits 1..e hold -1 deltas
    for i in range(nw):
        S[4 * i + 2] = _ZERO
        S[4 * i + 3] = _ZERO
    for k in range(1, min(e, w - 1) + 1):
        S[4 * (k >> 6) + 3] |= _ONE << np.uint64(k & 63)
    # match bits, nb words per code; row j, bit k <-> column b0 + j - 1 + k. N, outside the window: none.
    # (Indices in the loops below are cast to unsigned: Numba then emits no negative-index wraparound,
    # which costs ~20 % here.)
    nb = ((L - 1) >> 6) + nw + 1
    for x in range(5 * nb):
        B[x] = _ZERO
    xs = lo - b0                                # == e: the window's columns are xs <= x < xe
    xe = min(L + w - 1, hi - b0)
    for x0 in range(xs & ~63, xe, 64):          # 64 columns at a time, code bits in registers
        c0 = _ZERO
        c1 = _ZERO
        ok = _ZERO
        for x in range(max(x0, xs), min(x0 + 64, xe)):
            c = np.uint64(ref[np.uint64(b0 + x)])
            b = np.uint64(x & 63)
            c0 |= (c & _ONE) << b
            c1 |= ((c >> _ONE) & _ONE) << b
            ok |= np.uint64(c < 4) << b
        x = x0 >> 6
        B[x] = ok & ~c1 & ~c0
        B[nb + x] = ok & ~c1 & c0
        B[2 * nb + x] = ok & c1 & ~c0
        B[3 * nb + x] = ok & c1 & c0
    V = e                                       # D at bit 0 of the current row
    PL = S[4 * nw - 2]                          # the previous row's last word, kept in registers
    ML = S[4 * nw - 1]
    for j in range(1, L + 1):
        rb = read[np.uint64(ra + j - 1)]
        sh = np.uint64((j - 1) & 63)            # row j's match mask: B[code] >> (j - 1)
        rsh = _S63 - sh
        bx = min(np.int64(rb), 4) * nb + ((j - 1) >> 6)
        sx = 4 * j * nw                         # row j in S
        # previous row, diagonal-aligned: bit k of row j-1 moves to bit k-1; out-of-band top = +1;
        # out-of-band left neighbour: carry +1 into bit 0
        hp = _ONE
        hm = _ZERO
        for i in range(nw - 1):                 # all words but the last
            x = sx + 4 * i
            y = x - 4 * nw
            Pvp = (S[np.uint64(y + 2)] >> _ONE) | (S[np.uint64(y + 6)] << _S63)
            Mvp = (S[np.uint64(y + 3)] >> _ONE) | (S[np.uint64(y + 7)] << _S63)
            eq = (B[np.uint64(bx + i)] >> sh) | ((B[np.uint64(bx + i + 1)] << _ONE) << rsh)
            Ph, Mh, Pv, Mv = _step(Pvp, Mvp, eq, hp, hm)
            S[np.uint64(x)] = Ph
            S[np.uint64(x + 1)] = Mh
            S[np.uint64(x + 2)] = Pv
            S[np.uint64(x + 3)] = Mv
            if i == 0:
                V += np.int64(Pvp & _ONE) - np.int64(Mvp & _ONE) + np.int64(Ph & _ONE) - np.int64(Mh & _ONE)
            hp = Ph >> _S63
            hm = Mh >> _S63
        # the last word (the only one when nw == 1); Mv masked so that its shift brings in a clean top bit
        Pvp = (PL >> _ONE) | topw
        Mvp = ML >> _ONE
        eq = (B[np.uint64(bx + nw - 1)] >> sh) | ((B[np.uint64(bx + nw)] << _ONE) << rsh)
        Ph, Mh, PL, ML = _step(Pvp, Mvp, eq, hp, hm)
        ML &= lastmask
        x = sx + 4 * nw - 4
        S[np.uint64(x)] = Ph
        S[np.uint64(x + 1)] = Mh
        S[np.uint64(x + 2)] = PL
        S[np.uint64(x + 3)] = ML
        if nw == 1:
            V += np.int64(Pvp & _ONE) - np.int64(Mvp & _ONE) + np.int64(Ph & _ONE) - np.int64(Mh & _ONE)
        if (j & 7) == 0:
            neg = -np.int64(S[np.uint64(sx + 3)] & _ONE)
            for i in range(nw):
                neg += _popcount(S[np.uint64(sx + 4 * i + 3)])
            if V - neg > e:
                return -1, -1, 0
    # end column on row L: min value, closest to the candidate diagonal, then smaller
    bL = b0 + L
    best = _BIG
    bestk = np.int64(-1)                 # not a literal: _delta is compiled for one signature
    bestoff = _BIG
    v = V
    for k in range(w):
        if k > 0:
            v += _delta(S, np.int64(2), L, nw, k)
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
        up = D - _delta(S, np.int64(0), j, nw, k)
        dhp = 1
        if k + 1 < w:
            dhp = _delta(S, np.int64(2), j - 1, nw, k + 1)
        is_diag = False
        if c - 1 >= lo:
            sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
            is_diag = up - dhp + sub == D
        if not is_diag and k + 1 < w and up + 1 == D and c + 1 <= hi and _delta(S, np.int64(2), j, nw, k + 1) == 0:
            k += 1
    # traceback: M > I > D; ops are produced end-to-start, merged into runs, reversed at the end
    v = D
    nops = 0
    cur_op = -1
    cur_len = 0
    while j > 0:
        # a match is always an optimal diagonal step (diagonal deltas are 0 or 1): run them off
        q = b0 + j + k - 1
        j0 = j
        while j > 0 and q >= lo and q < hi:
            a = read[np.uint64(ra + j - 1)]
            if a >= 4 or a != ref[np.uint64(q)]:
                break
            j -= 1
            q -= 1
        n = j0 - j
        if n > 0:
            op = OP_M
        else:
            c = b0 + j + k
            up = v - _delta(S, np.int64(0), j, nw, k)
            dhp = 1
            if k + 1 < w:
                dhp = _delta(S, np.int64(2), j - 1, nw, k + 1)
            diag = up - dhp
            op = OP_D
            if c - 1 >= lo:
                sub = 0 if _is_match(read, ra + j - 1, ref, c - 1, lo, hi) else 1
                if diag + sub == v:
                    op = OP_M
            if op == OP_D and k + 1 < w and up + 1 == v:
                op = OP_I
            n = 1
            if op == OP_M:
                j -= 1
                v = diag
            elif op == OP_I:
                j -= 1
                k += 1
                v = up
            else:
                v = v - _delta(S, np.int64(2), j, nw, k)
                k -= 1
        if op == cur_op:
            cur_len += n
        else:
            if cur_op >= 0:
                if write:
                    cig[cbase + nops] = np.uint32((cur_len << 4) | cur_op)
                nops += 1
            cur_op = op
            cur_len = n
    if cur_op >= 0:
        if write:
            cig[cbase + nops] = np.uint32((cur_len << 4) | cur_op)
        nops += 1
    if write:
        a = cbase
        b = cbase + nops - 1
        while a < b:
            t = cig[a]
            cig[a] = cig[b]
            cig[b] = t
            a += 1
            b -= 1
    return D, b0 + k, nops


@njit(cache=True, nogil=True)
def _candidate(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe, i, S, B,
               cig, cbase, write):
    """_extend for candidate i of a batch (its window: [pos - e, pos + L + e] within its contig);
    (-1, -1, 0) when e < 0 or the window cannot hold the read within e. The CUDA kernel calls it too."""
    r = c_read[i]
    ra = np.int64(read_offsets[r])
    L = np.int64(read_offsets[r + 1]) - ra
    pos = np.int64(c_pos[i])
    e = np.int64(c_maxe[i])
    lo = max(np.int64(c_lo[i]), pos - e)
    hi = min(np.int64(c_hi[i]), pos + L + e)
    if e >= 0 and hi - lo >= L - e and hi >= lo:
        read = rc_codes if c_strand[i] != 0 else read_codes
        return _extend(read, ra, L, ref_codes, pos, lo, hi, e, S, B, cig, cbase, write)
    return -1, -1, 0


@njit(parallel=True, cache=True, nogil=True)
def _extend_batch(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe,
                  write):
    """Both passes (a runtime `write`, so one compiled kernel): (dist, start, cigar, cigar_offsets);
    without `write` the CIGAR is empty and its offsets are all 0."""
    n = c_read.shape[0]
    dist = np.empty(n, np.int32)
    start = np.empty(n, np.int64)
    nops = np.empty(n, np.int64)
    # scratch sizes: longest read, words per row of the widest band (4 * emax + 1 diagonals)
    maxl = 0
    for r in range(read_offsets.shape[0] - 1):
        maxl = max(maxl, read_offsets[r + 1] - read_offsets[r])
    emax = 0
    for i in range(n):
        emax = max(emax, np.int64(c_maxe[i]))
    nwm = (4 * emax + 64) >> 6
    nbm = ((maxl - 1) >> 6) + nwm + 2
    # CIGAR first pass: room for 2e + 1 ops per candidate
    bound = np.empty(n + 1, np.int64)
    bound[0] = 0
    for i in range(n):
        bound[i + 1] = bound[i] + (2 * max(np.int64(c_maxe[i]), 0) + 1 if write else 0)
    tmp = np.empty(bound[n], np.uint32)
    cs = max(1, min(_CHUNK, n // 64))          # >= 64 chunks on small batches (load balance)
    nch = (n + cs - 1) // cs
    for ch in prange(nch):
        S = np.empty(4 * (maxl + 1) * nwm, np.uint64)
        B = np.empty(5 * nbm, np.uint64)
        for i in range(ch * cs, min(n, (ch + 1) * cs)):
            d, s, k = _candidate(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                                 c_maxe, i, S, B, tmp, bound[i], write)
            dist[i] = d
            start[i] = s
            nops[i] = k
    offsets = np.empty(n + 1, np.int64)
    offsets[0] = 0
    for i in range(n):
        offsets[i + 1] = offsets[i] + (nops[i] if write else 0)
    cigar = np.empty(offsets[n], np.uint32)
    for i in range(n):
        for t in range(offsets[i + 1] - offsets[i]):
            cigar[offsets[i] + t] = tmp[bound[i] + t]
    return dist, start, cigar, offsets


def _readonly(x, dtype):
    """C-contiguous read-only view of x as dtype (copied only when the dtype or layout differs), so
    that every call has the same argument types and the kernel is compiled once."""
    x = np.ascontiguousarray(x, dtype)
    if x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


def _inputs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe):
    return (_readonly(read_codes, np.uint8), _readonly(rc_codes, np.uint8), _readonly(read_offsets, np.int64),
            _readonly(ref_codes, np.uint8), _readonly(c_read, np.int32), _readonly(c_strand, np.int8),
            _readonly(c_pos, np.int64), _readonly(c_lo, np.int64), _readonly(c_hi, np.int64),
            _readonly(c_maxe, np.int32))


def banded_distances(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                     c_maxe):
    """Distance pass: (dist int32[n], start int64[n]); -1 / -1 where no alignment within e."""
    args = _inputs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe)
    dist, start, _, _ = _extend_batch(*args, False)
    return dist, start


def banded_align(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 c_maxe):
    """Alignment pass: (dist, start, cigar uint32[], cigar_offsets int64[n+1])."""
    args = _inputs(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe)
    return _extend_batch(*args, True)


def cigar_to_string(cigar):
    """BAM-style uint32 CIGAR ops -> text, e.g. '40M1I59M' (empty string for no ops)."""
    return "".join(f"{int(x) >> 4}{_OPCHARS[int(x) & 15]}" for x in np.asarray(cigar).ravel())


def cigar_from_string(text):
    """'40M1I59M' -> BAM-style uint32 array (test helper, inverse of cigar_to_string)."""
    import re
    ops = [(int(n), _OPCHARS.index(o)) for n, o in re.findall(r"(\d+)([MIDNSHP=X])", text)]
    return np.array([(n << 4) | o for n, o in ops], dtype=np.uint32)
