r"""A minimizer index and its queries: (w, m) minimizers with a signature rule, every occurrence stored,
reads seeded with the same minimizers and their hits clustered by diagonal.

Plain arrays in, plain arrays out; no I/O. mapper/seeders/minimizer.py is the seeder built on these kernels.
The m-mer values, the signature rule and the sliding window are those of kernels/minimizers.py
(``signature_value``, ``window_push``, ``ring_size`` are reused as they are).

**Minimizers.** Every m-mer (m odd, so that no m-mer is its own reverse complement) gets its signature
value v (kernels/minimizers.py: the smaller orientation that passes the rule, ``4**m`` when neither does)
and an orientation bit (0 when v is the forward m-mer). The window order is ``order``:

* ``ORDER_LEX``: v itself (lexicographic order with the signature rule, as the papers define minimizers);
* ``ORDER_HASH``: ``mix(v)``, an invertible hash of the 2m-bit value (minimap2's hash64 restricted to 2m
  bits), a random order (as minimap2). With the signature rule both orders give the density of a random
  order, 2 / (w + 1) (docs/seeding.md).

A window is w consecutive m-mers (w + m - 1 bases, no non-ACGT code). Its minimizers are *all* its m-mers
of the smallest order value (kernels/minimizers.py chooses the rightmost one; storing every tied one makes
the set strand-symmetric: the reverse complement of a window has the same tied m-mers, mirrored). A
window whose m-mers all fail the rule (order value ``4**m``) has none. The minimizer occurrences of a
sequence are the union over its windows, each once, in position order. Hence: **a stretch of w + m - 1
bases that a read shares with the reference, on either strand, yields at least one common minimizer
occurrence** (unless all its m-mers fail the rule: poly-A, AC repeats and the like), and that hit lies on
the true diagonal.

**Table key.** Whatever the window order, the table is keyed by ``mix(v)`` (< 4**m): random keys whose
top b bits address a bucket (about BUCKET_KEYS keys a bucket) and whose other 2m - b bits are stored
(quotienting: 2 bytes a key for E. coli and for a 1 Gbp genome). Most keys occur once: their occurrence
is stored in place of a pointer. An occurrence is position << 1 | orientation; the flag is val's top bit;
a record's occurrences are ascending.

| array | type | content |
|---|---|---|
| ``bucket`` | uint32/64[2^b + 1] | keys of bucket t are ``keys[bucket[t]:bucket[t + 1]]`` |
| ``keys`` | uint16/32/64[K] | the low 2m - b bits of each distinct key, ascending within its bucket |
| ``val`` | uint32[K] | one occurrence (flag bit clear), or flag \| index of the key's record in multi |
| ``multi`` | uint32[M] | records of keys seen c >= 2 times: c, then c occurrences (SAMPLE_KEPT if c > max_occ) |
| ``val_hi``, ``multi_hi`` | uint8[K], uint8[M] or empty | bits 32-39 of each value, for genomes whose values need more than 31 bits (over 1 Gbp): 40-bit values, 5 bytes each; empty otherwise |

The flag is bit 31 of a value, bit 39 with the _hi arrays (value_at reads a value either way).

A key with more than ``max_occ`` occurrences is *masked*: only SAMPLE_KEPT of its occurrences, evenly
spaced through them, are stored with its count, so a query knows that a read's minimizer hit an
over-represented repeat rather than nothing, and a read made only of such repeats (a telomere, a
satellite) can still be placed on one of their copies (queries with ``sample``). The
build is deterministic (independent of the thread count).

**Queries** (``query_batch``). A read's minimizer occurrences (q, o_r) are looked up (stage by stage:
buckets, keys, ranges, so that independent cache misses overlap); an occurrence (p, o_p) of the same key
gives strand s = o_r xor o_p and the diagonal p - q (s = 0) or p - (L - m - q) (s = 1: the start of the
reverse-complemented read). The hits of each strand are clustered by diagonal with the neighborhood
seeder's kernel (kernels/diagonal_clusters.py: single linkage within max_edits, the most-hit diagonal of a
cluster, a runner-up for clusters stretched by tandem repeats, support = distinct read minimizers,
clusters below min_hits dropped). Clusters supported by fewer than min_frac times the minimizers of the
read's best cluster (both strands) are dropped, then the read keeps its max_cands best supported clusters
(ties: strand 0 first, then smaller position), output sorted by (strand, pos). Per read it also reports
how many minimizers it has, how many hit a masked key and the largest masked count. Reads are independent:
ranges of reads run on threads (threads.py) with identical output for any thread count.

**Build** (``build``). Contigs are cut into pieces of PIECE positions (each running w + m - 2 bases into the
next, so that every window is scanned by one piece); threads scan pieces twice: once counting the
occurrences of each (piece, partition) (partition: the top bits of the key), then writing each occurrence
straight to its place in partition-major arrays (keys int64, occurrences uint32 or uint64). Each partition
is then sorted by key (stable: positions stay ascending), the repeats of the pieces' overlaps dropped and
its part of the table written. Peak memory: 12 bytes per minimizer occurrence (about 0.22 a base at w = 8:
2.7 bytes a base) plus the table and the reference.
"""
import numpy as np
from numba import njit

