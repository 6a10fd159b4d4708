"""Canonical k-mer counting by minimizer partitioning and sorting (RapidGKC's workflow, on CPU threads).

The kernels, in the order the driver (mapper/count.py) calls them:

1. ``parse_chunk``: FASTA/FASTQ text (one chunk of a stream, any cut) -> base codes in CSR pieces. A
   record longer than ``max_piece`` or cut by the chunk end continues in the next piece, which starts
   with the record's last k-1 bases: every k-mer of the input lies in exactly one piece.
2. ``partition_super_kmers`` (phase 1, over piece ranges on threads): canonical signature minimizers
   (kernels/minimizers.py) -> super k-mers -> 1- or 2-word records, sorted by the partition of their
   minimizer (a hash of it, the top log2(P) bits); ``merge_block`` appends them to the store. A k-mer
   and its reverse complement have the same minimizer, so all occurrences of a canonical k-mer land in
   one partition.
3. ``count_partitions`` (phase 2, over partition ranges on threads): each partition's records are
   decoded into canonical k-mers (2-bit, first base most significant, so integer order is
   lexicographic order), LSD-radix sorted and run-length counted (RapidGKC's algorithm 1).
4. ``line_bytes_ranges`` / ``format_lines_ranges``: (k-mer, count) -> ``KMER<TAB>COUNT`` lines.

Super k-mer record: one or two uint64 words. Word 0: the number of k-mers minus one in its low 6
bits, bases 0..28 above them (base t at bits 62-2t..63-2t: first base most significant); word 1, only
when the super k-mer has more than 29 bases: bases 29..60 (base t at bits 62-2(t-29)..63-2(t-29)).
The length L = n + k - 1 follows from n, so the number of words does too: ``record_words``. A record
holds at most 61 bases: super k-mers are cut to ``max_record_kmers(k) = 62 - k`` k-mers (k <= 31).
Most super k-mers of k <= 25 fit in one word (8 bytes for about 6 k-mers at k = 21).
Codes >= 4 (N and every other non-ACGT byte) end k-mers: no k-mer holding one is counted.
"""
import numpy as np
from numba import njit

from pymap.kernels.minimizers import NO_VALUE, partition_of, ring_size, signature_value, window_push

MAX_K = 31
COUNT_MAX = np.iinfo(np.uint32).max     # counts saturate here (a k-mer seen 4.29e9 times)
RADIX_BITS = 11
SMALL_SORT = 48

# stream formats (state[0]); the state array is documented at parse_chunk
FASTA = 1
FASTQ = 2
ERR_NONE = 0
ERR_FASTQ_HEADER = 1      # a FASTQ record does not start with '@'
ERR_FASTQ_QUAL = 2        # quality longer than the sequence
ERR_TRUNCATED = 3         # the input ends inside a FASTQ record
STATE_SIZE = 10


def max_record_kmers(k):
    """Most k-mers a super k-mer record holds (61 bases; at most 64 k-mers, 6 bits)."""
    return min(64, 62 - k)


def new_parse_state(fmt):
    """A fresh parser state for a stream of format FASTA or FASTQ."""
    st = np.zeros(STATE_SIZE, np.int64)
    st[0] = fmt
    return st


# --------------------------------------------------------------------------------------------------
# 1. text -> code pieces

