"""Banded affine-gap alignment with end clipping, bwa-mem style scoring (Numba, CPU).

Problem, for one candidate (read r, strand s, diagonal start pos, contig [lo, hi), band w; arrays
as in kernels.banded.banded_align): the oriented read R (length L; strand 1 uses the
reverse-complement codes) is aligned against the reference with

  * match +a, mismatch -b, a base N (code >= 4) on either side n_score (-1, as bwa);
  * a deletion (reference bases skipped) of k bases costs od + k * ed, an insertion oi + k * ei;
  * reference ends free; the read is aligned end to end except that each end may be soft-clipped,
    a clipped left end costs clip_left, a clipped right end clip_right (bwa's -L);
  * objective = raw score - clip_left * [left end clipped] - clip_right * [right end clipped],
    maximised; the reported score is the raw score (bwa's AS).

An alignment is a non-empty run of ops that starts and ends with an aligned base (M): it never has
a leading or trailing I or D. (A terminal deletion against a free reference end never pays; a read
end that cannot be aligned is clipped, never inserted: a read that overhangs a contig end is
soft-clipped there.)

Band. DP cell (j, c): j read bases consumed, reference consumed up to global column c (exclusive);
its diagonal is d = c - j - pos. An M of read base j-1 against ref base c-1 lies on diagonal d, an
insertion moves one diagonal down, a deletion one up. Every cell of the alignment lies within
d in [-w, w] and every reference base it uses within [lo, hi): the reference window is thus
[pos - w, pos + L + w) clamped to [lo, hi). The band is stored diagonal-aligned, row j holding the
diagonals dmin..dmax (the +-w band trimmed to what can touch [lo, hi); w is capped at MAX_BAND),
B = dmax - dmin + 1 cells per row.

Recurrences (Gotoh), with S(0) = 0 (the alignment starts at the first read base: no clip) and
S(j) = -clip_left for j > 0 (it starts after a clipped prefix of j bases):

  G(j, c) = max(H(j-1, c-1), S(j-1)) + s(R[j-1], ref[c-1])      (ends with an M)
  F(j, c) = max(H(j-1, c) - oi - ei, F(j-1, c) - ei)            (ends with an I)
  E(j, c) = max(H(j, c-1) - od - ed, E(j, c-1) - ed)            (ends with a D)
  H(j, c) = max(G, F, E)

and the objective is the maximum over cells of G(j, c) - clip_right * [j < L]. Starts feed only G
and ends are taken only from G: hence no terminal gaps.

Ties. Scores are kept multiplied by 4 and every clipped end costs one more unit (internal clip
penalty 4 * clip + 1): equal objectives are thus broken towards fewer clipped ends, exactly
("prefer no clipping over clipping"). Then:

  * end cell: no right clip over a clip; among clipped ends the smallest j (the longest clip: an
    alignment is extended only where that raises its score, as bwa-mem's extension stops at its
    first maximum, so that adapter bases matching by chance stay clipped); then the diagonal
    closest to the candidate diagonal (|d| smallest, d < 0 before d > 0);
  * traceback from the end, at every H cell: M first, then I, then D; in G, starting the
    alignment there over continuing it when both are clipped starts (the longer left clip, as at
    the right end; an unclipped start never ties with a clipped one); inside a gap, closing it
    (back to H) over extending it. Diagonal-first while walking backwards keeps matches to the
    right and places gaps as far left as possible: an indel in a homopolymer or a tandem repeat
    is left-aligned as bcftools / GATK normalise it, and of a mismatch next to a gap the gap goes left.

Row computation. Per row j (one uint8 of traceback bits per cell: start, F > G, E > max(G, F),
F extended, E extended): pass 1 computes G, F and X = max(G, F) for the whole row (no dependency
along the row: LLVM vectorises it, in int32 lanes); pass 2 gets E from the identity
E(t) = max_{s<t}(X(s) - od - ed - (t - 1 - s) ed) (H(t-1) may be replaced by X(t-1) as od >= 0): a
scalar prefix maximum, then a vectorised loop for H and the bits. Indices are unsigned so that no
negative-index wraparound code enters the loops. Every 8 rows an upper bound of the final raw
score (row maximum + a * rows left) is checked against min_score, so hopeless candidates stop
early when min_score is high (bwa -T).

Output per candidate: raw score (int32), reference start and end (global, end exclusive), read clip
lengths left/right, NM (mismatches incl. N + inserted + deleted bases), and a BAM-style uint32
CIGAR (len << 4 | op; M=0, I=1, D=2, S=4), S only at the ends, adjacent ops always merged (one op
per gap). "No alignment" (score NO_SCORE, start = end = -1, clips and NM -1, empty CIGAR) when the
read is empty, no reference base is in reach, or the best alignment's raw score is below
min_score (default 1: "no cell scores above 0").

Lanes. Candidates that need the DP and share read length and band rows are aligned LANES (32) at a
time, one per int16 SIMD lane (_align_lanes): cell k of every lane side by side, so every loop over a
row is vectorised, the deletion chain included (about 3.4x faster per candidate than one at a time
for 150 bp reads, w = 16). The recurrences and tie rules are _align_one's, the end choice and the
traceback the same code (_finish): the same results, bit for bit; int16 holds them exactly for reads
up to 1024 bases at the default scoring (_lanes_fit), longer reads and wider scores go one at a time.

Memory: (L + 1) * B bytes of traceback bits per thread (150 bp, w = 20: 6 KB) plus a few int32 rows;
in lanes 3 * LANES bytes a cell (150 bp, w = 16: 0.5 MB).
Everything is per candidate (no shared state): results do not depend on the thread count or on which
candidates share lanes.
A batch runs over ranges of candidates on Python threads (kernels/threads.py run_ranges: no prange,
whose parfor pass would compile the DPs again). CIGARs are kept in a 16-op slot per candidate; the rare
longer ones are recomputed (deterministically) straight into the output afterwards.
"""
import numpy as np
from numba import njit

from pymap.kernels.borrow import borrowed
from pymap.kernels.sorting import sort_pairs
from pymap.kernels.threads import range_bounds, run_ranges

