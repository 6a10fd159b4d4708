"""GateKeeper-GPU / GateKeeper pre-alignment filter: the CPU twin (Numba @njit, parallel over pairs).

Specification: docs/gatekeeper.md (steps 1-7 of GateKeeper-GPU, Bingol et al.). This module computes
exactly the same masks as the published 32-bit-word kernel, but bit-parallel on 64-bit words:

* Each sequence is held as two bit planes (one per bit of the 2-bit code), one bit per base slot, slot s
  at 64-bit word s // 64, bit 63 - s % 64 (the earlier slot at the more significant bit, as in the
  published 32-bit mask words: mask word m is the high half of plane word m // 2 when m is even and
  the low half when m is odd). The per-slot mismatch of two 2-bit codes (XOR, then OR of the two bits)
  is then (hi_a ^ hi_b) | (lo_a ^ lo_b): the packing of step 2 comes for free.
* A shift of the read by k bases (deletion / insertion masks) is a k-bit funnel shift of each plane.
  Slots at or beyond 16 * W (W = ceil(L / 16) 2-bit words) do not exist in the published layout, so
  bits a deletion shift pushes there are cleared ("bits pushed past the last word are lost").
* The in-word amendment (the in-place 4-bit sliding window with the LUT) is equivalent to filling every
  run of one or two 0s bounded by 1s inside a 32-bit mask word; that is done with shifts and masks
  that stop at the 32-bit half boundary. The cross-word amendment is then applied at every 32-bit
  boundary (inside each 64-bit word and between 64-bit words) in the published order of its tests.
* The 2E + 1 masks are not stored: each is amended and ANDed into an accumulator as it is made.

The equivalence with the literal algorithm is checked pair by pair in tests/test_gatekeeper.py.

Compile time: the small scalar helpers are plain @njit functions (LLVM inlines them); the helpers
that take arrays and run per pair keep inline="always" (through a call, their arrays would be
reference-counted per pair, and LLVM loses what it knows about them: measured 10-50% slower).
ASCII pairs run in a prange body (Numba compiles it with noalias arrays, which that loop needs);
mapper candidates run a plain @njit chunk function on a pool of Python threads, which saves the
parfor's compile time. make_plan is plain Python.

Base codes here are A=0, C=1, G=3, T=2 ((ASCII >> 1) & 3), a relabelling of the spec's A=0 C=1 G=2 T=3
that keeps A=0 (the padding value) and gives the same mismatch bits, since mismatches only test equality.
"""
import functools

import numpy as np
from numba import njit, prange

from pymap.kernels.threads import range_bounds, run_ranges

#: step-6 variants: the published GateKeeper-GPU amendment, none (FPGA GateKeeper), or all vacated slots
MODE_PUBLISHED = 0
MODE_NONE = 1
MODE_FULL = 2

#: estimate values of pairs that are not accepted with a count
REJECT = -1
UNDEFINED = -2

_U = np.uint64
_ALL = _U(0xFFFFFFFFFFFFFFFF)
_ONE = _U(1)
_BYTE_ONES = _U(0x0101010101010101)
_ASCII_A = _U(0x4141414141414141)
_GATHER = _U(0x8040201008040201)    # bit 0 of byte i -> bit 63 - i (after >> 56: bit 7 - i)
_X15 = _U(0x15)                     # 'A' ^ 'T' = 0x15
_FILL1 = ~_U((0x3 << 31) | (1 << 30) | (1 << 62))  # single-0 fills: not across the half boundary, not bit 30
_BIT30S = _U((1 << 30) | (1 << 62))  # bit 30 of each 32-bit half
_FILL2 = ~_U(0x7 << 30)             # neither may double-0 fills
_B31 = _U(1 << 31)
_B30 = _U(1 << 30)
_B29 = _U(1 << 29)
_B3 = _U(3)
_B63 = _U(1 << 63)
_B3_62 = _U(3 << 62)
_M1 = _U(0x5555555555555555)
_M2 = _U(0x3333333333333333)
_M4 = _U(0x0F0F0F0F0F0F0F0F)
_H01 = _U(0x0101010101010101)
_M16 = _U(0xFFFF)
_NIB1 = _U(0x1111111111111111)