@njit(cache=True, nogil=True)
def parse_chunk(buf, state, carry, table, k, max_piece, final):
    """Parse one chunk of a FASTA or FASTQ stream into (codes, offsets): the pieces of this chunk.

    buf: uint8 text; table: byte -> code (kernels.encoding.ASCII_TO_CODE: lowercase as uppercase);
    '\\r' is ignored everywhere; in FASTA every other byte of a sequence line is a base (non-ACGT ones
    become code 4). FASTQ records may span several sequence and quality lines (the quality ends when
    it is as long as the sequence). carry: uint8[>= k-1], the open record's last bases between calls.
    state (int64[STATE_SIZE], kept between the chunks of one stream): 0 format, 1 parser state, 2 bases
    of the current record, 3 quality bytes seen, 4 records started, 5 bases in carry, 6 error code,
    7 record of the error (1-based), 8 bases parsed in all, 9 unused.
    Pieces shorter than k are dropped (they hold no k-mer). final: the stream ends with this chunk.
    On an error, state[6] != 0 and the output is empty.
    """
    n = buf.shape[0]
    k1 = k - 1
    step = max_piece - k1
    cap = n + k1 + k1 * (n // step + 2)
    codes = np.empty(cap, np.uint8)
    fmt = state[0]
    # pieces: at most one per record start ('>' or '@' bytes), one per max_piece split, one more
    marker = 62 if fmt == FASTA else 64
    nmark = 0
    for i in range(n):
        nmark += buf[i] == marker
    offs = np.empty(nmark + n // step + 4, np.int64)
    offs[0] = 0
    npieces = 0
    st = state[1]
    reclen = state[2]
    qcount = state[3]
    nrec = state[4]
    total = state[8]
    cl = state[5]
    for t in range(cl):
        codes[t] = carry[t]
    pos = cl
    piece = 0          # start of the open piece
    err = ERR_NONE
    i = 0
    while i < n:
        c = buf[i]
        i += 1
        if c == 13:
            continue
        seq_line = False
        if fmt == FASTA:
            if st == 0:                       # line start
                if c == 62:                   # '>': a record ends, another begins
                    if pos - piece >= k:
                        npieces += 1
                        offs[npieces] = pos
                        piece = pos
                    pos = piece
                    reclen = 0
                    nrec += 1
                    st = 1
                elif c != 10:
                    st = 2
                    seq_line = True
            elif st == 1:                     # header: skip to its end
                while c != 10 and i < n:
                    c = buf[i]
                    i += 1
                if c == 10:
                    st = 0
            else:                             # sequence line continued from the previous chunk
                if c == 10:
                    st = 0
                else:
                    seq_line = True
        else:
            if st == 0:                       # expecting '@'
                if c == 64:
                    nrec += 1
                    reclen = 0
                    piece = pos
                    st = 1
                elif c != 10:
                    err = ERR_FASTQ_HEADER
                    break
            elif st == 1:                     # header line
                while c != 10 and i < n:
                    c = buf[i]
                    i += 1
                if c == 10:
                    st = 2
            elif st == 2:                     # sequence line start
                if c == 43:                   # '+': the sequence is complete
                    if pos - piece >= k:
                        npieces += 1
                        offs[npieces] = pos
                        piece = pos
                    pos = piece
                    qcount = 0
                    st = 4
                elif c != 10:
                    st = 3
                    seq_line = True
            elif st == 3:                     # sequence line continued from the previous chunk
                if c == 10:
                    st = 2
                else:
                    seq_line = True
            elif st == 4:                     # '+' line
                while c != 10 and i < n:
                    c = buf[i]
                    i += 1
                if c == 10:
                    st = 6 if reclen == 0 else 5   # an empty sequence has an empty quality line
            elif st == 5:                     # quality
                while c != 10:
                    if c != 13:
                        qcount += 1
                    if i == n:
                        break
                    c = buf[i]
                    i += 1
                if qcount > reclen:
                    err = ERR_FASTQ_QUAL
                    break
                if c == 10 and qcount == reclen:
                    st = 0
            else:                             # st 6: the empty quality line of an empty record
                if c == 10:
                    st = 0
                else:
                    err = ERR_FASTQ_QUAL
                    break
        if seq_line:
            # the rest of a sequence line: c is its first byte (not a newline)
            while True:
                if c != 13:
                    codes[pos] = table[c]
                    pos += 1
                    reclen += 1
                    total += 1
                    if pos - piece == max_piece:      # close the piece; the next repeats k-1 bases
                        npieces += 1
                        offs[npieces] = pos
                        for t in range(k1):
                            codes[pos + t] = codes[pos - k1 + t]
                        piece = pos
                        pos += k1
                if i == n:
                    break
                c = buf[i]
                i += 1
                if c == 10:
                    st = 0 if fmt == FASTA else 2
                    break
    if err == ERR_NONE and final and fmt == FASTQ:
        if st == 5 and qcount == reclen:
            st = 0
        if st == 6:
            st = 0
        if st != 0:
            err = ERR_TRUNCATED
    if err != ERR_NONE:
        state[6] = err
        state[7] = nrec
        return codes[:0], offs[:1]
    # the open record: keep its last k-1 bases for the next chunk
    open_rec = (fmt == FASTA and st != 1) or (fmt == FASTQ and (st == 2 or st == 3))
    cl = 0
    if open_rec and not final:
        a = pos - k1
        if a < piece:
            a = piece
        cl = pos - a
        for t in range(cl):
            carry[t] = codes[a + t]
    if pos - piece >= k:
        npieces += 1
        offs[npieces] = pos
        piece = pos
    pos = piece
    state[1] = st
    state[2] = reclen
    state[3] = qcount
    state[4] = nrec
    state[5] = cl
    state[8] = total
    return codes[:pos], offs[:npieces + 1]


# --------------------------------------------------------------------------------------------------
# 2. phase 1: super k-mers -> partitioned records

@njit(inline="always")
def _pack(codes, start, nbases, nk):
    """The words of the super k-mer codes[start:start + nbases] holding nk k-mers (w1 = 0 when it
    fits in one)."""
    w0 = np.uint64(nk - 1)
    w1 = np.uint64(0)
    lim = nbases if nbases < 29 else 29
    for t in range(lim):
        w0 |= np.uint64(codes[start + t]) << np.uint64(62 - 2 * t)
    for t in range(29, nbases):
        w1 |= np.uint64(codes[start + t]) << np.uint64(120 - 2 * t)
    return w0, w1


@njit(inline="always")
def record_kmers(w0):
    """Number of k-mers of a record, from its first word."""
    return np.int64(w0 & np.uint64(63)) + 1


@njit(inline="always")
def record_words(nk, k):
    """Words of a record of nk k-mers."""
    return 1 if nk + k - 1 <= 29 else 2


@njit(cache=True, nogil=True)
def partition_super_kmers(codes, offsets, s_lo, s_hi, k, m, rule, log2_parts):
    """Phase 1 for pieces s_lo..s_hi-1: (records, part_offsets, part_kmers).

    records: uint64 words, the super k-mer records sorted by partition (stable: in input order within
    one); part_offsets: int64[P + 1], word bounds of each partition; part_kmers: int64[P], k-mers per
    partition. Super k-mers: maximal runs of consecutive valid k-mers with one minimizer
    value (kernels/minimizers.py, rule and m as there), cut to max_record_kmers(k) k-mers.
    """
    nparts = 1 << log2_parts
    maxn = min(64, 62 - k)
    mask = (np.int64(1) << (2 * m)) - 1
    shift = 2 * (m - 1)
    w = k - m + 1
    cap = ring_size(w)
    ring = np.empty(cap, np.int64)
    cm = cap - 1
    # at most one super k-mer per k-mer
    rcap = 1
    for s in range(s_lo, s_hi):
        rcap += max(0, offsets[s + 1] - offsets[s] - k + 1)
    w0s = np.empty(rcap, np.uint64)
    w1s = np.empty(rcap, np.uint64)
    parts = np.empty(rcap, np.int32)
    nrec = 0
    for s in range(s_lo, s_hi):
        a = offsets[s]
        b = offsets[s + 1]
        fwd = np.int64(0)
        rc = np.int64(0)
        run = 0
        win_v = np.int64(NO_VALUE)
        win_p = np.int64(NO_VALUE)
        cur_v = np.int64(NO_VALUE)
        cur_start = 0
        cur_n = 0
        for j in range(a, b + 1):
            if j < b:
                c = np.int64(codes[j])
                if c > 3:
                    run = 0
                    win_p = NO_VALUE
                else:
                    fwd = ((fwd << 2) | c) & mask
                    rc = (rc >> 2) | ((3 - c) << shift)
                    run += 1
                    if run >= m:
                        win_v, win_p = window_push(ring, cm, w, signature_value(fwd, rc, m, rule),
                                                   j - m + 1, win_v, win_p)
                        if run >= k:
                            # the k-mer starting at j-k+1 is valid; run >= k+1 means its
                            # predecessor is too, so it may extend the open super k-mer
                            if run > k and win_v == cur_v and cur_n < maxn:
                                cur_n += 1
                                continue
                            if cur_n > 0:
                                x0, x1 = _pack(codes, cur_start, cur_n + k - 1, cur_n)
                                w0s[nrec] = x0
                                w1s[nrec] = x1
                                parts[nrec] = partition_of(cur_v, log2_parts)
                                nrec += 1
                            cur_v = win_v
                            cur_start = j - k + 1
                            cur_n = 1
                            continue
            # no valid k-mer ends here: close the open super k-mer
            if cur_n > 0:
                x0, x1 = _pack(codes, cur_start, cur_n + k - 1, cur_n)
                w0s[nrec] = x0
                w1s[nrec] = x1
                parts[nrec] = partition_of(cur_v, log2_parts)
                nrec += 1
                cur_n = 0
                cur_v = NO_VALUE
    # counting sort by partition
    part_off = np.zeros(nparts + 1, np.int64)
    part_kmers = np.zeros(nparts, np.int64)
    for r in range(nrec):
        nk = record_kmers(w0s[r])
        part_off[parts[r] + 1] += record_words(nk, k)
        part_kmers[parts[r]] += nk
    for p in range(nparts):
        part_off[p + 1] += part_off[p]
    fill = part_off[:nparts].copy()
    recs = np.empty(part_off[nparts], np.uint64)
    for r in range(nrec):
        d = fill[parts[r]]
        recs[d] = w0s[r]
        if record_words(record_kmers(w0s[r]), k) == 2:
            recs[d + 1] = w1s[r]
            fill[parts[r]] = d + 2
        else:
            fill[parts[r]] = d + 1
    return recs, part_off, part_kmers


@njit(cache=True, nogil=True)
def merge_block(arena, dest, cursor, recs, part_off):
    """Append the partitions of one phase 1 output (recs, part_off) to a block of the arena whose
    partition p starts at word dest[p]; cursor[p]: words of p written so far (updated)."""
    for p in range(part_off.shape[0] - 1):
        a = part_off[p]
        n = part_off[p + 1] - a
        o = dest[p] + cursor[p]
        for i in range(n):
            arena[o + i] = recs[a + i]
        cursor[p] += n


# --------------------------------------------------------------------------------------------------
# 3. phase 2: decode, sort, run-length count

@njit(cache=True, nogil=True)
def radix_sort_u64(keys, tmp, n, nbits, hist):
    """Sort keys[:n] (values < 2**nbits) ascending; tmp: scratch of >= n; hist: int32 scratch of
    >= ceil(nbits / RADIX_BITS) * 2**RADIX_BITS. Result in keys. LSD radix with RADIX_BITS-bit digits
    (the histograms of all digits in one pass; a digit all keys share is skipped); insertion sort
    below SMALL_SORT keys."""
    if n <= SMALL_SORT:
        for i in range(1, n):
            x = keys[i]
            j = i - 1
            while j >= 0 and keys[j] > x:
                keys[j + 1] = keys[j]
                j -= 1
            keys[j + 1] = x
        return
    ndig = (nbits + RADIX_BITS - 1) // RADIX_BITS
    if ndig < 1:
        ndig = 1
    size = 1 << RADIX_BITS
    dmask = np.uint64(size - 1)
    hist[:ndig * size] = 0
    for i in range(n):
        x = keys[i]
        for d in range(ndig):
            hist[d * size + np.int64((x >> np.uint64(d * RADIX_BITS)) & dmask)] += 1
    src = keys
    dst = tmp
    swapped = False
    for d in range(ndig):
        h = hist[d * size:(d + 1) * size]
        trivial = False
        for b in range(size):
            if h[b] == n:
                trivial = True
                break
            if h[b] != 0:
                break
        if trivial:
            continue
        acc = np.int32(0)
        for b in range(size):
            c = h[b]
            h[b] = acc
            acc += c
        sh = np.uint64(d * RADIX_BITS)
        for i in range(n):
            x = src[i]
            b = np.int64((x >> sh) & dmask)
            dst[h[b]] = x
            h[b] += 1
        src, dst = dst, src
        swapped = not swapped
    if swapped:
        for i in range(n):
            keys[i] = src[i]


@njit(inline="always")
def revcomp(x, k):
    """Reverse complement of the k-mer x (2 bits a base, k <= 32)."""
    m2 = np.uint64(0x3333333333333333)
    m4 = np.uint64(0x0F0F0F0F0F0F0F0F)
    m8 = np.uint64(0x00FF00FF00FF00FF)
    m16 = np.uint64(0x0000FFFF0000FFFF)
    x = ~x
    x = ((x >> np.uint64(2)) & m2) | ((x & m2) << np.uint64(2))
    x = ((x >> np.uint64(4)) & m4) | ((x & m4) << np.uint64(4))
    x = ((x >> np.uint64(8)) & m8) | ((x & m8) << np.uint64(8))
    x = ((x >> np.uint64(16)) & m16) | ((x & m16) << np.uint64(16))
    x = (x >> np.uint64(32)) | (x << np.uint64(32))
    return x >> np.uint64(64 - 2 * k)


@njit(inline="always")
def decode_record(arena, r, k, keys, q):
    """Write the canonical k-mers of the record at arena[r] to keys[q:]; returns (next record, q)."""
    w0 = arena[r]
    nk = record_kmers(w0)
    two = record_words(nk, k) == 2
    w1 = arena[r + 1] if two else np.uint64(0)
    kmask = (np.uint64(1) << np.uint64(2 * k)) - np.uint64(1)
    top = np.uint64(2 * (k - 1))
    if k <= 29:
        fwd = w0 >> np.uint64(64 - 2 * k)
    else:                                     # bases 0..28 of word 0, the rest from word 1
        extra = 2 * k - 58
        fwd = ((w0 >> np.uint64(6)) << np.uint64(extra)) | (w1 >> np.uint64(64 - extra))
    rc = revcomp(fwd, k)
    keys[q] = fwd if fwd < rc else rc
    for u in range(k, k + nk - 1):           # u: the base that enters
        if u < 29:
            c = (w0 >> np.uint64(62 - 2 * u)) & np.uint64(3)
        else:
            c = (w1 >> np.uint64(120 - 2 * u)) & np.uint64(3)
        fwd = ((fwd << np.uint64(2)) | c) & kmask
        rc = (rc >> np.uint64(2)) | ((np.uint64(3) - c) << top)
        q += 1
        keys[q] = fwd if fwd < rc else rc
    return r + (2 if two else 1), q + 1


@njit(cache=True, nogil=True)
def count_partitions(p_lo, p_hi, arena, block_off, key_off, k, kmers, counts, n_distinct):
    """Phase 2 for partitions p_lo..p_hi-1 (absolute partition numbers).

    arena: uint64 records of every block; block_off: int64[n_blocks, P + 1], the word bounds of
    partition p in block b; key_off: int64[P + 1], where partition p's k-mers go in kmers (its
    size: the partition's k-mer count). Writes the sorted distinct canonical k-mers of p at
    kmers[key_off[p]:], their counts at counts[key_off[p]:] and their number at n_distinct[p]."""
    nblocks = block_off.shape[0]
    nmax = 0
    for p in range(p_lo, p_hi):
        nmax = max(nmax, key_off[p + 1] - key_off[p])
    tmp = np.empty(nmax, np.uint64)
    hist = np.empty(((2 * k + RADIX_BITS - 1) // RADIX_BITS) << RADIX_BITS, np.int32)
    for p in range(p_lo, p_hi):
        o = key_off[p]
        n = key_off[p + 1] - o
        if n == 0:
            n_distinct[p] = 0
            continue
        keys = kmers[o:o + n]
        q = 0
        for b in range(nblocks):
            r = block_off[b, p]
            end = block_off[b, p + 1]
            while r < end:
                r, q = decode_record(arena, r, k, keys, q)
        radix_sort_u64(keys, tmp, n, 2 * k, hist)
        cnt = counts[o:o + n]
        d = 0
        i = 0
        while i < n:
            x = keys[i]
            j = i + 1
            while j < n and keys[j] == x:
                j += 1
            run = j - i
            keys[d] = x
            cnt[d] = COUNT_MAX if run > COUNT_MAX else run
            d += 1
            i = j
        n_distinct[p] = d


# --------------------------------------------------------------------------------------------------
# 4. text output

@njit(inline="always")
def _ndigits(x):
    d = 1
    while x >= 10:
        x //= 10
        d += 1
    return d


@njit(cache=True, nogil=True)
def line_bytes_ranges(r_lo, r_hi, bounds, counts, k, sizes):
    """sizes[r] = bytes of the lines of items bounds[r]..bounds[r+1]-1 (KMER TAB COUNT NEWLINE)."""
    for r in range(r_lo, r_hi):
        s = 0
        for i in range(bounds[r], bounds[r + 1]):
            s += k + 2 + _ndigits(np.int64(counts[i]))
        sizes[r] = s


#: 4 bases (one byte of a k-mer, first base in the high bits) -> their 4 letters
QUAD_LETTERS = np.array([[b"ACGT"[(q >> (6 - 2 * t)) & 3] for t in range(4)] for q in range(256)],
                        np.uint8)


@njit(cache=True, nogil=True)
def format_lines_ranges(r_lo, r_hi, bounds, kmers, counts, k, starts, out):
    """Write the lines of the items of ranges r_lo..r_hi-1 at out[starts[r]:]."""
    quad = QUAD_LETTERS
    letters = np.array([65, 67, 71, 84], np.uint8)
    head = k & 3                    # the first k % 4 bases one by one, then 4 at a time
    for r in range(r_lo, r_hi):
        o = starts[r]
        for i in range(bounds[r], bounds[r + 1]):
            x = kmers[i]
            for t in range(head):
                out[o + t] = letters[np.int64((x >> np.uint64(2 * (k - 1 - t))) & np.uint64(3))]
            for t in range(head, k, 4):
                q = np.int64((x >> np.uint64(2 * (k - 4 - t))) & np.uint64(255))
                out[o + t] = quad[q, 0]
                out[o + t + 1] = quad[q, 1]
                out[o + t + 2] = quad[q, 2]
                out[o + t + 3] = quad[q, 3]
            o += k
            out[o] = 9
            o += 1
            c = np.int64(counts[i])
            if c < 10:
                out[o] = 48 + c
                o += 1
            else:
                nd = _ndigits(c)
                for t in range(nd):
                    out[o + nd - 1 - t] = 48 + c % 10
                    c //= 10
                o += nd
            out[o] = 10
            o += 1
