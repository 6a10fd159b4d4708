"""Minhash window sketches, a bucket hash table and top-candidate selection (MetaCache-GPU, Kobus et al.,
ICPP 2021, Sections 2, 4 and 5), adapted from read classification to candidate generation for a mapper.

Plain arrays in, plain arrays out; no I/O. mapper/seeders/minhash.py is the seeder built on these kernels.

**Hashes.** A k-mer (k <= 31, 2 bits a base) is taken canonically: the smaller of its forward and
reverse-complement codes; its orientation bit says which one it was (0: forward). k-mers holding a
non-ACGT base are skipped, and so are palindromes (fwd == rc, even k only: their strand is undefined).
The sketch hash h1 is murmur3's 64-bit finalizer (fmix64, a bijection) of the canonical code plus the
golden-ratio constant (so poly-A does not hash to 0); the one value 2^64 - 1 is reserved for empty table
slots (a hash equal to it is lowered by one). The table slot comes from a second hash h2 (fmix64 of the
value xor a constant), as MetaCache does: sketch values are the *smallest* hashes, so their top bits are
mostly zero and cannot address the table themselves.

**Reference windows.** Each contig is cut into windows of `w` bases starting every `stride` bases
(MetaCache: windows overlap by k - 1, stride = w - k + 1, so every k-mer start lies in exactly one
window); window j of a contig starts at j * stride; the last one may be shorter; a contig shorter than k
has none. Window ids are global, consecutive within a contig (wstart: global start, wctg: contig).

**Sketch.** A window (or read window) is sketched by the `s` smallest *distinct* h1 values of its
canonical k-mers (MetaCache's minhash sketch, duplicates removed); each sketch entry also carries where
its k-mer starts (offset from the window start) and its orientation: `v = offset << 1 | orientation`.

**Table** (MetaCache's CPU hash table in the condensed layout it queries: open addressing, one slot per
distinct sketch value, each slot's bucket of locations in one contiguous array):

| array | type | content |
|---|---|---|
| `keys` | uint64[M] | sketch value of each slot, EMPTY (2^64 - 1) for a free slot; linear probing from h2 |
| `bstart` | uint32 or uint64[M + 1] | slot i's bucket is `loc[bstart[i]:bstart[i + 1]]` (free slots: empty) |
| `loc` | uint32[V, 2] (uint64: 2 G >= 2^32) | per location: window id; k-mer start << 1 \\| orientation |
| `over_slot`, `over_count` | int64[m] | slots of over-full keys (ascending), their true location counts |
| `wstart`, `wctg` | int64[W], int32[W] | global start and contig of each window |

A bucket holds at most `bucket_cap` locations (MetaCache: 254): the locations of a key are taken in
window order and the first `bucket_cap` kept; for such an over-full key the true count is kept in
`over_slot`/`over_count` (diagnostics; queries use the capped bucket, as MetaCache does). M =
ceil(distinct keys / LOAD) (any size; the slot is h2's top 32 bits scaled to M). Build: windows sketched
in parallel, entries sorted by value (stable, so buckets stay in window order), keys inserted in
order; the result does not depend on the thread count.

**Queries** (`query_batch`). A read is cut into windows like the reference (length w, stride; one window
when it is not longer than w) and the union of their sketches (distinct values) is looked up. Canonical
k-mers make a read's sketch and its reverse complement's the same set, so one sketch serves both
strands: a hit of read k-mer (offset i, orientation o_r) on a reference k-mer (global start p,
orientation o_p) is on strand o_r xor o_p (1: the reverse complement aligns forward).

*Diagonal.* A window hit alone places the read only within a window (tens of bases); each location
therefore also stores its k-mer's global start p (the window's start plus the k-mer's offset in it), and
each hit gets its exact diagonal: diag = p - i on strand 0 and p - (L - k - i) on strand 1 (the k-mer's
offset in the reverse-complemented read), i.e. where the oriented read's first base sits if the k-mer
matches without indels before it. Hits of one alignment share the diagonal up to the indels between
them, so the hits of a chosen window range are clustered by diagonal (single linkage within max_edits)
and the range yields the most frequent diagonal (ties: smallest) of its largest cluster, which puts the
filter and the banded extender within their band of the true alignment. It also yields the mode of every
other cluster with at least half as many hits: a read inside a tandem array fits at several shifts of
the unit within one range, and selection must see them all (as the neighborhood seeder's runner-up).

*Top candidates* (MetaCache's window count statistic and sliding-window scan): the hits of a read are
sorted by (strand, window); each window's count is the number of distinct sketch values hitting it. Every
hit window a starts a range: the hit windows of the same strand and contig whose id is less than a +
sws, where sws = (L - k + max_edits + w - k) // stride + 1 is the most windows one alignment of the read
can touch; its score is the sum of their counts. MetaCache keeps the best range per target; a mapper
needs several loci per contig (repeats), so ranges are taken greedily by score (ties: strand, window)
and a range that shares a window with one taken before is skipped (it is the same locus). Ranges with a
score below min_hits are dropped; at most max_cands candidates a read (both strands together, in the
order ranges are taken), output sorted by (strand, pos) and unique (a duplicate keeps the higher score).
Reads are independent: query_batch runs ranges of reads on threads (threads.py) with identical output
for any thread count.
"""
import math