OP_M = 0
OP_I = 1
OP_D = 2
OP_S = 4

#: score of "no alignment"
NO_SCORE = np.int32(np.iinfo(np.int32).min)
#: band half-widths are capped here (a row's cells are ranked in 16 bits of the end-selection key)
MAX_BAND = 16383
#: CIGAR ops kept per candidate in the first pass; the candidates of longer CIGARs (rare) are aligned again
_SLOT = 16
_NEG = -(1 << 30)
_KEYNEG = -(1 << 62)

# params vector layout (int64)
P_MATCH, P_MISMATCH, P_OPEN_DEL, P_EXT_DEL, P_OPEN_INS, P_EXT_INS, P_CLIP_L, P_CLIP_R, P_N, P_MIN = range(10)


def make_params(match=1, mismatch=4, gap_open=6, gap_ext=1, gap_open_ins=None, gap_ext_ins=None,
                clip_left=5, clip_right=5, n_score=-1, min_score=1):
    """Scoring vector for the kernels (default: bwa-mem's -A1 -B4 -O6 -E1 -L5,5, N -1).

    gap_open / gap_ext are the deletion penalties and, unless given separately, the insertion ones
    too; a gap of k bases costs open + k * ext. Penalties are given as positive numbers. min_score:
    candidates whose best alignment has a lower raw score are reported as "no alignment".
    Limits (int32 arithmetic inside): |match|, mismatch, gap penalties, |n_score| <= 1000,
    clip penalties <= 1e6, read length * match <= 1e8."""
    oi = gap_open if gap_open_ins is None else gap_open_ins
    ei = gap_ext if gap_ext_ins is None else gap_ext_ins
    p = np.array([match, mismatch, gap_open, gap_ext, oi, ei, clip_left, clip_right, n_score, min_score],
                 np.int64)
    if p[P_MATCH] < 0 or min(p[P_MISMATCH], p[P_OPEN_DEL], p[P_EXT_DEL], p[P_OPEN_INS], p[P_EXT_INS],
                            p[P_CLIP_L], p[P_CLIP_R]) < 0:
        raise ValueError("match and all penalties must be >= 0")
    small = p[[P_MATCH, P_MISMATCH, P_OPEN_DEL, P_EXT_DEL, P_OPEN_INS, P_EXT_INS, P_N]]
    if np.abs(small).max() > 1000 or max(p[P_CLIP_L], p[P_CLIP_R]) > 1_000_000 or abs(int(p[P_MIN])) > 10**8:
        raise ValueError("scores and gap penalties are limited to 1000, clip penalties to 1e6")
    return p


@njit(cache=True, nogil=True)
def _band_limits(L, pos, lo, hi, w):
    """Diagonals [dmin, dmax] of the +-w band (w capped at MAX_BAND) that can hold a cell with
    lo < c <= hi."""
    w = min(w, MAX_BAND)
    dmin = max(-w, lo + 1 - pos - L)
    dmax = min(w, hi - 1 - pos)
    return dmin, dmax


@njit(cache=True, nogil=True)
def _none():
    return (np.int64(NO_SCORE), np.int64(-1), np.int64(-1), np.int64(-1), np.int64(-1), np.int64(-1),
            np.int64(0))


@njit(cache=True, nogil=True)
def _end_key(g, dk):
    """Rank of an end cell: its G, then |d| smallest, d < 0 before d > 0."""
    return (np.int64(g) << 16) + 65535 - (-2 * dk if dk < 0 else 2 * dk + 1)


@njit(cache=True, nogil=True)
def _finish(dirs, stride, lane, B, read, ra, L, ref, pos, dmin, lbest, lk, cbest, cj, ckmin, cnk, GC, gstride, glane,
            scl, pcr, min_score, rev, out):
    """Choose the end cell (last row, or the best right-clipped row cj whose G is GC[k * gstride + glane]
    for k in [ckmin, ckmin + cnk)) and trace back through dirs[(j * B + k) * stride + lane]."""
    lobj = lbest >> 16
    if lk >= 0 and lobj > _NEG // 2 and lobj >= cbest:
        best = lobj
        bj = L
        bk = lk
    elif cj >= 0:
        best = cbest
        bj = cj
        kb = np.int64(_KEYNEG)
        bk = -1
        for k in range(ckmin, ckmin + cnk):
            key = _end_key(GC[k * gstride + glane], dmin + k)
            if key > kb:
                kb = key
                bk = k
    else:
        return _none()
    # traceback
    j = bj
    k = bk
    state = 0
    first = True
    nm = 0
    nrev = 0
    cur_op = -1
    cur_len = 0
    qstart = 0
    rstart = 0
    while True:
        bits = dirs[(j * B + k) * stride + lane]
        c = pos + j + dmin + k
        if state == 0:
            src = 0 if first else (2 if bits & 4 else (bits >> 1) & 1)
            first = False
            if src == 0:
                op = OP_M
                a = read[ra + j - 1]
                b = ref[c - 1]
                if a >= 4 or b >= 4 or a != b:
                    nm += 1
            elif src == 1:
                state = 1
                continue
            else:
                state = 2
                continue
        elif state == 1:
            op = OP_I
            nm += 1
        else:
            op = OP_D
            nm += 1
        if op == cur_op:
            cur_len += 1
        else:
            if cur_op >= 0:
                rev[nrev] = np.uint32((cur_len << 4) | cur_op)
                nrev += 1
            cur_op = op
            cur_len = 1
        if op == OP_M:
            if bits & 1:
                qstart = j - 1
                rstart = c - 1
                break
            j -= 1
        elif op == OP_I:
            if (bits & 8) == 0:
                state = 0
            j -= 1
            k += 1
        else:
            if (bits & 16) == 0:
                state = 0
            k -= 1
    rev[nrev] = np.uint32((cur_len << 4) | cur_op)
    nrev += 1
    cl = qstart
    cr = L - bj
    lc = 1 if cl > 0 else 0
    rc = 1 if cr > 0 else 0
    raw = (best - scl * lc + pcr * rc) >> 2
    if raw < min_score:
        return _none()
    nops = 0
    if cl > 0:
        out[nops] = np.uint32((cl << 4) | OP_S)
        nops += 1
    for t in range(nrev - 1, -1, -1):
        out[nops] = rev[t]
        nops += 1
    if cr > 0:
        out[nops] = np.uint32((cr << 4) | OP_S)
        nops += 1
    rend = pos + bj + dmin + bk
    return raw, rstart, rend, cl, cr, np.int64(nm), np.int64(nops)