from pymap.kernels.diagonal_clusters import HIT_BIAS, HIT_SHIFT, cluster_hits
from pymap.kernels.minimizers import ring_size, signature_value, window_push
from pymap.kernels.sorting import sort_int64_buf, sort_pairs_buf
from pymap.kernels.threads import range_bounds, run_ranges

ORDER_LEX = 0
ORDER_HASH = 1
ORDERS = {"lex": ORDER_LEX, "hash": ORDER_HASH}
#: occurrences stored of a masked key (over the build's max_occ), evenly spaced through its list
SAMPLE_KEPT = 64
#: positions per piece of a contig in the build (pieces overlap by w + m - 2 bases; threads take pieces)
PIECE = 1 << 18


# ------------------------------------------------------------------------------------------ hashing

@njit(inline="always")
def mix(x, mask):
    """minimap2's hash64 restricted to the bits of mask (2m bits): a bijection of [0, 4**m)."""
    x = (~x + (x << 21)) & mask
    x = x ^ (x >> 24)
    x = ((x + (x << 3)) + (x << 8)) & mask
    x = x ^ (x >> 14)
    x = ((x + (x << 2)) + (x << 4)) & mask
    x = x ^ (x >> 28)
    x = (x + (x << 31)) & mask
    return x


@njit(cache=True)
def mix_value(x, m):
    """mix for Python callers (tests)."""
    return mix(np.int64(x), (np.int64(1) << (2 * m)) - 1)


# ------------------------------------------------------------------------------------ minimizers

@njit(cache=True, nogil=True)
def scan_minimizers(codes, a, b, m, w, rule, order, ring, oring, out_key, out_occ, cursor, pshift, fill,
                    pos_bits):
    """The minimizer occurrences (module doc) of codes[a:b] as one sequence, in position order, routed by
    partition: an occurrence of table key kv = mix(v) belongs to partition kv >> pshift (pshift = 2m: one
    partition). Without fill, cursor[part] counts them; with fill, the occurrence goes to index
    cursor[part] (then incremented): the key to out_key, (position << 1 | orientation) to out_occ
    (positions global, i.e. indexes into codes); with pos_bits >= 0 both go to out_key as one value,
    (the key's bits below pshift) << pos_bits | occurrence. ring, oring: int64 scratch of ring_size(w)."""
    mask = (np.int64(1) << (2 * m)) - 1
    shift = 2 * (m - 1)
    inf = np.int64(1) << (2 * m)
    k = w + m - 1
    cm = ring.shape[0] - 1
    fwd = np.int64(0)
    rc = np.int64(0)
    run = 0
    cur_v = np.int64(-1)
    cur_p = np.int64(-1)
    last = np.int64(-1)
    for j in range(a, b):
        c = np.int64(codes[j])
        if c > 3:
            run = 0
            cur_p = -1
            continue
        fwd = ((fwd << 2) | c) & mask
        rc = (rc >> 2) | ((3 - c) << shift)
        run += 1
        if run < m:
            continue
        p = j - m + 1
        sv = signature_value(fwd, rc, m, rule)
        ov = sv
        if order == ORDER_HASH and sv < inf:
            ov = mix(sv, mask)
        oring[p & cm] = np.int64(sv != fwd)
        cur_v, cur_p = window_push(ring, cm, w, ov, p, cur_v, cur_p)
        if run >= k and cur_p != last and cur_v < inf:
            lo = j - k + 1                      # the window's first m-mer
            if lo <= last:
                lo = last + 1
            for t in range(lo, cur_p + 1):
                if t == cur_p or ring[t & cm] == cur_v:
                    # the ring holds order values: the table key is mix(v) in both orders
                    kv = ring[t & cm] if order == ORDER_HASH else mix(ring[t & cm], mask)
                    part = kv >> pshift
                    if fill:
                        x = cursor[part]
                        o = (np.int64(t) << 1) | oring[t & cm]
                        if pos_bits >= 0:
                            out_key[x] = ((kv & ((np.int64(1) << pshift) - 1)) << pos_bits) | o
                        else:
                            out_key[x] = kv
                            out_occ[x] = o
                    cursor[part] += 1
            last = cur_p


@njit(cache=True, nogil=True)
def _scan_pieces(p0, p1, codes, pa, pb, m, w, rule, order, cursors, pshift, out_key, out_occ, fill, pos_bits):
    """scan_minimizers of pieces p0..p1-1, piece p with the cursor row cursors[p]."""
    cap = ring_size(w)
    ring = np.empty(cap, np.int64)
    oring = np.empty(cap, np.int64)
    for p in range(p0, p1):
        scan_minimizers(codes, pa[p], pb[p], m, w, rule, order, ring, oring, out_key, out_occ, cursors[p],
                        pshift, fill, pos_bits)