import numpy as np
from numba import njit

from pymap.kernels.sorting import sort_int64, sort_pairs
from pymap.kernels.threads import range_bounds, run_ranges

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
#: the table's load factor (distinct keys / slots): linear probing stays at a few probes per lookup
LOAD = 0.75
MAX_K = 31
PACK_BITS = 20
PACK = 1 << PACK_BITS
#: windows are meant to be about read-sized; a bound on the option (sketching is linear in w anyway)
MAX_WINDOW = 1 << 15

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U32 = np.uint64(32)
_U33 = np.uint64(33)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SLOT_SEED = np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True, nogil=True)
def fmix64(x):
    """murmur3's 64-bit finalizer: a bijection of uint64 with full avalanche."""
    x ^= x >> _U33
    x *= _M1
    x ^= x >> _U33
    x *= _M2
    x ^= x >> _U33
    return x


@njit(cache=True, nogil=True)
def kmer_hash(canon):
    """h1: the sketch value of a canonical k-mer code (never EMPTY)."""
    h = fmix64(canon + _GOLDEN)
    if h == EMPTY:
        h = EMPTY - _U1
    return h


@njit(cache=True, nogil=True)
def slot_of(h, m):
    """h2: the home slot of sketch value h in a table of m (< 2^32) slots."""
    return np.int64(((fmix64(h ^ _SLOT_SEED) >> _U32) * np.uint64(m)) >> _U32)


@njit(cache=True, nogil=True)
def sketch_segment(codes, a, b, k, s, out_h, out_v):
    """The s smallest distinct hashes of the canonical k-mers of codes[a:b] (codes 0..3, others skipped)
    into out_h[:n] ascending, with out_v[:n] = (k-mer start - a) << 1 | orientation (first occurrence of
    a value). Returns n (<= s)."""
    n = 0
    if b - a < k or s <= 0:
        return 0
    mask = (_U1 << np.uint64(2 * k)) - _U1
    shift = np.uint64(2 * (k - 1))
    fwd = _U0
    rc = _U0
    valid = 0
    for i in range(a, b):
        c = np.int64(codes[i])
        if c > 3:
            valid = 0
            fwd = _U0
            rc = _U0
            continue
        fwd = ((fwd << _U2) | np.uint64(c)) & mask
        rc = (rc >> _U2) | (np.uint64(3 - c) << shift)
        valid += 1
        if valid < k or fwd == rc:
            continue
        if fwd < rc:
            h = kmer_hash(fwd)
            o = 0
        else:
            h = kmer_hash(rc)
            o = 1
        if n == s and h >= out_h[n - 1]:
            continue
        pos = n
        while pos > 0 and out_h[pos - 1] > h:
            pos -= 1
        if pos > 0 and out_h[pos - 1] == h:
            continue                       # the value is in the sketch already
        last = n if n < s else s - 1
        for t in range(last, pos, -1):
            out_h[t] = out_h[t - 1]
            out_v[t] = out_v[t - 1]
        out_h[pos] = h
        out_v[pos] = ((i - k + 1 - a) << 1) | o
        if n < s:
            n += 1
    return n