@njit(cache=True, nogil=True)
def _align_one(read, ra, L, ref, pos, lo, hi, w, P, min_score, H, F, G, X, GC, Y, dirs, rev, out):
    """One candidate. Scratch: H, F (>= B + 1 int32), G, X, GC, Y (>= B int32), dirs (>= (L + 1) * B
    uint8), rev (>= 2L + 1 uint32). The CIGAR is written to out[0:nops] (capacity >= 2L + 3).
    Returns (score, ref_start, ref_end, clip_left, clip_right, nm, nops)."""
    if L <= 0 or w < 0 or hi <= lo:
        return _none()
    dmin, dmax = _band_limits(L, pos, lo, hi, w)
    B = dmax - dmin + 1
    if B <= 0:
        return _none()
    a4 = 4 * P[P_MATCH]
    gain = 4 * max(P[P_MATCH], P[P_N])   # the most a row can add
    x4 = -4 * P[P_MISMATCH]
    n4 = 4 * P[P_N]
    oie = 4 * (P[P_OPEN_INS] + P[P_EXT_INS])
    ie = 4 * P[P_EXT_INS]
    ode = 4 * (P[P_OPEN_DEL] + P[P_EXT_DEL])
    de = 4 * P[P_EXT_DEL]
    scl = -(4 * P[P_CLIP_L] + 1)
    pcr = 4 * P[P_CLIP_R] + 1
    slack = 4 * (P[P_CLIP_L] + P[P_CLIP_R]) + 2
    min4 = 4 * min_score
    for k in range(B + 1):
        H[k] = _NEG
        F[k] = _NEG
    cbest = np.int64(_KEYNEG)            # best right-clipped end: objective, row, its G row
    cj = np.int64(-1)                    # np.int64, not literals: _finish is compiled for one signature
    ckmin = np.int64(0)
    cnk = np.int64(0)
    lbest = np.int64(_KEYNEG)            # best end on the last row
    lk = np.int64(-1)
    # row j, cell k <-> diagonal d = dmin + k, column c = pos + j + dmin + k, ref base c - 1
    for j in range(1, L + 1):
        kmin = max(0, lo + 1 - pos - j - dmin)
        kmax = min(B - 1, hi - pos - j - dmin)
        if kmax < 0:
            break
        if kmin > kmax:
            continue
        rb = np.int64(read[ra + j - 1])
        sm = a4 if rb < 4 else n4        # score of ref == read base, of another base, of ref N
        sx = x4 if rb < 4 else n4
        S = np.int64(0) if j == 1 else scl
        cb = pos + j + dmin - 1          # ref index of cell k: cb + k
        nk = kmax - kmin + 1
        nku = np.uint64(nk)
        # unsigned indices: no negative-index wraparound code in the loops (and no array views)
        hk = np.uint64(kmin)
        hk1 = np.uint64(kmin + 1)
        rk = np.uint64(cb + kmin)
        dk0 = np.uint64(j * B + kmin)
        # pass 1, no dependency along the row (vectorised by LLVM; int32 lanes): G, F, X = max(G, F)
        i32 = np.int32
        S32 = i32(S)
        sm32 = i32(sm)
        sx32 = i32(sx)
        n432 = i32(n4)
        oie32 = i32(oie)
        ie32 = i32(ie)
        rb8 = np.uint8(rb)
        g32max = i32(_NEG)
        for t in range(nku):
            hd = H[hk + t]
            r = ref[rk + t]
            sub = sm32 if r == rb8 else (n432 if r >= np.uint8(4) else sx32)
            g = i32(max(hd, S32) + sub)
            hu = i32(H[hk1 + t] - oie32)
            fu = i32(F[hk1 + t] - ie32)
            f = max(hu, fu)
            F[hk + t] = f
            G[t] = g
            X[t] = max(g, f)
            # ties: start here (between two clipped starts: the longer clip, as bwa-mem's extension
            # stops at its first maximum); close a gap; M before I
            dirs[dk0 + t] = (np.uint8(S32 >= hd) | (np.uint8(f > g) << np.uint8(1))
                             | (np.uint8(fu > hu) << np.uint8(3)))
            g32max = max(g32max, g)
        gmax = np.int64(g32max)
        # pass 2: E along the row. E(t) = max(H(t-1) - od - ed, E(t-1) - ed) = max(X(t-1) - od - ed,
        # E(t-1) - ed) as od >= 0, i.e. E(t) = Y(t) - od - ed - (t - 1) ed with the exclusive prefix
        # maximum Y(t) = max_{s<t}(X(s) + s ed): one short scalar chain, then a vectorised loop
        de32 = i32(de)
        ode32 = i32(ode)
        m = i32(_NEG)
        sd = i32(0)
        for t in range(nku):
            Y[t] = m
            m = max(m, i32(X[t] + sd))
            sd = i32(sd + de32)
        z = ode32
        for t in range(np.uint64(1), nku):
            e = i32(Y[t] - z)
            el = i32(Y[t - 1] - z)        # E(t-1) - ed (for t = 1 far below anything)
            x = X[t]
            hl = i32(X[t - 1] - ode32)
            H[hk + t] = max(x, e)
            # ties: D last; close the gap
            dirs[dk0 + t] |= (np.uint8(e > x) << np.uint8(2)) | (np.uint8(el > hl) << np.uint8(4))
            z = i32(z + de32)
        H[hk] = X[0]
        # end candidates
        if j == L:
            for t in range(nk):
                key = _end_key(G[t], dmin + kmin + t)
                if key > lbest:
                    lbest = key
                    lk = kmin + t
        elif gmax > _NEG // 2 and gmax - pcr > cbest:   # ties: earlier rows (longer clip)
            cbest = gmax - pcr
            cj = j
            ckmin = kmin
            cnk = nk
            for t in range(nk):
                GC[kmin + t] = G[t]
        if (j & 7) == 0 and j < L:       # upper bound of the final raw score
            hmax = np.int64(scl)
            for k in range(kmin, kmax + 1):
                hmax = max(hmax, np.int64(H[k]))
            ub = max(cbest, hmax + gain * (L - j))
            if ub + slack < min4:
                return _none()
    one, zero = np.int64(1), np.int64(0)
    return _finish(dirs, one, zero, B, read, ra, L, ref, pos, dmin, lbest, lk, cbest, cj, ckmin, cnk, GC, one, zero,
                   scl, pcr, min_score, rev, out)