def _nibble_table():
    two = {0b0101, 0b0110, 0b1001, 0b1010, 0b1011, 0b1101}
    nib = [0 if v == 0 else (2 if v in two else 1) for v in range(16)]
    return np.array([nib[b & 15] + nib[b >> 4] for b in range(256)], dtype=np.int32)


#: errors counted in one byte of the final mask (two nibbles), step 7
BYTE_ERRORS = _nibble_table()


def plane_words(length):
    """Number of 64-bit plane words for a sequence of `length` bases."""
    return (length + 63) // 64


def mask_words(length):
    """Number of 32-bit mask words of the published layout (ceil(W / 2), W = ceil(L / 16))."""
    return ((length + 15) // 16 + 1) // 2


@njit(cache=True)
def _popcount(x):
    x = x - ((x >> _ONE) & _M1)
    x = (x & _M2) + ((x >> _U(2)) & _M2)
    x = (x + (x >> _U(4))) & _M4
    return np.int64((x * _H01) >> _U(56))


@njit(cache=True)
def _fill(x):
    """Step 5 inside each 32-bit half (the LUT window pass), then the cross test of the two halves."""
    nx = ~x
    g1 = nx & (x << _ONE) & (x >> _ONE) & _FILL1
    g2 = nx & (nx >> _ONE) & (x << _ONE) & (x >> _U(2)) & _FILL2
    f = x | g1 | g2 | (g2 << _ONE)
    # the last window (offset 28) fills bit 30 only through 1011, i.e. when bit 28 is set by then
    x = f | (nx & (x >> _ONE) & (x << _ONE) & (f << _U(2)) & _BIT30S)
    # cross test: high half = earlier mask word p (its bits 2, 1, 0 are bits 34, 33, 32), low half = w.
    # (x >> 3) & x lines p's bit i + 2 up with w's bit 31 - i; each hit sets the two bits above it.
    x |= ((x >> _U(3)) & x & _B31) * _U(6)     # p2 & w31 -> p1, p0
    x |= ((x >> _U(3)) & x & _B30) * _U(6)     # p1 & w30 -> w31, p0
    x |= ((x >> _U(3)) & x & _B29) * _U(6)     # p0 & w29 -> w31, w30
    return x


@njit(cache=True)
def _slot_bits(u, a, b):
    """Bits of plane word u for slots [a, b)."""
    lo = a - 64 * u
    hi = b - 64 * u
    if lo < 0:
        lo = 0
    if hi > 64:
        hi = 64
    if lo >= hi:
        return _U(0)
    m = _ALL >> _U(lo)
    if hi < 64:
        m &= ~(_ALL >> _U(hi))
    return m


@njit(cache=True, inline="always")
def _shifted(p, u, nw, q, r, left):
    """Word u of the padded plane p (word u at p[u + 1], zero words at p[0] and p[nw + 1]) shifted by
    64 q + r slots: right (towards later slots, deletion) or left (insertion)."""
    v = _U(0)
    if left:
        i = u + q + 1
        if i <= nw:
            v = p[i] << _U(r)
            if r > 0:
                v |= p[i + 1] >> _U(64 - r)
    else:
        i = u - q + 1
        if i >= 1:
            v = p[i] >> _U(r)
            if r > 0:
                v |= p[i - 1] << _U(64 - r)
    return v


@njit(cache=True, inline="always")
def _and_mask(rh, rl, fh, fl, acc, nw, lastmask, shift, left, ea, eb):
    """Build one mask (read shifted by `shift` slots), amend it (step 5), force slots [ea, eb) to 1
    (step 6 / ends), and AND it into acc. Streams over the words keeping only the previous one.
    Planes padded (word u at index u + 1). Used for H and for k >= 64; the lanes loop does the rest."""
    q = shift // 64
    r = shift % 64
    wa = ea // 64
    wb = (eb - 1) // 64 if eb > ea else -1
    prev = _U(0)
    for u in range(nw):
        x = (_shifted(rh, u, nw, q, r, left) ^ fh[u + 1]) | (_shifted(rl, u, nw, q, r, left) ^ fl[u + 1])
        if u == nw - 1:
            x &= lastmask
        x = _fill(x)
        if u > 0:
            # cross test between the low half of the previous word (p) and the high half of this one
            c = (prev >> _U(2)) & (x >> _U(63))
            prev |= c * _B3
            c = (prev >> _ONE) & (x >> _U(62)) & _ONE
            x |= c << _U(63)
            prev |= c
            c = prev & (x >> _U(61)) & _ONE
            x |= c * _B3_62
            if u - 1 >= wa and u - 1 <= wb:
                prev |= _slot_bits(u - 1, np.int64(ea), np.int64(eb))
            acc[u - 1] &= prev
        prev = x
    if nw - 1 >= wa and nw - 1 <= wb:
        prev |= _slot_bits(nw - 1, np.int64(ea), np.int64(eb))
    acc[nw - 1] &= prev


@njit(cache=True)
def _count_errors(x):
    """Step 7 count of a final mask word (sixteen 4-bit nibbles): 0 for 0000; 2 for 0101, 0110,
    1001, 1010, 1011, 1101; 1 for the other non-zero nibbles."""
    a = x >> _U(3)
    b = x >> _U(2)
    c = x >> _ONE
    two = ((a & ~b & (c | x)) | (b & ~c & x) | (~a & b & c & ~x)) & _NIB1
    return _popcount((a | b | c | x) & _NIB1) + _popcount(two)


@njit(cache=True)
def _mask_params(k, length, nmask, mode, left):
    """Slots [a, b) forced to 1 in D_k (left False) or I_k (left True) after the amendment."""
    if mode == MODE_PUBLISHED:
        a = (32 * nmask - k) if left else (k - 1)
        b = a + 1
    elif mode == MODE_FULL:
        a = (length - k) if left else 0
        b = length if left else k
    else:
        a = 0
        b = 0
    if a < 0:
        a = 0
    return a, b


@functools.lru_cache(maxsize=64)
def make_plan(length, max_edits, mode):
    """Per-(L, E, mode) tables for the lanes of the vectorised D_k / I_k loop. Lane j < 2E is
    D_{j//2+1} (even j) or I_{j//2+1} (odd j); lanes are padded to a multiple of 8 with lanes that
    AND as all ones. Returns (shift[nl], insertion[nl] (all ones for I lanes), extra[nw, nl], pad[nl]):
    extra holds the bits step 6 (or ends=full) forces to 1 in each plane word.
    Plain Python (cached, read-only arrays): the kernels take the tables as arguments."""
    length = int(length)
    e = int(max_edits)
    mode = int(mode)
    nw = (length + 63) // 64
    nl = max(8, (2 * e + 7) // 8 * 8)
    shift = np.ones(nl, np.uint64)         # padding lanes: any valid shift
    ins = np.zeros(nl, np.uint64)
    pad = np.full(nl, _ALL, np.uint64)
    extra = np.zeros((max(nw, 1), nl), np.uint64)
    nmask = ((length + 15) // 16 + 1) // 2
    for j in range(2 * e):
        k = j // 2 + 1
        left = j % 2 == 1
        shift[j] = min(k, 63)
        ins[j] = _ALL if left else _U(0)
        pad[j] = 0
        a, b = _mask_params.py_func(k, length, nmask, mode, left)
        for u in range(nw):
            if b > a:
                extra[u, j] = _slot_bits.py_func(u, a, b)
    for t in (shift, ins, extra, pad):
        t.flags.writeable = False
    return shift, ins, extra, pad


@njit(cache=True, inline="always")
def _lanes_and(rh, rl, fh, fl, acc, nw, lastmask, shift, ins, extra, pad, prev):
    """AND every D_k / I_k mask (k <= 63) into acc: lane j of the inner loop is one mask (see
    make_plan), word u of every mask is made, amended and ANDed before word u + 1."""
    nl = shift.shape[0]
    for u in range(nw):
        ah = rh[u + 1]
        bh = rh[u]
        ch = rh[u + 2]
        al = rl[u + 1]
        bl = rl[u]
        cl = rl[u + 2]
        gh = fh[u + 1]
        gl = fl[u + 1]
        lm = lastmask if u == nw - 1 else _ALL
        red = _ALL
        for j in range(nl):                       # lanes: vectorised by LLVM
            s = shift[j]
            t = _U(64) - s
            m = ins[j]
            xh = (((ah << s) | (ch >> t)) & m) | (((ah >> s) | (bh << t)) & ~m)
            xl = (((al << s) | (cl >> t)) & m) | (((al >> s) | (bl << t)) & ~m)
            x = _fill(((xh ^ gh) | (xl ^ gl)) & lm)
            p = prev[j]
            c = (p >> _U(2)) & (x >> _U(63))
            p |= c * _B3
            c = (p >> _ONE) & (x >> _U(62)) & _ONE
            x |= c << _U(63)
            p |= c
            c = p & (x >> _U(61)) & _ONE
            x |= c * _B3_62
            red &= p | extra[u - 1, j] | pad[j]       # u = 0: p = 0, and extra[-1] is unused
            prev[j] = x
        if u > 0:
            acc[u - 1] &= red
    red = _ALL
    for j in range(nl):
        red &= prev[j] | extra[nw - 1, j] | pad[j]
    acc[nw - 1] &= red


@njit(cache=True, inline="always")
def gatekeeper_core(rh, rl, fh, fl, acc, prev, nw, length, max_edits, mode, shift, ins, extra, pad):
    """Filter one encoded pair (steps 2-7). Planes: one bit per base slot, slot s at bit 63 - s % 64 of
    word s // 64 + 1 (a zero word at index 0 and nw + 1), zero past L: rh, rl (read), fh, fl
    (reference), nw + 2 words each; acc: nw words and prev: shift.size words of scratch;
    (shift, ins, extra, pad) = make_plan(L, E, mode). Returns the estimate (<= max_edits) or REJECT."""
    e = max_edits
    count = 0
    for u in range(1, nw + 1):
        count += _popcount((rh[u] ^ fh[u]) | (rl[u] ^ fl[u]))
    if count <= e:                                  # step 3
        return np.int32(count)
    if e == 0:
        return np.int32(REJECT)
    w2 = (length + 15) // 16                # 2-bit words of the published layout
    nmask = (w2 + 1) // 2                   # its 32-bit mask words
    tail = 16 * w2 - 64 * (nw - 1)          # slots of the last plane word that exist there
    lastmask = _ALL if tail >= 64 else ~(_ALL >> _U(tail))
    for u in range(nw):
        acc[u] = _ALL
    if e <= 63:
        _and_mask(rh, rl, fh, fl, acc, nw, lastmask, 0, False, 0, 0)        # H
        for j in range(shift.shape[0]):
            prev[j] = 0
        _lanes_and(rh, rl, fh, fl, acc, nw, lastmask, shift, ins, extra, pad, prev)
    else:
        for m in range(2 * e + 1):                  # H, then D_k, I_k for k = 1..E
            k = (m + 1) // 2
            left = m > 0 and m % 2 == 0
            a, b = _mask_params(k, length, nmask, mode, left)
            if m == 0:
                b = a
            _and_mask(rh, rl, fh, fl, acc, nw, lastmask, k, left, a, b)
    est = 0
    for u in range(nw):                             # step 7
        est += _count_errors(acc[u])
    if est <= e:
        return np.int32(est)
    return np.int32(REJECT)


@njit(cache=True)
def _chunk_planes(x):
    """8 ASCII bases (little-endian uint64) -> (hi plane byte, lo plane byte, nonzero if invalid);
    the first base goes to the most significant bit of each byte."""
    lb = (x >> _ONE) & _BYTE_ONES
    hb = (x >> _U(2)) & _BYTE_ONES
    # the one valid byte with these two code bits: A 0x41, C 0x43, G 0x47, T 0x54
    bad = x ^ (_ASCII_A ^ (lb << _ONE) ^ ((hb & lb) << _U(2)) ^ ((hb & ~lb) * _X15))
    return (hb * _GATHER) >> _U(56), (lb * _GATHER) >> _U(56), bad


@njit(cache=True, inline="always")
def _encode_ascii_row(v, flat, p, length, hi, lo, off, nw):
    """ASCII bases flat[p:p+length] -> planes hi[off:off+nw], lo[off:off+nw]; v: flat as uint64 from
    byte offset p % 8 (one of _u64_views(flat)).
    Returns True when every base is one of 'ACGT'."""
    bad = _U(0)
    nfull = length // 8
    rem = length - 8 * nfull
    if nfull == 0:
        for u in range(nw):
            hi[off + u] = 0
            lo[off + u] = 0
        for j in range(length):
            b = flat[p + j]
            if b != 65 and b != 67 and b != 71 and b != 84:
                bad = _ONE
            sh = _U(63 - j)
            hi[off] |= _U((b >> 2) & 1) << sh
            lo[off] |= _U((b >> 1) & 1) << sh
        return bad == 0
    for u in range(nw):
        h = _U(0)
        l = _U(0)
        c1 = min(8 * u + 8, nfull)
        for c in range(8 * u, c1):
            hb, lb, bb = _chunk_planes(v[(p >> 3) + c])
            bad |= bb
            sh = _U(56 - 8 * (c & 7))
            h |= hb << sh
            l |= lb << sh
        hi[off + u] = h
        lo[off + u] = l
    if rem:
        # the last rem bases: load the 8 bytes ending at the row's end, drop the 8 - rem already
        # done and fill the top with 'A' (code 0, like the padding)
        x = _U(0)
        for j in range(rem):
            x |= _U(flat[p + 8 * nfull + j]) << _U(8 * j)
        x |= _ASCII_A << _U(8 * rem)
        hb, lb, bb = _chunk_planes(x)
        bad |= bb
        sh = _U(56 - 8 * (nfull & 7))
        hi[off + (nfull >> 3)] |= hb << sh
        lo[off + (nfull >> 3)] |= lb << sh
    return bad == 0


@njit(cache=True)
def _u64_views(flat):
    """flat (uint8, 1-D) reinterpreted as uint64 from each byte offset 0..7 (unaligned loads)."""
    n = flat.shape[0]
    return (flat[0:8 * (n // 8)].view(np.uint64),
            flat[1:1 + 8 * (max(n - 1, 0) // 8)].view(np.uint64),
            flat[2:2 + 8 * (max(n - 2, 0) // 8)].view(np.uint64),
            flat[3:3 + 8 * (max(n - 3, 0) // 8)].view(np.uint64),
            flat[4:4 + 8 * (max(n - 4, 0) // 8)].view(np.uint64),
            flat[5:5 + 8 * (max(n - 5, 0) // 8)].view(np.uint64),
            flat[6:6 + 8 * (max(n - 6, 0) // 8)].view(np.uint64),
            flat[7:7 + 8 * (max(n - 7, 0) // 8)].view(np.uint64))


_CHUNK = 256


@njit(cache=True, nogil=True)
def _pairs_chunk(i0, i1, reads, refs, max_edits, mode, shift, ins, extra, pad, estimate):
    """filter_ascii_pairs for pairs i0..i1-1 (one range): its scratch, then _pairs_range."""
    length = reads.shape[1]
    nw = (length + 63) // 64
    fr = reads.reshape(-1)
    ff = refs.reshape(-1)
    s = np.zeros((5, nw + 2), np.uint64)
    prev = np.empty(shift.shape[0], np.uint64)
    _pairs_range(i0, i1, fr, ff, _u64_views(fr), _u64_views(ff), length, max_edits, mode, shift, ins, extra,
                 pad, estimate, s, prev)


@njit(cache=True, nogil=True, _nrt=False)
def _pairs_range(i0, i1, fr, ff, vr, vf, length, max_edits, mode, shift, ins, extra, pad, estimate, s, prev):
    """The work of _pairs_chunk, without reference counting (see _codes_range)."""
    nw = (length + 63) // 64
    rh = s[0]
    rl = s[1]
    fh = s[2]
    fl = s[3]
    acc = s[4]
    for i in range(i0, i1):
        p = i * length
        ok = _encode_ascii_row(vr[p & 7], fr, p, length, rh, rl, 1, nw)
        ok2 = _encode_ascii_row(vf[p & 7], ff, p, length, fh, fl, 1, nw)
        if ok and ok2:
            estimate[i] = gatekeeper_core(rh, rl, fh, fl, acc, prev, nw, length, max_edits, mode,
                                          shift, ins, extra, pad)
        else:
            estimate[i] = UNDEFINED


#: up to this many ASCII pairs go through the candidate kernel (see filter_ascii_pairs)
SMALL_PAIRS = 8192
#: ASCII byte -> code for that route: only upper-case A, C, G, T are bases (anything else reads as
#: N, undefined, as in the ASCII kernel); the labels differ, equality does not
_STRICT_CODE = np.full(256, 4, np.uint8)
_STRICT_CODE[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4, dtype=np.uint8)


def filter_ascii_pairs(reads, refs, max_edits, mode, estimate):
    """GateKeeper on ASCII pairs: reads, refs C-contiguous uint8 (n, L); fills estimate int32[n]
    (estimate, REJECT or UNDEFINED). mode: MODE_PUBLISHED, MODE_NONE or MODE_FULL. Parallel over
    chunks of pairs (prange), scratch allocated once per chunk.

    Up to SMALL_PAIRS pairs go through filter_code_candidates instead (same estimates): the mapper
    compiles that kernel anyway and filters only small sets of pairs (the slack measurement), while
    the prange kernel here, faster on large inputs, costs about 10 s of compilation."""
    n, length = reads.shape
    if n <= SMALL_PAIRS:
        flat = np.arange(n + 1, dtype=np.int64) * length
        codes = _STRICT_CODE[reads.reshape(-1)]
        filter_code_candidates(codes, codes, flat, _STRICT_CODE[refs.reshape(-1)], np.arange(n, dtype=np.int32),
                               np.zeros(n, np.int8), flat[:-1], flat[:-1], flat[1:], np.arange(n, dtype=np.int64),
                               length, max_edits, mode, estimate)
        return
    shift, ins, extra, pad = make_plan(length, max_edits, mode)
    run_ranges(_pairs_chunk, range_bounds(n, GRAIN), reads, refs, np.int64(max_edits), np.int64(mode),
               shift, ins, extra, pad, estimate)


@njit(cache=True, nogil=True)
def _codes_chunk(t0, t1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 idx, length, max_edits, mode, shift, ins, extra, pad, estimate):
    """filter_code_candidates for idx[t0:t1] (one range): its scratch, then _codes_range."""
    nw = (length + 63) // 64
    s = np.zeros((5, nw + 2), np.uint64)
    prev = np.empty(shift.shape[0], np.uint64)
    _codes_range(t0, t1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 idx, length, max_edits, mode, shift, ins, extra, pad, estimate, s, prev)


@njit(cache=True, nogil=True, _nrt=False)
def _codes_range(t0, t1, read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos, c_lo, c_hi,
                 idx, length, max_edits, mode, shift, ins, extra, pad, estimate, s, prev):
    """The work of _codes_chunk, without reference counting (_nrt=False: no allocation here, and the
    per-pair array views would otherwise be reference-counted)."""
    nw = (length + 63) // 64
    rh = s[0]
    rl = s[1]
    fh = s[2]
    fl = s[3]
    acc = s[4]
    for t in range(t0, t1):
        i = idx[t]
        src = rc_codes if c_strand[i] else read_codes
        a = read_offsets[c_read[i]]
        pos = c_pos[i]
        # the reference outside [lo, hi) reads as N, which makes the pair undefined
        ok = pos >= c_lo[i] and pos + length <= c_hi[i]
        if ok:
            for u in range(nw):                     # one plane word (64 slots) at a time
                j0 = 64 * u
                j1 = min(length, j0 + 64)
                h1 = _U(0)
                l1 = _U(0)
                h2 = _U(0)
                l2 = _U(0)
                m = 0
                for j in range(j0, j1):
                    c = src[a + j]
                    g = ref_codes[pos + j]
                    m |= c | g
                    h1 = (h1 << _ONE) | _U(c >> 1)
                    l1 = (l1 << _ONE) | _U(c & 1)
                    h2 = (h2 << _ONE) | _U(g >> 1)
                    l2 = (l2 << _ONE) | _U(g & 1)
                if m > 3:                           # an N (code 4) on either side
                    ok = False
                    break
                sh = _U(64 - (j1 - j0))             # 0..63: the first slot at bit 63
                rh[u + 1] = h1 << sh
                rl[u + 1] = l1 << sh
                fh[u + 1] = h2 << sh
                fl[u + 1] = l2 << sh
        if ok:
            estimate[i] = gatekeeper_core(rh, rl, fh, fl, acc, prev, nw, length, max_edits, mode,
                                          shift, ins, extra, pad)
        else:
            estimate[i] = UNDEFINED


#: at least this many candidates per range of filter_code_candidates on several threads
#: (kernels/threads.py: Python threads rather than a prange kernel, about 1.5 s less compile time)
GRAIN = 4096


def filter_code_candidates(read_codes, rc_codes, read_offsets, ref_codes, c_read, c_strand, c_pos,
                           c_lo, c_hi, idx, length, max_edits, mode, estimate):
    """GateKeeper on mapper candidates idx (all of read length `length` and threshold max_edits),
    reading mapping codes (0..3, 4 = N) straight from the batch and the global reference; the
    reference outside [c_lo, c_hi) reads as N. Writes estimate[idx[j]]. Parallel over chunks of
    candidates on numba.get_num_threads() threads."""
    shift, ins, extra, pad = make_plan(length, max_edits, mode)
    run_ranges(_codes_chunk, range_bounds(idx.shape[0], GRAIN), read_codes, rc_codes, read_offsets, ref_codes,
               c_read, c_strand, c_pos, c_lo, c_hi, idx, np.int64(length), np.int64(max_edits), np.int64(mode),
               shift, ins, extra, pad, estimate)


@njit(cache=True)
def _spread16(x):
    """16 bits -> 32: bit i goes to bit 2 i."""
    x = (x | (x << _U(8))) & _U(0x00FF00FF)
    x = (x | (x << _U(4))) & _U(0x0F0F0F0F)
    x = (x | (x << _U(2))) & _U(0x33333333)
    x = (x | (x << _ONE)) & _U(0x55555555)
    return x


@njit(cache=True, inline="always")
def _words_from_planes(hi, lo, words, i):
    for t in range(words.shape[0]):
        sh = _U(48 - 16 * (t & 3))
        h16 = (hi[t >> 2] >> sh) & _M16
        l16 = ((lo[t >> 2] >> sh) & _M16) ^ h16     # code bit 0 = lo ^ hi (G/T relabelled back)
        words[t, i] = np.uint32((_spread16(h16) << _ONE) | _spread16(l16))


@njit(cache=True, parallel=True)
def encode_pair_words(reads, refs, read_words, ref_words, defined):
    """Step 1 on the host, for the GPU: ASCII (n, L) -> 2-bit words, A=0 C=1 G=2 T=3, 16 bases per
    uint32, the first base in the two most significant bits, padding 0. The words are stored
    transposed (W, n) with W = ceil(L / 16) (word t of pair i at [t, i], so that GPU threads read
    them coalesced). defined[i] = 0 (words unspecified) when either row holds anything but 'ACGT'."""
    n = reads.shape[0]
    length = reads.shape[1]
    nw = (length + 63) // 64
    fr = reads.reshape(-1)
    ff = refs.reshape(-1)
    vr = _u64_views(fr)
    vf = _u64_views(ff)
    nchunks = (n + _CHUNK - 1) // _CHUNK
    for ch in prange(nchunks):
        s = np.empty((4, max(nw, 1)), np.uint64)
        rh = s[0]
        rl = s[1]
        fh = s[2]
        fl = s[3]
        for i in range(ch * _CHUNK, min(n, (ch + 1) * _CHUNK)):
            p = i * length
            ok = _encode_ascii_row(vr[p & 7], fr, p, length, rh, rl, 0, nw)
            ok2 = _encode_ascii_row(vf[p & 7], ff, p, length, fh, fl, 0, nw)
            defined[i] = 1 if (ok and ok2) else 0
            _words_from_planes(rh, rl, read_words, i)
            _words_from_planes(fh, fl, ref_words, i)