def reference_windows(offsets, k, w, stride):
    """(wstart int64[W], wend int64[W], wctg int32[W]) of every contig's windows (see the module doc)."""
    offsets = np.asarray(offsets, np.int64)
    lengths = np.diff(offsets)
    nwin = np.where(lengths >= k, (lengths - k) // stride + 1, 0).astype(np.int64)
    wctg = np.repeat(np.arange(lengths.size, dtype=np.int32), nwin)
    first = np.cumsum(nwin) - nwin
    j = np.arange(int(nwin.sum()), dtype=np.int64) - np.repeat(first, nwin)
    wstart = offsets[:-1][wctg] + j * stride
    wend = np.minimum(wstart + w, offsets[1:][wctg])
    return wstart, wend, wctg


@njit(cache=True, nogil=True)
def sketch_windows(r0, r1, codes, wstart, wend, k, s, out_h, out_v, out_n):
    """Sketches of windows r0..r1-1: window i's into out_h/out_v[i * s: i * s + out_n[i]]."""
    for i in range(r0, r1):
        out_n[i] = sketch_segment(codes, wstart[i], wend[i], k, s, out_h[i * s:(i + 1) * s],
                                  out_v[i * s:(i + 1) * s])


@njit(cache=True, nogil=True)
def insert_keys(ukeys, keys):
    """Insert the distinct values ukeys into the empty open-addressing table keys (linear probing from
    h2); returns the slot of each key."""
    m = keys.shape[0]
    slot = np.empty(ukeys.shape[0], np.int64)
    for j in range(ukeys.shape[0]):
        h = ukeys[j]
        p = slot_of(h, m)
        while keys[p] != EMPTY:
            p += 1
            if p == m:
                p = 0
        keys[p] = h
        slot[j] = p
    return slot


@njit(cache=True, nogil=True)
def lookup(keys, h):
    """Slot of sketch value h, -1 when absent."""
    m = keys.shape[0]
    p = slot_of(h, m)
    while True:
        kk = keys[p]
        if kk == h:
            return p
        if kk == EMPTY:
            return np.int64(-1)
        p += 1
        if p == m:
            p = 0


def build(codes, offsets, k, w, stride, s, bucket_cap, load=LOAD):
    """The table arrays (module doc) of a reference: codes uint8 (0..3, 4 = N), offsets int64[n + 1]."""
    wstart, wend, wctg = reference_windows(offsets, k, w, stride)
    nw = wstart.shape[0]
    hs = np.empty(nw * s, np.uint64)
    vs = np.empty(nw * s, np.int64)
    ns = np.zeros(nw, np.int64)
    run_ranges(sketch_windows, range_bounds(nw, 64), codes, wstart, wend, k, s, hs, vs, ns)
    valid = (np.arange(s, dtype=np.int64)[None, :] < ns[:, None]).ravel()
    key = hs[valid]
    win = np.repeat(np.arange(nw, dtype=np.uint32), ns)
    pdtype = np.uint32 if 2 * (int(codes.shape[0]) + 1) < (1 << 32) else np.uint64
    # the k-mer's global start << 1 | orientation: a hit's diagonal without a second (random) access to
    # the window table
    off = ((np.repeat(wstart, ns) << 1) + vs[valid]).astype(pdtype)
    del hs, vs, valid
    order = np.argsort(key, kind="stable")          # a key's locations stay in window order
    key, win, off = key[order], win[order], off[order]
    del order
    n = key.shape[0]
    new = np.ones(n, np.bool_)
    new[1:] = key[1:] != key[:-1]
    first = np.flatnonzero(new)
    counts = np.diff(np.append(first, n))
    ukeys = key[first]
    m = max(1, int(math.ceil(ukeys.shape[0] / load)))
    if m >= 1 << 32:
        raise ValueError("too many distinct sketch values for one table (2^32 slots)")
    keys = np.full(m, EMPTY, np.uint64)
    slot = insert_keys(ukeys, keys)
    sizes = np.zeros(m, np.int64)
    kept = np.minimum(counts, bucket_cap)
    sizes[slot] = kept
    nv = int(kept.sum())
    bstart = np.zeros(m + 1, np.int64)
    np.cumsum(sizes, out=bstart[1:])
    key_of = np.repeat(np.arange(ukeys.shape[0], dtype=np.int64), counts)
    rank = np.arange(n, dtype=np.int64) - first[key_of]
    keep = rank < bucket_cap
    dest = bstart[slot[key_of[keep]]] + rank[keep]
    loc = np.empty((nv, 2), pdtype)        # one row a location: one cache line holds a whole small bucket
    loc[dest, 0] = win[keep]
    loc[dest, 1] = off[keep]
    over = np.flatnonzero(counts > bucket_cap)
    o = np.argsort(slot[over], kind="stable")
    bdtype = np.uint32 if nv < (1 << 32) else np.uint64
    return {"keys": keys, "bstart": bstart.astype(bdtype), "loc": loc,
            "over_slot": slot[over][o].astype(np.int64), "over_count": counts[over][o].astype(np.int64),
            "wstart": wstart, "wctg": wctg}


# ------------------------------------------------------------------------------------------ queries

@njit(cache=True, nogil=True)
def read_sketch(codes, a, b, k, w, stride, s, sk_h, sk_v, tmp_h, tmp_v):
    """The union (distinct values, ascending) of the sketches of the windows of read codes[a:b]
    (windows of w bases every stride bases, the last one reaching the read's end) into sk_h/sk_v
    (v = offset in the read << 1 | orientation; a value in several windows keeps the earliest window's
    entry). Returns (count, sk_h, sk_v): the buffers grow when needed (sk_h/sk_v hold two halves: the
    union and the scratch of the next merge)."""
    L = b - a
    nsk = 0
    t = 0
    while t + k <= L:
        e = min(t + w, L)
        n = sketch_segment(codes, a + t, a + e, k, s, tmp_h, tmp_v)
        if 2 * (nsk + n) > sk_h.shape[0]:
            nh_ = np.empty(4 * (nsk + n), np.uint64)
            nv_ = np.empty(4 * (nsk + n), np.int64)
            nh_[:nsk] = sk_h[:nsk]
            nv_[:nsk] = sk_v[:nsk]
            sk_h = nh_
            sk_v = nv_
        # merge two ascending lists into the upper half, then move the result down
        half = sk_h.shape[0] // 2
        i = 0
        j = 0
        o = half
        while i < nsk or j < n:
            if j == n or (i < nsk and sk_h[i] <= tmp_h[j]):
                if j < n and i < nsk and sk_h[i] == tmp_h[j]:
                    j += 1                       # the value is in the union already
                sk_h[o] = sk_h[i]
                sk_v[o] = sk_v[i]
                i += 1
            else:
                sk_h[o] = tmp_h[j]
                sk_v[o] = tmp_v[j] + (t << 1)
                j += 1
            o += 1
        nsk = o - half
        for x in range(nsk):
            sk_h[x] = sk_h[half + x]
            sk_v[x] = sk_v[half + x]
        if e == L:
            break
        t += stride
    return nsk, sk_h, sk_v


@njit(cache=True, nogil=True)
def top_ranges(dkey, dcnt, nd, nwin, wctg, sws, min_hits, rend, rscore, order):
    """MetaCache's sliding-window scan over the distinct hit windows of a read, dkey[:nd] ascending
    (strand * nwin + window id) with counts dcnt: range a covers hit windows a..rend[a] (same strand and
    contig, id < id_a + sws), scored rscore[a] = sum of their counts. Writes into order[:nr] the ranges
    with score >= min_hits by score descending (ties: smaller key), none sharing a window with an
    earlier one; returns nr."""
    if nd == 0:
        return 0
    b = np.int64(-1)
    acc = np.int64(0)
    for a in range(nd):                     # two pointers: rend is non-decreasing in a
        if b < a:
            b = np.int64(a)
            acc = np.int64(dcnt[a])
        sa = dkey[a] // nwin
        ca = wctg[dkey[a] - sa * nwin]
        while b + 1 < nd:
            kb = dkey[b + 1]
            sb = kb // nwin
            if sb != sa or kb - dkey[a] >= sws or wctg[kb - sb * nwin] != ca:
                break
            b += 1
            acc += dcnt[b]
        rend[a] = b
        rscore[a] = acc
        acc -= dcnt[a]
    # order by score descending, key ascending: sort (-score, a) packed
    tmp = np.empty(nd, np.int64)
    for a in range(nd):
        tmp[a] = (np.int64(1 << 30) - rscore[a]) * (nd + 1) + a
    sort_int64(tmp, nd)
    used = np.zeros(nd, np.bool_)
    nr = 0
    for t in range(nd):
        a = tmp[t] % (nd + 1)
        if rscore[a] < min_hits:
            break
        free = True
        for d in range(a, rend[a] + 1):
            if used[d]:
                free = False
                break
        if not free:
            continue
        for d in range(a, rend[a] + 1):
            used[d] = True
        order[nr] = a
        nr += 1
    return nr


@njit(cache=True, nogil=True)
def range_clusters(diag, lo, hi, max_e, scratch, cmode, csize):
    """Single-linkage clusters (gaps <= max_e) of the diagonals diag[lo:hi]: each cluster's most
    frequent diagonal (ties: smallest) into cmode and its number of hits into csize, ascending by
    diagonal; returns the number of clusters."""
    n = hi - lo
    for t in range(n):
        scratch[t] = diag[lo + t]
    sort_int64(scratch, n)
    nc = 0
    i = 0
    while i < n:
        j = i
        mode_d = scratch[i]
        mode_c = 0
        while j < n:
            if j > i and scratch[j] - scratch[j - 1] > max_e:
                break
            r = j
            while r < n and scratch[r] == scratch[j]:
                r += 1
            if r - j > mode_c:
                mode_c = r - j
                mode_d = scratch[j]
            j = r
        cmode[nc] = mode_d
        csize[nc] = j - i
        nc += 1
        i = j
    return nc


@njit(cache=True, nogil=True)
def query_reads(r0, r1, codes, offsets, max_edits, k, w, stride, s, min_hits, max_cands, keys, bstart, loc,
                wstart, wctg, out_strand, out_pos, out_score, out_cnt):
    """query_batch for reads r0..r1-1 (one range, one thread; scratch buffers grow as needed)."""
    nwin = np.int64(wstart.shape[0])
    sk_h = np.empty(64, np.uint64)
    sk_v = np.empty(64, np.int64)
    tmp_h = np.empty(s, np.uint64)
    tmp_v = np.empty(s, np.int64)
    qb = np.empty((64, 2), np.int64)
    hkey = np.empty(256, np.int64)
    hidx = np.empty(256, np.int64)
    hdiag = np.empty(256, np.int64)
    dkey = np.empty(256, np.int64)
    dcnt = np.empty(256, np.int64)
    dfirst = np.empty(257, np.int64)
    rend = np.empty(256, np.int64)
    rscore = np.empty(256, np.int64)
    order = np.empty(256, np.int64)
    sdiag = np.empty(256, np.int64)
    scratch = np.empty(256, np.int64)
    cmode = np.empty(256, np.int64)
    csize = np.empty(256, np.int64)
    for r in range(r0, r1):
        a = offsets[r]
        b = offsets[r + 1]
        L = b - a
        out_cnt[r] = 0
        if L < k:
            continue
        nsk, sk_h, sk_v = read_sketch(codes, a, b, k, w, stride, s, sk_h, sk_v, tmp_h, tmp_v)
        # ---- lookups stage by stage (home slots, probes, bucket bounds): the memory accesses within a
        # stage are independent, so their cache misses overlap instead of forming one chain per value
        if nsk > qb.shape[0]:
            qb = np.empty((2 * nsk, 2), np.int64)
        m = keys.shape[0]
        for q in range(nsk):
            qb[q, 0] = slot_of(sk_h[q], m)
        total = np.int64(0)
        for q in range(nsk):
            p = qb[q, 0]
            h = sk_h[q]
            while True:
                kk = keys[p]
                if kk == h or kk == EMPTY:
                    break
                p += 1
                if p == m:
                    p = 0
            qb[q, 0] = p if kk == h else -1
        for q in range(nsk):
            p = qb[q, 0]
            if p < 0:
                qb[q, 1] = 0
                continue
            qb[q, 0] = np.int64(bstart[p])
            qb[q, 1] = np.int64(bstart[p + 1]) - qb[q, 0]
            total += qb[q, 1]
        if total > hkey.shape[0]:
            hkey = np.empty(2 * total, np.int64)
            hdiag = np.empty(2 * total, np.int64)
            hidx = np.empty(2 * total, np.int64)
        # ---- hits: (strand * nwin + window, diagonal)
        nh = 0
        for q in range(nsk):
            i = sk_v[q] >> 1
            o = sk_v[q] & 1
            e0 = qb[q, 0]
            for e in range(e0, e0 + qb[q, 1]):
                wi = np.int64(loc[e, 0])
                lv = np.int64(loc[e, 1])
                pref = lv >> 1
                st = o ^ (lv & 1)
                hkey[nh] = st * nwin + wi
                hdiag[nh] = pref - i if st == 0 else pref - (L - k - i)
                nh += 1
        if nh == 0:
            continue
        if nh > dkey.shape[0]:
            size = 2 * nh
            dkey = np.empty(size, np.int64)
            dcnt = np.empty(size, np.int64)
            dfirst = np.empty(size + 1, np.int64)
            rend = np.empty(size, np.int64)
            rscore = np.empty(size, np.int64)
            order = np.empty(size, np.int64)
            sdiag = np.empty(size, np.int64)
            scratch = np.empty(size, np.int64)
            cmode = np.empty(size, np.int64)
            csize = np.empty(size, np.int64)
        if nh < PACK and 2 * nwin < (np.int64(1) << 42):
            for t in range(nh):                  # one int64 sort: (strand, window) above the hit's index
                hidx[t] = (hkey[t] << PACK_BITS) | t
            sort_int64(hidx, nh)
            for t in range(nh):
                hkey[t] = hidx[t] >> PACK_BITS
                sdiag[t] = hdiag[hidx[t] & (PACK - 1)]
        else:
            for t in range(nh):
                hidx[t] = t
            sort_pairs(hkey, hidx, nh)           # stable: by (strand, window), then hit order
            for t in range(nh):
                sdiag[t] = hdiag[hidx[t]]
        # ---- window count statistic
        nd = 0
        for t in range(nh):
            if t == 0 or hkey[t] != hkey[t - 1]:
                dkey[nd] = hkey[t]
                dcnt[nd] = 0
                dfirst[nd] = t
                nd += 1
            dcnt[nd - 1] += 1
        dfirst[nd] = nh
        # ---- top candidates
        sws = (L - k + max_edits[r] + w - k) // stride + 1
        nr = top_ranges(dkey, dcnt, nd, nwin, wctg, sws, min_hits, rend, rscore, order)
        nc = 0
        for t in range(nr):
            if nc == max_cands:
                break
            ra = order[t]
            st = dkey[ra] // nwin
            ncl = range_clusters(sdiag, dfirst[ra], dfirst[rend[ra] + 1], max_edits[r], scratch, cmode, csize)
            bx = 0
            for x in range(1, ncl):
                if csize[x] > csize[bx]:
                    bx = x
            # the largest cluster, then the others holding at least half as many hits (a read in a tandem
            # array fits at several shifts of the unit: selection must see them all)
            for y in range(ncl):
                x = bx if y == 0 else (y - 1 if y <= bx else y)
                if nc == max_cands:
                    break
                if y == 0 or 2 * csize[x] >= csize[bx]:
                    base = r * max_cands + nc
                    out_strand[base] = st
                    out_pos[base] = cmode[x]
                    out_score[base] = rscore[ra]
                    nc += 1
        # ---- sort the read's candidates by (strand, pos), drop duplicates (keep the higher score)
        base = r * max_cands
        for x in range(1, nc):
            ys = out_strand[base + x]
            yp = out_pos[base + x]
            yc = out_score[base + x]
            j = x - 1
            while j >= 0 and (out_strand[base + j] > ys
                              or (out_strand[base + j] == ys and out_pos[base + j] > yp)):
                out_strand[base + j + 1] = out_strand[base + j]
                out_pos[base + j + 1] = out_pos[base + j]
                out_score[base + j + 1] = out_score[base + j]
                j -= 1
            out_strand[base + j + 1] = ys
            out_pos[base + j + 1] = yp
            out_score[base + j + 1] = yc
        m = 0
        for x in range(nc):
            if (m > 0 and out_strand[base + m - 1] == out_strand[base + x]
                    and out_pos[base + m - 1] == out_pos[base + x]):
                if out_score[base + x] > out_score[base + m - 1]:
                    out_score[base + m - 1] = out_score[base + x]
                continue
            out_strand[base + m] = out_strand[base + x]
            out_pos[base + m] = out_pos[base + x]
            out_score[base + m] = out_score[base + x]
            m += 1
        out_cnt[r] = m


def query_batch(codes, offsets, max_edits, k, w, stride, s, min_hits, max_cands, arrays):
    """Candidates of every read of a batch: (read int64, strand int8, pos int64, score int64), sorted by
    (read, strand, pos) and unique; score = the hit count of the window range a candidate came from.
    codes: the reads' mapping codes concatenated, offsets int64[n + 1], max_edits int32[n]. Parallel over
    ranges of reads (threads.py); the result does not depend on the thread count."""
    n = offsets.shape[0] - 1
    out_strand = np.empty(n * max_cands, np.int8)
    out_pos = np.empty(n * max_cands, np.int64)
    out_score = np.empty(n * max_cands, np.int64)
    out_cnt = np.zeros(n, np.int64)
    a = arrays
    if n:
        run_ranges(query_reads, range_bounds(n, 64), codes, offsets, max_edits, k, w, stride, s, min_hits,
                   max_cands, a["keys"], a["bstart"], a["loc"], a["wstart"], a["wctg"],
                   out_strand, out_pos, out_score, out_cnt)
    read = np.repeat(np.arange(n, dtype=np.int64), out_cnt)
    first = np.cumsum(out_cnt) - out_cnt
    idx = read * max_cands + (np.arange(read.shape[0], dtype=np.int64) - first[read])
    return read, out_strand[idx], out_pos[idx], out_score[idx]