#: candidates aligned side by side, one per SIMD lane (int16: 32 lanes in two AVX2 registers)
LANES = 32
#: a lane group is formed only where at least this many candidates share read length and band
_MIN_LANES = 8
#: and only for bands of at most this many cells (traceback bits and G: 3 * LANES bytes a cell)
_LANE_CELLS = 1 << 15
_INVALID = np.uint8(255)
_NEG16 = np.int16(-(1 << 14))
#: int16 lanes are exact while scores and penalties (x 4) stay within this (see _lanes_fit)
_LANE_RANGE = 4096


@njit(cache=True, nogil=True)
def _lanes_fit(P, L):
    """True when _align_lanes is exact for reads of length L: every value of a valid cell lies in
    [-_LANE_RANGE, _LANE_RANGE], cells outside the contig stay below -(1 << 14) + _LANE_RANGE (under
    any valid one and under _NEG16 / 2), and nothing goes below -32768."""
    gain = 4 * max(P[P_MATCH], P[P_N])
    low = (4 * P[P_CLIP_L] + 1 + 4 * max(P[P_MISMATCH], abs(P[P_N]))
           + 4 * max(P[P_OPEN_INS] + P[P_EXT_INS], P[P_OPEN_DEL] + P[P_EXT_DEL]) + 4 * max(P[P_EXT_INS], P[P_EXT_DEL]))
    return gain * L <= _LANE_RANGE and low <= _LANE_RANGE and 4 * P[P_CLIP_R] + 1 <= _LANE_RANGE


@njit(cache=True, nogil=True)
def _lane_scratch(maxl, maxb):
    """One thread's scratch for _align_lanes: RD, WT, RB, H, F, X, E, T, G (every row), dirs."""
    n = (maxb + 1) * LANES
    i16 = np.int16
    return (np.empty(maxl * LANES, np.uint8), np.empty((maxl + maxb) * LANES, np.uint8), np.empty(n, np.uint8),
            np.empty(n, i16), np.empty(n, i16), np.empty(n, i16), np.empty(n, i16), np.empty(n, i16),
            np.empty((maxl + 1) * maxb * LANES, i16), np.empty((maxl + 1) * maxb * LANES, np.uint8))


@njit(cache=True, nogil=True)
def _lane_max(V, v0, T, B):
    """T[0:LANES] = per-lane maximum of V[v0 + k * LANES + l] over k < B (B >= 1): rows folded in halves,
    flat loops over unsigned indices (vectorised)."""
    ln = np.uint64(LANES)
    v0 = np.uint64(v0)
    n = np.uint64(B)
    h = n >> np.uint64(1)
    m = n - h
    hq = h * ln
    for q in range(m * ln):
        T[q] = V[v0 + q]
    for q in range((m - h) * ln, m * ln):
        T[q] = max(T[q], V[v0 + q + hq])
    n = m
    while n > np.uint64(1):
        h = n >> np.uint64(1)
        m = n - h
        hq = h * ln
        for q in range((m - h) * ln, m * ln):
            T[q] = max(T[q], T[q + hq])
        n = m