@njit(cache=True, nogil=True)
def _keep_increasing(keys, occ, keep):
    """keep[i]: occ[i] >> 1 is larger than every earlier position of the same key (keys grouped, each
    group in the order the pieces emitted it): drops the repeats of the pieces' overlaps (a piece emits
    no new position below one its predecessor emitted). Returns the number kept."""
    best = np.int64(-1)
    n = 0
    for i in range(occ.shape[0]):
        if i == 0 or keys[i] != keys[i - 1]:
            best = -1
        p = np.int64(occ[i]) >> 1
        keep[i] = p > best
        if p > best:
            best = p
            n += 1
    return n


def pieces(offsets, k, piece=PIECE):
    """(starts, ends) of the pieces the build scans: every contig cut every `piece` bases, each piece
    running k - 1 bases into the next so that every window lies in exactly one piece's window range."""
    offsets = np.asarray(offsets, np.int64)
    lens = np.diff(offsets)
    npc = np.maximum(1, (lens + piece - 1) // piece)
    ctg = np.repeat(np.arange(lens.size), npc)
    j = np.arange(int(npc.sum()), dtype=np.int64) - np.repeat(np.cumsum(npc) - npc, npc)
    pa = offsets[:-1][ctg] + j * piece
    pb = np.minimum(pa + piece + k - 1, offsets[1:][ctg])
    return pa, pb


def partitioned_occurrences(codes, offsets, m, w, rule, order, pbits, piece=PIECE, odtype=np.int64, pos_bits=-1):
    """(keys int64, occ odtype, bounds int64[2^pbits + 1]) of every minimizer occurrence, grouped by
    partition (the top pbits bits of the key: partition t is [bounds[t], bounds[t + 1])), within a
    partition in piece order, each piece's in position order. The pieces' overlaps may repeat an
    occurrence (_keep_increasing drops them). On threads over pieces, two passes (count, fill): the
    arrays are written in place, 8 + odtype's bytes an occurrence. With pos_bits >= 0: (packed int64,
    None, bounds), key and occurrence in one value (scan_minimizers), 8 bytes an occurrence."""
    codes = np.ascontiguousarray(codes, np.uint8)
    pa, pb = pieces(offsets, w + m - 1, piece)
    npcs = pa.shape[0]
    nparts = 1 << pbits
    pshift = 2 * m - pbits
    counts = np.zeros((npcs, nparts), np.int64)
    dummy_k = np.empty(0, np.int64)
    dummy_o = np.empty(0, odtype)
    bounds_p = range_bounds(npcs, 1)
    run_ranges(_scan_pieces, bounds_p, codes, pa, pb, m, w, rule, order, counts, pshift, dummy_k, dummy_o,
               False, pos_bits)
    per_part = counts.sum(axis=0)
    bounds = np.zeros(nparts + 1, np.int64)
    np.cumsum(per_part, out=bounds[1:])
    cursors = np.ascontiguousarray(bounds[None, :-1] + np.cumsum(counts, axis=0) - counts)   # [piece, part]
    del counts
    total = int(bounds[-1])
    keys = np.empty(total, np.int64)
    occ = np.empty(total if pos_bits < 0 else 0, odtype)
    run_ranges(_scan_pieces, bounds_p, codes, pa, pb, m, w, rule, order, cursors, pshift, keys, occ, True,
               pos_bits)
    return keys, (occ if pos_bits < 0 else None), bounds


def minimizer_occurrences(codes, offsets, m, w, rule, order, piece=PIECE):
    """(keys int64, occ int64) of every minimizer occurrence of the sequences (CSR codes, offsets), each
    once, in position order."""
    keys, occ, _ = partitioned_occurrences(codes, offsets, m, w, rule, order, 0, piece)
    keep = np.empty(keys.shape[0], np.bool_)
    ones = np.zeros(keys.shape[0], np.int64)             # one group: every key 0
    if _keep_increasing(ones, occ, keep) < keys.shape[0]:
        keys, occ = keys[keep], occ[keep]
    return keys, occ


# ------------------------------------------------------------------------------------------- build

#: distinct keys a bucket (on average): a bucket's keys fit in one or two cache lines
BUCKET_KEYS = 8
#: most partitions of the build (2^PART_BITS): one partition's occurrences are sorted at a time
PART_BITS = 8


def bucket_bits(genome_len, m, w):
    """b: about BUCKET_KEYS distinct keys a bucket for the 2 / (w + 1) minimizers a base expected,
    at most 2m bits and 30 (from the genome length, so that it does not depend on how the build runs)."""
    expect = 2.0 * max(genome_len, 1) / (w + 1)
    b = int(np.floor(np.log2(expect / BUCKET_KEYS))) if expect > 2 * BUCKET_KEYS else 0
    return int(min(max(b, 0), 2 * m, 30))


def wide_values(arrays):
    """True when the table's values are 40 bits (val_hi, multi_hi hold their bits 32-39)."""
    return arrays["val_hi"].shape[0] > 0 or arrays["multi_hi"].shape[0] > 0


def flag_of(wide):
    """The flag bit of a value (module doc) as an int64, for 40-bit values (wide) or 32-bit ones."""
    return np.int64(1 << 39) if wide else np.int64(1 << 31)


@njit(cache=True, nogil=True, inline="always")
def value_at(lo, hi, i):
    """Value i of a table array: lo[i], with bits 32-39 from hi[i] when hi is not empty."""
    v = np.int64(lo[i])
    if hi.shape[0] != 0:
        v |= np.int64(hi[i]) << 32
    return v


@njit(cache=True, nogil=True, inline="always")
def _put(lo, hi, i, v):
    lo[i] = np.uint32(v & 0xFFFFFFFF)
    if hi.shape[0] != 0:
        hi[i] = np.uint8(v >> 32)


@njit(cache=True, nogil=True)
def _fill(counts, occ, max_occ, flag, j0, val, val_hi, multi, multi_hi):
    """val and multi (module doc) of one partition from the occurrence counts of its keys (in key order)
    and their occurrences (sorted by key, then position); records are numbered from j0."""
    e = 0
    j = 0
    for i in range(counts.shape[0]):
        c = counts[i]
        if c == 1:
            _put(val, val_hi, i, np.int64(occ[e]))
        else:
            _put(val, val_hi, i, flag | (j0 + j))
            _put(multi, multi_hi, j, np.int64(c))
            j += 1
            k = c if c <= max_occ else min(c, SAMPLE_KEPT)
            for t in range(k):
                _put(multi, multi_hi, j, np.int64(occ[e + t * c // k]))
                j += 1
        e += c
    return j


def build(codes, offsets, m, w, rule, order, max_occ, piece=PIECE, wide=False, packed=None):
    """The table arrays (module doc) of a reference (codes uint8 0..3, 4 = N; offsets int64[n + 1]).
    Values are 32 bits when every value fits in 31 (genomes under 1 Gbp), else (or with wide) 40
    (val_hi, multi_hi). The occurrences are collected packed, the key bits below the partition's and the
    occurrence in one int64 (8 bytes an occurrence), when they fit in 63 bits (packed None: whenever
    they do; positions up to 2^32 at m = 17), else as two arrays (8 + 4 bytes, 16 with uint64); then
    sorted partition by partition. Peak: that, plus the table and the reference. Same arrays either way."""
    genome = int(codes.shape[0])
    wide = wide or 2 * genome + 1 >= (1 << 31)
    vdtype = np.int64 if wide else np.uint32           # the occurrences while they are sorted
    b = bucket_bits(genome, m, w)
    pbits = min(PART_BITS, b)
    low_bits = 2 * m - b
    pos_bits = int(2 * genome + 1).bit_length()         # bits of position << 1 | orientation
    fits = 2 * m - pbits + pos_bits <= 63
    if packed and not fits:
        raise ValueError(f"occurrences of a {genome}-base genome at m = {m} do not fit 63 bits")
    packed = fits if packed is None else bool(packed)
    keys, occ, pbounds = partitioned_occurrences(codes, offsets, m, w, rule, order, pbits, piece, vdtype,
                                                 pos_bits if packed else -1)
    pshift = 2 * m - pbits
    flag = flag_of(wide)
    kdtype = np.uint16 if low_bits <= 16 else (np.uint32 if low_bits <= 32 else np.uint64)
    sub = 1 << (b - pbits)                               # buckets a partition
    out_keys, out_val, out_val_hi, out_multi, out_multi_hi, out_bcount = [], [], [], [], [], []
    j0 = 0
    for t in range(1 << pbits):
        lo, hi = int(pbounds[t]), int(pbounds[t + 1])
        if packed:
            x = keys[lo:hi]
            x.sort()                                     # by key, then position: in place
            if x.shape[0] > 1 and np.any(x[1:] == x[:-1]):
                x = x[np.append(True, x[1:] != x[:-1])]  # the repeats of the pieces' overlaps
            k = (x >> pos_bits) | (np.int64(t) << pshift)
            o = (x & ((np.int64(1) << pos_bits) - 1)).astype(vdtype)
            del x
        else:
            k = keys[lo:hi]
            o = occ[lo:hi]
            srt = np.argsort(k, kind="stable")           # a key's occurrences stay in emission order
            k = k[srt]
            o = o[srt]
            del srt
            keep = np.empty(k.shape[0], np.bool_)
            if _keep_increasing(k, o, keep) < k.shape[0]:
                k, o = k[keep], o[keep]
            del keep
        n = k.shape[0]
        new = np.ones(n, np.bool_)
        new[1:] = k[1:] != k[:-1]
        first = np.flatnonzero(new)
        ukeys = k[first]
        counts = np.diff(np.append(first, n))
        del k, new, first
        multi_keys = counts >= 2
        stored = np.where(counts <= max_occ, counts, np.minimum(counts, SAMPLE_KEPT))
        msize = int(np.count_nonzero(multi_keys)) + int(stored[multi_keys].sum())
        val = np.empty(ukeys.shape[0], np.uint32)
        val_hi = np.empty(ukeys.shape[0] if wide else 0, np.uint8)
        multi = np.empty(msize, np.uint32)
        multi_hi = np.empty(msize if wide else 0, np.uint8)
        _fill(counts, o, max_occ, flag, j0, val, val_hi, multi, multi_hi)
        j0 += msize
        out_bcount.append(np.bincount((ukeys >> low_bits) - t * sub, minlength=sub))
        out_keys.append((ukeys & ((np.int64(1) << low_bits) - 1)).astype(kdtype))
        out_val.append(val)
        out_val_hi.append(val_hi)
        out_multi.append(multi)
        out_multi_hi.append(multi_hi)
        del o, ukeys, counts
    del keys, occ
    bcount = np.concatenate(out_bcount)
    nk = int(bcount.sum())
    bucket = np.zeros(bcount.shape[0] + 1, np.uint32 if nk < (1 << 32) else np.uint64)
    np.cumsum(bcount, out=bucket[1:])
    return {"bucket": bucket, "keys": np.concatenate(out_keys), "val": np.concatenate(out_val),
            "val_hi": np.concatenate(out_val_hi), "multi": np.concatenate(out_multi),
            "multi_hi": np.concatenate(out_multi_hi)}


def table_consistent(bucket, keys, val, val_hi, multi, multi_hi, flag, max_occ, genome, low_bits):
    """True when the arrays can be queried without reading outside them: bucket ascending from 0 to
    len(keys), keys below 2^low_bits and ascending within each bucket, every single occurrence and every
    stored occurrence inside the genome, and the records of val tiling multi in key order (each a count
    >= 2, then that many occurrences, SAMPLE_KEPT when masked). Threads over ranges of buckets and of keys (each
    range's records are checked on their own, then that they follow one another); no temporary arrays
    beyond one entry a range."""
    K = keys.shape[0]
    M = multi.shape[0]
    if val.shape[0] != K or np.int64(bucket[0]) != 0 or np.int64(bucket[bucket.shape[0] - 1]) != K:
        return False
    if (val_hi.shape[0] or multi_hi.shape[0]) and (val_hi.shape[0] != K or multi_hi.shape[0] != M):
        return False
    bb = np.asarray(range_bounds(bucket.shape[0] - 1, 1 << 14), np.int64)
    ok = np.ones(max(bb.shape[0] - 1, 1), np.bool_)
    run_ranges(_buckets_ok, bb, bb, bucket, keys, low_bits, ok)
    if not ok.all():
        return False
    kb = np.asarray(range_bounds(K, 1 << 16), np.int64)
    n = max(kb.shape[0] - 1, 1)
    ok = np.ones(n, np.bool_)
    first = np.full(n, -1, np.int64)
    end = np.full(n, -1, np.int64)
    run_ranges(_records_ok, kb, kb, val, val_hi, multi, multi_hi, flag, max_occ, genome, first, end, ok)
    if not ok.all():
        return False
    j = 0
    for f, e in zip(first.tolist(), end.tolist()):
        if f < 0:
            continue
        if f != j:
            return False
        j = e
    return j == M


@njit(cache=True, nogil=True)
def _buckets_ok(t0, t1, bounds, bucket, keys, low_bits, ok):
    """table_consistent's bucket and key checks for buckets t0..t1-1 (ok[its range] cleared if not)."""
    lim = np.uint64(1) << np.uint64(low_bits) if low_bits < 64 else np.uint64(0)
    good = True
    for t in range(t0, t1):
        lo = np.int64(bucket[t])
        hi = np.int64(bucket[t + 1])
        if hi < lo or hi > keys.shape[0]:
            good = False
            break
        for i in range(lo, hi):
            x = np.uint64(keys[i])
            if (low_bits < 64 and x >= lim) or (i > lo and x <= np.uint64(keys[i - 1])):
                good = False
                break
        if not good:
            break
    ok[np.searchsorted(bounds, t0)] = good


@njit(cache=True, nogil=True)
def _records_ok(i0, i1, bounds, val, val_hi, multi, multi_hi, flag, max_occ, genome, first, end, ok):
    """table_consistent's value checks for keys i0..i1-1: their records must follow one another in
    multi from the first one's (first[range]; end[range]: where the next range's must start)."""
    r = np.searchsorted(bounds, i0)
    M = multi.shape[0]
    j = np.int64(-1)
    for i in range(i0, i1):
        v = value_at(val, val_hi, i)
        if (v & flag) == 0:
            if (v >> 1) >= genome or v < 0:
                ok[r] = False
                return
            continue
        p = v & ~flag
        if j < 0:
            first[r] = p
            j = p
        if p != j or j >= M:
            ok[r] = False
            return
        c = value_at(multi, multi_hi, j)
        if c < 2:
            ok[r] = False
            return
        j += 1
        k = c if c <= max_occ else min(c, SAMPLE_KEPT)
        if j + k > M:
            ok[r] = False
            return
        for t in range(j, j + k):
            if (value_at(multi, multi_hi, t) >> 1) >= genome:
                ok[r] = False
                return
        j += k
    end[r] = j


# ------------------------------------------------------------------------------------------ lookups

@njit(cache=True, nogil=True, inline="always")
def find_key(bucket, keys, key, low_bits):
    """Index of table key `key` in keys, -1 when absent (binary search within its bucket)."""
    t = key >> low_bits
    lo = np.int64(bucket[t])
    hi = np.int64(bucket[t + 1])
    low = key & ((np.int64(1) << low_bits) - 1)
    while lo < hi:
        mid = (lo + hi) >> 1
        x = np.int64(keys[mid])
        if x < low:
            lo = mid + 1
        elif x > low:
            hi = mid
        else:
            return mid
    return np.int64(-1)


@njit(cache=True, nogil=True, inline="always")
def key_range(val, val_hi, multi, multi_hi, i, flag, max_occ, sample):
    """(first, end, count) of key index i: its occurrences are the values of multi in [first, end)
    (first == -1: the single one in val[i]); count: all its occurrences, masked or not. A key with
    more than max_occ has none, or with sample its stored sample (max_occ: then the build's)."""
    v = value_at(val, val_hi, i)
    if (v & flag) == 0:
        return np.int64(-1), np.int64(0), np.int64(1)
    j = v & ~flag
    c = value_at(multi, multi_hi, j)
    if c > max_occ:
        return j + 1, j + 1 + (min(c, SAMPLE_KEPT) if sample else 0), c
    return j + 1, j + 1 + c, c


@njit(cache=True, nogil=True)
def lookup(bucket, keys, val, val_hi, multi, multi_hi, key, low_bits, flag, max_occ, sample=False):
    """The occurrences (position << 1 | orientation, int64 array; empty when masked, the stored sample
    with sample) and the count of a table key (0: absent). For tests and tools; the query kernel
    inlines the same steps."""
    i = find_key(bucket, keys, key, low_bits)
    if i < 0:
        return np.empty(0, np.int64), np.int64(0)
    a, b, c = key_range(val, val_hi, multi, multi_hi, i, flag, max_occ, sample)
    if a < 0:
        out = np.empty(1, np.int64)
        out[0] = value_at(val, val_hi, i)
        return out, c
    out = np.empty(b - a, np.int64)
    for t in range(a, b):
        out[t - a] = value_at(multi, multi_hi, t)
    return out, c


# ------------------------------------------------------------------------------------------ queries

@njit(cache=True, nogil=True)
def _grow1(a, need):
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def lookup_seeds(mk, ns, bucket, keys, val, val_hi, multi, multi_hi, low_bits, flag, max_occ, sample, lk):
    """The table ranges of a read's ns minimizer keys mk, stage by stage (buckets, keys, occurrence
    ranges: independent cache misses overlap): lk[q] = (first, end) in multi, or (-1 - key index, 0)
    for a single occurrence in val, (0, 0) when absent or masked (with sample: a masked key's stored
    sample, key_range). Returns (occurrences, masked keys,
    the largest masked count). lk: at least ns rows."""
    for q in range(ns):
        t = mk[q] >> low_bits
        lk[q, 0] = np.int64(bucket[t])
        lk[q, 1] = np.int64(bucket[t + 1])
    total = np.int64(0)
    for q in range(ns):
        lo = lk[q, 0]
        hi = lk[q, 1]
        low = mk[q] & ((np.int64(1) << low_bits) - 1)
        idx = np.int64(-1)
        while lo < hi:
            mid = (lo + hi) >> 1
            x = np.int64(keys[mid])
            if x < low:
                lo = mid + 1
            elif x > low:
                hi = mid
            else:
                idx = mid
                break
        lk[q, 2] = idx
    nm = 0
    mmax = np.int64(0)
    for q in range(ns):
        i = lk[q, 2]
        if i < 0:
            lk[q, 0] = 0
            lk[q, 1] = 0
            continue
        s0, s1, c = key_range(val, val_hi, multi, multi_hi, i, flag, max_occ, sample)
        if s0 < 0:                              # the single occurrence, in val
            lk[q, 0] = -1 - i
            lk[q, 1] = 0
            total += 1
            continue
        lk[q, 0] = s0
        lk[q, 1] = s1
        if c > max_occ:
            nm += 1
            if c > mmax:
                mmax = c
        total += s1 - s0
    return total, nm, mmax


@njit(cache=True, nogil=True)
def seed_hits(mk, mo, lk, ns, a, L, m, val, val_hi, multi, multi_hi, h0, h1):
    """The hits of a read's looked-up minimizers per strand, (diagonal + bias) << shift | seed index,
    into h0 (strand 0) and h1 (at least `occurrences` each). Returns (n0, n1). The single occurrences
    (in val) are taken apart from the runs in multi: one loop reading either array ran 10x slower."""
    n0 = 0
    n1 = 0
    for q in range(ns):
        qp = (mo[q] >> 1) - a
        qo = mo[q] & 1
        e0 = lk[q, 0]
        if e0 < 0:                              # a single occurrence: val[-1 - e0]
            n0, n1 = _hit(value_at(val, val_hi, -1 - e0), q, qo, qp, L, m, h0, h1, n0, n1)
            continue
        for e in range(e0, lk[q, 1]):
            n0, n1 = _hit(value_at(multi, multi_hi, e), q, qo, qp, L, m, h0, h1, n0, n1)
    return n0, n1


@njit(cache=True, nogil=True, inline="always")
def _hit(v, q, qo, qp, L, m, h0, h1, n0, n1):
    """Occurrence v of seed q (query offset qp, orientation qo) as a hit of its strand."""
    p = v >> 1
    if (v & 1) == qo:
        h0[n0] = ((p - qp + HIT_BIAS) << HIT_SHIFT) | q
        return n0 + 1, n1
    h1[n1] = ((p - (L - m - qp) + HIT_BIAS) << HIT_SHIFT) | q
    return n0, n1 + 1


@njit(cache=True, nogil=True)
def pick_clusters(h0, n0, h1, n1, max_e, min_hits, min_frac, max_cands, stamp, st, cpos, csup, ctmp, apos, asup,
                  aidx, out_strand, out_pos, base):
    """A read's candidates from its hits (module doc): the clusters of both strands, those supported
    by at least min_frac of the best one's minimizers, the max_cands best supported, written to
    out_strand/out_pos[base:]. Scratch (nothing allocated): stamp (the read's minimizers), cpos, csup
    (max(n0, n1) + 2), ctmp, apos, asup, aidx (8 (max(n0, n1) + 2)). Returns (count, next stamp)."""
    need = max(n0, n1)
    nc = 0
    for s in range(2):
        hh = h0 if s == 0 else h1
        nh = n0 if s == 0 else n1
        c, st = cluster_hits(hh, nh, max_e, min_hits, need + 2, stamp, st, cpos, csup, cpos, ctmp)
        for t in range(c):
            apos[nc] = cpos[t]
            asup[nc] = -csup[t]
            aidx[nc] = s
            nc += 1
    if min_frac > 0.0 and nc > 1:
        # drop clusters supported by less than min_frac of the best one's minimizers
        best = np.int64(0)
        for t in range(nc):
            if -asup[t] > best:
                best = -asup[t]
        kept = 0
        for t in range(nc):
            if -asup[t] >= min_frac * best:
                apos[kept] = apos[t]
                asup[kept] = asup[t]
                aidx[kept] = aidx[t]
                kept += 1
        nc = kept
    if nc <= max_cands:
        for t in range(nc):
            out_strand[base + t] = aidx[t]
            out_pos[base + t] = apos[t]
        return nc, st
    # more clusters than max_cands: the best supported (stable: strand 0 first, then position)
    key = ctmp[:nc]
    order_ = ctmp[nc:2 * nc]
    for t in range(nc):
        order_[t] = t
        key[t] = asup[t]
    sort_pairs_buf(key, order_, nc, ctmp[2 * nc:3 * nc], ctmp[3 * nc:4 * nc])
    sort_int64_buf(order_, max_cands, ctmp[2 * nc:3 * nc])
    for t in range(max_cands):
        out_strand[base + t] = aidx[order_[t]]
        out_pos[base + t] = apos[order_[t]]
    return max_cands, st


@njit(cache=True, nogil=True)
def query_reads(r0, r1, codes, offsets, max_edits, m, w, rule, order, low_bits, flag, max_occ, sample, min_hits,
                min_frac, max_cands, bucket, keys, val, val_hi, multi, multi_hi, out_strand, out_pos, out_cnt,
                n_seeds, n_masked, masked_max):
    """query_batch for reads r0..r1-1 (one range, one thread): the per-read steps (seeds, lookup_seeds,
    seed_hits, pick_clusters) on scratch buffers grown as needed."""
    cap = ring_size(w)
    ring = np.empty(cap, np.int64)
    oring = np.empty(cap, np.int64)
    mk = np.empty(256, np.int64)
    mo = np.empty(256, np.int64)
    lk = np.empty((256, 3), np.int64)
    h0 = np.empty(1024, np.int64)
    h1 = np.empty(1024, np.int64)
    stamp = np.zeros(256, np.int64)
    st = np.int64(0)
    cpos = np.empty(1024, np.int64)
    csup = np.empty(1024, np.int64)
    ctmp = np.empty(8 * 1024, np.int64)
    apos = np.empty(8 * 1024, np.int64)
    asup = np.empty(8 * 1024, np.int64)
    aidx = np.empty(8 * 1024, np.int64)
    cursor = np.zeros(1, np.int64)
    for r in range(r0, r1):
        a = offsets[r]
        b = offsets[r + 1]
        L = b - a
        out_cnt[r] = 0
        n_seeds[r] = 0
        n_masked[r] = 0
        masked_max[r] = 0
        if L < w + m - 1:
            continue
        mk = _grow1(mk, L)
        mo = _grow1(mo, L)
        cursor[0] = 0
        scan_minimizers(codes, a, b, m, w, rule, order, ring, oring, mk, mo, cursor, 2 * m, True, -1)
        ns = cursor[0]
        n_seeds[r] = ns
        if ns == 0:
            continue
        if ns > lk.shape[0]:
            lk = np.empty((2 * ns, 3), np.int64)
        total, nm, mmax = lookup_seeds(mk, ns, bucket, keys, val, val_hi, multi, multi_hi, low_bits, flag,
                                       max_occ, sample, lk)
        n_masked[r] = nm
        masked_max[r] = mmax
        if total == 0:
            continue
        h0 = _grow1(h0, total)
        h1 = _grow1(h1, total)
        n0, n1 = seed_hits(mk, mo, lk, ns, a, L, m, val, val_hi, multi, multi_hi, h0, h1)
        if ns > stamp.shape[0]:
            stamp = np.zeros(2 * ns, np.int64)
            st = 0
        need = max(n0, n1) + 2
        if need > cpos.shape[0]:
            cpos = np.empty(2 * need, np.int64)
            csup = np.empty(2 * need, np.int64)
        if 8 * need > ctmp.shape[0]:
            ctmp = np.empty(16 * need, np.int64)
            apos = np.empty(16 * need, np.int64)
            asup = np.empty(16 * need, np.int64)
            aidx = np.empty(16 * need, np.int64)
        nc, st = pick_clusters(h0, n0, h1, n1, max_edits[r], min_hits, min_frac, max_cands, stamp, st, cpos, csup,
                               ctmp, apos, asup, aidx, out_strand, out_pos, r * max_cands)
        out_cnt[r] = nc


def query_batch(codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, arrays,
                sample=False):
    """Candidates of every read of a batch: (read int64, strand int8, pos int64) sorted by (read, strand,
    pos) and unique, and per read (n_seeds, n_masked, masked_max): its minimizers, those that hit a
    masked key, the largest masked count. codes: the reads' mapping codes concatenated, offsets int64[n + 1],
    max_edits int32[n]. Parallel over ranges of reads (threads.py); the result does not depend on the
    thread count."""
    out = query_buffers(offsets.shape[0] - 1, max_cands)
    query_into(codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, arrays, *out,
               sample=sample)
    return compact(*out, max_cands)


def query_buffers(n, max_cands):
    """(out_strand, out_pos, out_cnt, n_seeds, n_masked, masked_max) for n reads: query_into's output."""
    return (np.empty(n * max_cands, np.int8), np.empty(n * max_cands, np.int64), np.zeros(n, np.int64),
            np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64))


def query_into(codes, offsets, max_edits, m, w, rule, order, max_occ, min_hits, min_frac, max_cands, a,
               out_strand, out_pos, out_cnt, n_seeds, n_masked, masked_max, sample=False):
    """query_batch's per-read results into query_buffers' arrays (read r's candidates at
    r * max_cands)."""
    n = offsets.shape[0] - 1
    if n:
        run_ranges(query_reads, range_bounds(n, 64), codes, offsets, max_edits, m, w, rule, order,
                   low_bits_of(a, m), flag_of(wide_values(a)), max_occ, bool(sample), min_hits, float(min_frac),
                   max_cands, a["bucket"], a["keys"], a["val"], a["val_hi"], a["multi"], a["multi_hi"], out_strand,
                   out_pos, out_cnt, n_seeds, n_masked, masked_max)


def compact(out_strand, out_pos, out_cnt, n_seeds, n_masked, masked_max, max_cands):
    """query_batch's result from query_into's arrays."""
    n = out_cnt.shape[0]
    read = np.repeat(np.arange(n, dtype=np.int64), out_cnt)
    first = np.cumsum(out_cnt) - out_cnt
    idx = read * max_cands + (np.arange(read.shape[0], dtype=np.int64) - first[read])
    return read, out_strand[idx], out_pos[idx], (n_seeds, n_masked, masked_max)


def low_bits_of(arrays, m):
    """2m - b for a table with 2^b buckets."""
    nb = arrays["bucket"].shape[0] - 1
    b = int(nb).bit_length() - 1
    return 2 * m - b