@njit(cache=True, nogil=True)
def _align_lanes(read_codes, rc_codes, read_offsets, ref, c_read, c_strand, c_pos, c_lo, c_hi, c_min, P,
                 lane_cand, L, dmin, B, RD, WT, RB, H, F, X, E, T, G, dirs, rev, out, results):
    """_align_one for LANES candidates at once that share read length L and band rows [dmin, dmin + B),
    in int16 (only where _lanes_fit(P, L)): lane l aligns candidate lane_cand[l] (lanes may repeat a
    candidate). Cell k of lane l is at k * LANES + l and every loop runs over whole rows, so LLVM
    vectorises them all, the deletion chain along a row (scalar in _align_one) included. Reference
    bases outside a candidate's contig are marked invalid and score far below anything: the cells
    _align_one leaves out hold values that never reach a valid cell or an end, so every lane's
    result is _align_one's. G is kept for every row (the end cell of a clipped alignment is chosen
    from its row at the end). results[l] = the 7 values; lane l's CIGAR is written to
    out[l * (2L + 3):]."""
    i16 = np.int16
    gain = 4 * max(P[P_MATCH], P[P_N])
    a4 = i16(4 * P[P_MATCH])
    x4 = i16(-4 * P[P_MISMATCH])
    n4 = i16(4 * P[P_N])
    oie = i16(4 * (P[P_OPEN_INS] + P[P_EXT_INS]))
    ie = i16(4 * P[P_EXT_INS])
    ode = i16(4 * (P[P_OPEN_DEL] + P[P_EXT_DEL]))
    de = i16(4 * P[P_EXT_DEL])
    scl = -(4 * P[P_CLIP_L] + 1)
    pcr = 4 * P[P_CLIP_R] + 1
    slack = 4 * (P[P_CLIP_L] + P[P_CLIP_R]) + 2
    neg = _NEG16
    half = np.int64(_NEG16) // 2
    BL = B * LANES
    cbest = np.full(LANES, _KEYNEG, np.int64)
    cj = np.full(LANES, -1, np.int64)
    lbest = np.full(LANES, _KEYNEG, np.int64)
    lk = np.full(LANES, -1, np.int64)
    dead = np.zeros(LANES, np.bool_)
    for l in range(LANES):
        i = lane_cand[l]
        r = c_read[i]
        ra = np.int64(read_offsets[r])
        rd = rc_codes if c_strand[i] != 0 else read_codes
        for j in range(L):
            RD[j * LANES + l] = rd[ra + j]
        base = np.int64(c_pos[i]) + dmin   # ref index of cell (j, k): base + j - 1 + k
        lo = np.int64(c_lo[i])
        hi = np.int64(c_hi[i])
        for u in range(L + B - 1):
            c = base + u
            WT[u * LANES + l] = ref[c] if lo <= c < hi else _INVALID
    # unsigned indices: no negative-index wraparound code in the loops, which LLVM then vectorises
    ln = np.uint64(LANES)
    BLu = np.uint64(BL)
    for q in range(BLu + ln):
        H[q] = neg
        F[q] = neg
    for j in range(1, L + 1):
        S = i16(0) if j == 1 else i16(scl)
        jr = np.uint64((j - 1) * LANES)
        for l in range(ln):              # the row's read base of each lane, beside every cell
            RB[l] = RD[jr + l]
        n = ln
        while n < BLu:
            m = min(n, BLu - n)
            for q in range(m):
                RB[n + q] = RB[q]
            n += m
        d0 = np.uint64(j * BL)
        # pass 1: G, F, X = max(G, F)
        for q in range(BLu):
            hd = H[q]
            r = WT[jr + q]
            rb = RB[q]
            sub = neg if r == _INVALID else (n4 if (r | rb) >= 4 else (a4 if r == rb else x4))
            g = i16(max(hd, S) + sub)
            hu = i16(H[q + ln] - oie)
            fu = i16(F[q + ln] - ie)
            f = max(hu, fu)
            F[q] = f
            G[d0 + q] = g
            X[q] = max(g, f)
            dirs[d0 + q] = (np.uint8(S >= hd) | (np.uint8(f > g) << np.uint8(1))
                            | (np.uint8(fu > hu) << np.uint8(3)))
        # pass 2: E(k) = max(X(k-1) - od - ed, E(k-1) - ed), H = max(X, E), as in _align_one
        for q in range(ln):
            E[q] = neg
            H[q] = X[q]
        for q in range(ln, BLu):
            hl = i16(X[q - ln] - ode)
            el = i16(E[q - ln] - de)
            e = max(hl, el)
            x = X[q]
            E[q] = e
            H[q] = max(x, e)
            dirs[d0 + q] |= (np.uint8(e > x) << np.uint8(2)) | (np.uint8(el > hl) << np.uint8(4))
        d0 = j * BL
        if j == L:
            for l in range(LANES):
                for k in range(B):
                    g = G[d0 + k * LANES + l]
                    if g > half:             # a valid cell
                        key = _end_key(g, dmin + k)
                        if key > lbest[l]:
                            lbest[l] = key
                            lk[l] = k
        else:
            _lane_max(G, d0, T, B)
            for l in range(LANES):
                gm = np.int64(T[l])
                if gm > half and gm - pcr > cbest[l]:
                    cbest[l] = gm - pcr
                    cj[l] = j
        if (j & 7) == 0 and j < L:       # upper bound of the final raw score, as in _align_one
            _lane_max(H, np.int64(0), T, B)
            alive = 0
            for l in range(LANES):
                ub = max(cbest[l], max(scl, np.int64(T[l])) + gain * (L - j))
                if ub + slack < 4 * c_min[lane_cand[l]]:
                    dead[l] = True
                if not dead[l]:
                    alive += 1
            if alive == 0:
                break
    stride = 2 * L + 3
    for l in range(LANES):
        if dead[l]:
            res = _none()
        else:
            i = lane_cand[l]
            r = c_read[i]
            ra = np.int64(read_offsets[r])
            rd = rc_codes if c_strand[i] != 0 else read_codes
            g0 = max(cj[l], 0) * BL
            res = _finish(dirs, np.int64(LANES), l, B, rd, ra, L, ref, np.int64(c_pos[i]), dmin, lbest[l], lk[l],
                          cbest[l], cj[l], np.int64(0), B, G[g0:g0 + BL], np.int64(LANES), l, scl, pcr, c_min[i], rev,
                          out[l * stride:(l + 1) * stride])
        for t in range(7):
            results[l, t] = res[t]


@njit(cache=True, nogil=True)
def _scratch_dims(read_offsets, c_read, c_pos, c_lo, c_hi, c_band):
    """(longest read, widest band row) over the batch."""
    maxl = 0
    for r in range(read_offsets.shape[0] - 1):
        maxl = max(maxl, read_offsets[r + 1] - read_offsets[r])
    maxb = 1
    for i in range(c_read.shape[0]):
        r = c_read[i]
        L = read_offsets[r + 1] - read_offsets[r]
        dmin, dmax = _band_limits(L, np.int64(c_pos[i]), np.int64(c_lo[i]), np.int64(c_hi[i]),
                                  np.int64(c_band[i]))
        maxb = max(maxb, dmax - dmin + 1)
    return maxl, maxb


@njit(cache=True, nogil=True)
def _scratch(maxl, maxb):
    """One thread's scratch for _align_one: H, F, G, X, GC, Y, dirs, rev, out."""
    return (np.empty(maxb + 1, np.int32), np.empty(maxb + 1, np.int32), np.empty(maxb, np.int32),
            np.empty(maxb, np.int32), np.empty(maxb, np.int32), np.empty(maxb, np.int32),
            np.empty((maxl + 1) * maxb, np.uint8), np.empty(2 * maxl + 1, np.uint32),
            np.empty(2 * maxl + 3, np.uint32))


@njit(cache=True, nogil=True)
def _ungapped(read, ra, L, ref, pos, lo, hi, w, P, min_score):
    """(score, NM) of the alignment along the candidate's own diagonal, without gaps or clips, when
    it is provably the DP's answer, else (NO_SCORE, -1): no N in read or segment, at most one
    mismatch, and nothing else in the band can score as much (a gap costs more than a mismatch, a
    clip penalty exceeds the mismatch penalty, and no other diagonal of the band holds the read
    with less than one mismatch's worth of penalty). Ties in the DP go to the candidate's diagonal
    and to no clipping, as here. Most true candidates of good reads end here, at O(L)."""
    a = P[P_MATCH]
    b = P[P_MISMATCH]
    if a < 1 or L == 0 or w < 0 or pos < lo or pos + L > hi:
        return np.int64(NO_SCORE), np.int64(-1)
    m = 0
    for j in range(L):
        x = read[ra + j]
        y = ref[pos + j]
        if x >= 4 or y >= 4:
            return np.int64(NO_SCORE), np.int64(-1)
        if x != y:
            m += 1
            if m > 1:
                return np.int64(NO_SCORE), np.int64(-1)
    gap_min = min(P[P_OPEN_DEL] + P[P_EXT_DEL], P[P_OPEN_INS] + P[P_EXT_INS] + a)
    score = L * a - m * (a + b)
    if score < min_score or gap_min <= m * (a + b):
        return np.int64(NO_SCORE), np.int64(-1)
    if m == 1:
        if P[P_CLIP_L] <= b or P[P_CLIP_R] <= b:
            return np.int64(NO_SCORE), np.int64(-1)
        dmin, dmax = _band_limits(L, pos, lo, hi, w)
        for d in range(dmin, dmax + 1):
            s = pos + d
            if d == 0 or s < lo or s + L > hi:
                continue
            pen = 0
            for j in range(L):
                x = read[ra + j]
                y = ref[s + j]
                if y >= 4:
                    pen += a - P[P_N]
                elif x != y:
                    pen += a + b
                if pen >= a + b:
                    break
            if pen < a + b:
                return np.int64(NO_SCORE), np.int64(-1)
    return np.int64(score), np.int64(m)


#: q-gram length of the hopelessness test (4^Q bits of scratch a thread)
Q = 8


@njit(cache=True, nogil=True)
def _qgram_floor(L, T, P):
    """The fewest of a read's q-grams (q = Q) that must occur in its band window when some alignment
    of the read (no N in read or window) has raw score >= T; -inf when no bound applies.

    An alignment of aligned length A (read bases, insertions included) with score S leaves a penalty
    a A - S. Of its A - q + 1 q-grams, those touching no edit are in the window; a mismatch spoils at
    most q of them for a + b of penalty, an insertion of k bases k + q - 1 for oi + k (ei + a), a
    deletion q - 1 for od + d ed, so at most R (a A - S) are spoiled, R the largest of these ratios.
    Hence at least A - q + 1 - R (a A - T) q-grams occur, for some A in [T / a, L]: the bound is the
    smaller of the two ends (the expression is linear in A)."""
    a = P[P_MATCH]
    if a <= 0 or L < Q:
        return -1e300
    r = max(Q / (a + P[P_MISMATCH]), Q / (P[P_OPEN_INS] + P[P_EXT_INS] + a), 1.0 / (P[P_EXT_INS] + a))
    if P[P_OPEN_DEL] + P[P_EXT_DEL] > 0:
        r = max(r, (Q - 1) / (P[P_OPEN_DEL] + P[P_EXT_DEL]))
    else:
        return -1e300
    lo_a = T / a
    f_lo = lo_a - Q + 1 - r * (a * lo_a - T)
    f_hi = L - Q + 1 - r * (a * L - T)
    return min(f_lo, f_hi)


@njit(cache=True, nogil=True)
def _hopeless(read, ra, L, ref, pos, lo, hi, w, P, min_score, bits):
    """True when no alignment of the candidate can reach min_score (see _qgram_floor): too few of the
    read's q-grams occur in the reference window its band can reach. False whenever the read or the
    window holds an N (the bound does not cover them). bits: uint64[4^Q / 64] of zeros, left zeroed."""
    need = _qgram_floor(L, min_score, P)
    if need <= 0.0 or w < 0 or hi <= lo:
        return False
    dmin, dmax = _band_limits(L, pos, lo, hi, w)
    if dmax < dmin:
        return False
    a0 = max(lo, pos + dmin)
    a1 = min(hi, pos + L + dmax)
    if a1 - a0 < Q:
        return True                    # no q-gram fits the window, yet need > 0
    mask = (np.int64(1) << (2 * Q)) - 1
    for j in range(L):
        if read[ra + j] > 3:
            return False
    x = np.int64(0)
    bad = False
    for c in range(a0, a1):
        b = np.int64(ref[c])
        if b > 3:
            bad = True
            break
        x = ((x << 2) | b) & mask
        if c - a0 >= Q - 1:
            bits[x >> 6] |= np.uint64(1) << np.uint64(x & 63)
    hopeless = False
    if not bad:
        found = 0
        left = L - Q + 1                 # q-grams of the read not yet looked up
        x = np.int64(0)
        for j in range(L):
            x = ((x << 2) | np.int64(read[ra + j])) & mask
            if j >= Q - 1:
                left -= 1
                if (bits[x >> 6] >> np.uint64(x & 63)) & np.uint64(1):
                    found += 1
                    if found >= need:
                        break
                elif found + left < need:
                    break
        hopeless = found < need
    bits[:] = 0                        # (8 KB: cheaper than clearing bit by bit)
    return hopeless


@njit(cache=True, nogil=True)
def _shortcut(read, ra, L, ref, pos, lo, hi, w, P, min_score, out):
    """_ungapped's answer as the DP's 7 values (CIGAR L M into out), or _none() when it has none."""
    score, nm = _ungapped(read, ra, L, ref, pos, lo, hi, w, P, min_score)
    if score == NO_SCORE:
        return _none()
    out[0] = np.uint32((L << 4) | OP_M)
    return np.int64(score), pos, pos + L, np.int64(0), np.int64(0), np.int64(nm), np.int64(1)


@njit(cache=True, nogil=True)
def _store(i, res, out, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp):
    """Candidate i's 7 values (a tuple or an array row), and its CIGAR (out) into its slot when it fits."""
    score[i] = res[0]
    rstart[i] = res[1]
    rend[i] = res[2]
    qcl[i] = res[3]
    qcr[i] = res[4]
    nm[i] = res[5]
    k = res[6]
    nops[i] = k
    if k <= slot:
        for t in range(k):
            tmp[i * slot + t] = out[t]


@njit(cache=True, nogil=True)
def _lane_groups(read_offsets, c_read, c_pos, c_lo, c_hi, c_band, P, todo):
    """Split the candidates todo (in order) into lane groups: (order, group starts, group sizes, singles,
    longest read and widest band row of the groups). A group holds up to LANES candidates of the same
    read length and band rows (stably sorted by them); groups smaller than _MIN_LANES, and candidates
    the lanes cannot hold, become singles."""
    m = todo.shape[0]
    key = np.full(m, -1, np.int64)
    for t in range(m):
        i = todo[t]
        r = c_read[i]
        L = np.int64(read_offsets[r + 1] - read_offsets[r])
        dmin, dmax = _band_limits(L, np.int64(c_pos[i]), np.int64(c_lo[i]), np.int64(c_hi[i]), np.int64(c_band[i]))
        B = dmax - dmin + 1
        if B > 0 and (L + 1) * B <= _LANE_CELLS and _lanes_fit(P, L):
            key[t] = (L << 32) | ((dmin + 32768) << 16) | (dmax + 32768)
    order = todo.copy()
    sort_pairs(key, order, m)            # stable: a key's candidates stay in batch order
    skey = key
    starts = np.empty(m // _MIN_LANES + 1, np.int64)
    sizes = np.empty(m // _MIN_LANES + 1, np.int64)
    singles = np.empty(m, np.int64)
    ng = 0
    ns = 0
    t = 0
    maxl = 1
    maxb = 1
    while t < m:
        u = t + 1
        while u < m and u - t < LANES and skey[u] == skey[t]:
            u += 1
        if skey[t] >= 0 and u - t >= _MIN_LANES:
            starts[ng] = t
            sizes[ng] = u - t
            ng += 1
            maxl = max(maxl, skey[t] >> 32)
            maxb = max(maxb, (skey[t] & 65535) - ((skey[t] >> 16) & 65535) + 1)
        else:
            for v in range(t, u):
                singles[ns] = order[v]
                ns += 1
        t = u
    return order, starts[:ng], sizes[:ng], singles[:ns], maxl, maxb


@njit(cache=True, nogil=True)
def _settle_range(i0, i1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                  c_min, P, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp, dp):
    """Candidates i0..i1-1 settled without the DP: those that provably miss their minimum stay "no
    alignment", the ungapped shortcut answers most others at O(L); dp[i] marks the rest."""
    (read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P, slot,
     score, rstart, rend, qcl, qcr, nm, nops, tmp, dp) = borrowed((
        read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P,
        slot, score, rstart, rend, qcl, qcr, nm, nops, tmp, dp))
    bits = np.zeros(1 << (2 * Q - 6), np.uint64)
    out = np.empty(1, np.uint32)
    for i in range(i0, i1):
        r = c_read[i]
        ra = np.int64(read_offsets[r])
        L = np.int64(read_offsets[r + 1]) - ra
        read = rc_codes if c_strand[i] != 0 else read_codes
        pos = np.int64(c_pos[i])
        if c_min[i] > P[P_MIN] and _hopeless(read, ra, L, ref_codes, pos, np.int64(c_lo[i]), np.int64(c_hi[i]),
                                             np.int64(c_band[i]), P, c_min[i], bits):
            continue
        res = _shortcut(read, ra, L, ref_codes, pos, np.int64(c_lo[i]), np.int64(c_hi[i]), np.int64(c_band[i]),
                        P, c_min[i], out)
        if res[0] == NO_SCORE:
            dp[i] = True
        else:
            _store(i, res, out, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp)


@njit(cache=True, nogil=True)
def _lanes_range(g0, g1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                 c_min, P, order, starts, sizes, lane_l, lane_b, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp):
    """Lane groups g0..g1-1 (see _lane_groups) through _align_lanes."""
    (read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P, order,
     starts, sizes, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp) = borrowed((
        read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P,
        order, starts, sizes, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp))
    RD, WT, RB, H, F, X, E, T, G, dirs = _lane_scratch(lane_l, lane_b)
    rev = np.empty(2 * lane_l + 1, np.uint32)
    out = np.empty(LANES * (2 * lane_l + 3), np.uint32)
    results = np.empty((LANES, 7), np.int64)
    lane_cand = np.empty(LANES, np.int64)
    for g in range(g0, g1):
        size = sizes[g]
        for l in range(LANES):
            lane_cand[l] = order[starts[g] + min(l, size - 1)]
        i = lane_cand[0]
        r = c_read[i]
        L = np.int64(read_offsets[r + 1] - read_offsets[r])
        dmin, dmax = _band_limits(L, np.int64(c_pos[i]), np.int64(c_lo[i]), np.int64(c_hi[i]), np.int64(c_band[i]))
        _align_lanes(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_min, P,
                     lane_cand, L, dmin, dmax - dmin + 1, RD, WT, RB, H, F, X, E, T, G, dirs, rev, out, results)
        stride = 2 * L + 3
        for l in range(size):
            _store(lane_cand[l], results[l], out[l * stride:(l + 1) * stride], slot,
                   score, rstart, rend, qcl, qcr, nm, nops, tmp)


@njit(cache=True, nogil=True)
def _singles_range(t0, t1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                   c_min, P, singles, maxl, maxb, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp):
    """Candidates singles[t0:t1] through the one-candidate DP (a kernel apart from _lanes_range: one
    kernel holding both DPs compiles 4 s longer)."""
    (read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P, singles,
     slot, score, rstart, rend, qcl, qcr, nm, nops, tmp) = borrowed((
        read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P,
        singles, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp))
    H, F, G, X, GC, Y, dirs, rev, out = _scratch(maxl, maxb)
    for t in range(t0, t1):
        i = singles[t]
        r = c_read[i]
        ra = np.int64(read_offsets[r])
        res = _align_one(rc_codes if c_strand[i] != 0 else read_codes, ra, np.int64(read_offsets[r + 1]) - ra,
                         ref_codes, np.int64(c_pos[i]), np.int64(c_lo[i]), np.int64(c_hi[i]), np.int64(c_band[i]),
                         P, c_min[i], H, F, G, X, GC, Y, dirs, rev, out)
        _store(i, res, out, slot, score, rstart, rend, qcl, qcr, nm, nops, tmp)


@njit(cache=True, nogil=True)
def _cigars(nops, tmp, slot, over, long_ops, long_slot):
    """(cigar, offsets) from the CIGAR slots tmp (slot ops a candidate) and, for the candidates over
    (ascending) whose CIGARs did not fit, from long_ops (long_slot ops each, in the order of over)."""
    n = nops.shape[0]
    offsets = np.zeros(n + 1, np.int64)
    for i in range(n):
        offsets[i + 1] = offsets[i] + nops[i]
    cigar = np.empty(offsets[n], np.uint32)
    v = 0
    for i in range(n):
        o = offsets[i]
        if nops[i] <= slot:
            for t in range(nops[i]):
                cigar[o + t] = tmp[i * slot + t]
        else:
            for t in range(nops[i]):
                cigar[o + t] = long_ops[v * long_slot + t]
            v += 1
    return cigar, offsets


def _outputs(n, slot):
    """(slot, score, ref start, ref end, left clip, right clip, NM, CIGAR op count, CIGAR slots) of n
    candidates, all "no alignment"."""
    return (slot, np.full(n, NO_SCORE, np.int32), np.full(n, -1, np.int64), np.full(n, -1, np.int64),
            np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.zeros(n, np.int64),
            np.empty(n * slot, np.uint32))


def _affine_batch(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                  c_min, P, want_cigar):
    """affine_align / affine_scores on prepared arrays (_prep), in parallel over ranges of candidates
    (kernels.threads.run_ranges): the candidates the DP needs are aligned in lane groups where enough
    share read length and band rows, the others one by one (the same results either way)."""
    n = c_read.shape[0]
    outputs = _outputs(n, _SLOT if want_cigar else 0)
    slot, score, rstart, rend, qcl, qcr, nm, nops, tmp = outputs
    cand = (read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band, c_min, P)
    dp = np.zeros(n, np.bool_)
    run_ranges(_settle_range, range_bounds(n, 256), *cand, *outputs, dp)
    order, starts, sizes, singles, lane_l, lane_b = _lane_groups(read_offsets, c_read, c_pos, c_lo, c_hi, c_band, P,
                                                                 np.flatnonzero(dp))
    maxl, maxb = _scratch_dims(read_offsets, c_read, c_pos, c_lo, c_hi, c_band)
    run_ranges(_lanes_range, range_bounds(starts.shape[0], 2), *cand, order, starts, sizes, lane_l, lane_b, *outputs)
    run_ranges(_singles_range, range_bounds(singles.shape[0], 32), *cand, singles, maxl, maxb, *outputs)
    if want_cigar:
        # the rare CIGARs longer than a slot: those candidates aligned again (one by one: the same
        # results) with room for any CIGAR
        over = np.flatnonzero(nops > slot)
        long_slot = 2 * maxl + 3
        m = over.shape[0]
        long_out = _outputs(m, long_slot)
        run_ranges(_singles_range, range_bounds(m, 32), read_codes, rc_codes, read_offsets, ref_codes,
                   *(a[over] for a in cand[4:11]), P, np.arange(m), maxl, maxb, *long_out)
        cigar, offsets = _cigars(nops, tmp, slot, over, long_out[8], long_slot)
    else:
        cigar, offsets = np.empty(0, np.uint32), np.zeros(n + 1, np.int64)
    return score, rstart, rend, qcl, qcr, nm, cigar, offsets


def _prep(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band):
    """Fixed dtypes (one compiled specialization); no copies when the inputs already have them."""
    u8 = lambda x: np.ascontiguousarray(x, np.uint8)   # noqa: E731
    i64 = lambda x: np.ascontiguousarray(x, np.int64)  # noqa: E731
    return (u8(read_codes), u8(rc_codes), i64(read_offsets), u8(ref_codes),
            np.ascontiguousarray(c_read, np.int32), np.ascontiguousarray(c_strand, np.int8),
            i64(c_pos), i64(c_lo), i64(c_hi), np.ascontiguousarray(c_band, np.int32))


def _min_scores(P, n, min_score):
    """Per-candidate minimum scores: the params' own, raised where min_score (int64[n]) is higher."""
    base = np.full(n, P[P_MIN], np.int64)
    return base if min_score is None else np.maximum(base, np.asarray(min_score, np.int64))


def affine_align(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                 params=None, min_score=None):
    """Align a batch of candidates (arrays as kernels.banded.banded_align; c_band = w).

    params: make_params(...) vector (default bwa-mem: 1, 4, 6, 1, 6, 1, clip 5/5, N -1, min 1).
    min_score: optional int64[n], a higher minimum for some candidates (their DP stops early once
    it cannot be reached; they are then "no alignment").
    Returns (score int32[n], ref_start int64[n], ref_end int64[n], clip_left int32[n],
    clip_right int32[n], nm int32[n], cigar uint32[], cigar_offsets int64[n + 1]); candidate i's
    CIGAR is cigar[cigar_offsets[i]:cigar_offsets[i+1]]; ref_start < 0 means no alignment."""
    P = make_params() if params is None else np.ascontiguousarray(params, np.int64)
    args = _prep(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band)
    return _affine_batch(*args, _min_scores(P, args[4].shape[0], min_score), P, True)


def affine_scores(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band,
                  params=None, min_score=None):
    """Same as affine_align without the CIGAR (identical values, no CIGAR memory):
    (score, ref_start, ref_end, clip_left, clip_right, nm). Not faster: the traceback that finds the
    start costs about 5 % of a candidate and the traceback bits are written either way."""
    P = make_params() if params is None else np.ascontiguousarray(params, np.int64)
    args = _prep(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi, c_band)
    return _affine_batch(*args, _min_scores(P, args[4].shape[0], min_score), P, False)[:6]
