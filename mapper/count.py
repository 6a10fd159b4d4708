"""`pymap count`: canonical k-mer counts of FASTA/FASTQ files, as `jellyfish count -C` counts them.

    >>> from pymap import count
    >>> res = count.count_kmers("examples/lambda.fa", k=21, threads=2)
    >>> len(res), int(res.counts.sum())                       # distinct k-mers, k-mers
    >>> with open("lambda.21.txt", "wb") as fh:
    ...     count.write_counts(res, fh)                       # KMER<TAB>COUNT lines
    >>> print(count.format_histogram(*count.histogram(res.counts)), end="")   # `jellyfish histo`

How (RapidGKC's partition-and-count workflow; docs/counting.md): the input is read in chunks of
8 MB and parsed into code pieces (kernels/kmer_count.py); phase 1 cuts them into super k-mers by
canonical signature minimizers (kernels/minimizers.py) and stores them as 1- or 2-word records grouped
by the partition of their minimizer; phase 2 takes the partitions a wave at a time, decodes each one's
canonical k-mers, radix-sorts and run-length counts them. Both phases run on `threads` Python threads
(kernels/threads.py); the result does not depend on the number of threads.

Canonical: the lexicographically smaller of a k-mer and its reverse complement. Lowercase bases count
as uppercase; a k-mer holding any other byte (N, IUPAC codes, spaces) is not counted; '\\r' is
ignored (as jellyfish does). Output order: partition by partition, each sorted; not globally sorted.

Peak memory (bytes), with R record words (R is 1.4 to 1.8 times K / 8 for K k-mers: 1.65 K / 8 at
k = 21, 1.4 K / 8 at k = 31 with the default m), W = wave_kmers, L the largest partition's k-mers,
T threads, F = FORMAT_LINES:
    8 R                           the super k-mer records of the whole input (phase 1 output)
  + 12 max(W, L) + 8 T L          phase 2: the wave's k-mers and counts, a sort scratch per thread
  + 2 x (k + 12) F                the two text buffers (count_to_file)
  + ~60 MB                        8 MB input chunks, their codes and phase 1 buffers in flight
  + ~150 MB                       Python, NumPy, Numba and its compiler;
count_kmers also keeps every distinct k-mer (12 bytes each); count_to_file (the CLI) writes or tallies
each wave in reused buffers. 100 M k-mers at k = 21: about 480 MB in all (BENCHMARKS.md).
"""
import collections
import contextlib
import math
import os
import queue
import threading
from dataclasses import dataclass

import numpy as np

from pymap.errors import InputError, UsageError
from pymap.kernels import kmer_count as KC
from pymap.kernels import minimizers as MZ
from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.kernels.threads import range_bounds, run_ranges

#: bases per piece handed to one phase 1 task (a long contig is cut, k-1 bases repeated)
MAX_PIECE = 1 << 18
#: k-mers counted per phase 2 wave
WAVE_KMERS = 1 << 21


def default_m(k):
    """Minimizer length used for k when none is given: k // 2, at most 11 (RapidGKC uses 9 at k = 28,
    KMC 7..11), at least 3 (the signature rules need 3), never more than k. On the 104 Mbp test genome
    m = 10 gives k = 21 7 % fewer record words than m = 11 at the same partition balance; m = 11 is
    the best balance at k = 31 (docs/counting.md)."""
    if k <= 3:
        return k
    return max(3, min(11, k // 2))


@dataclass
class CountOptions:
    """Options of `pymap count`, validated once by check().

    k: k-mer length, 1..31. m: minimizer length (default default_m(k)). rule: signature rule,
    'rapidgkc', 'kmc2' or 'none' (plain canonical minimizers); default 'rapidgkc', 'none' when m < 3.
    partitions: number of partitions, a power of two (default: from the input size, about 16 K
    k-mers each, 64 .. 65536). threads: 0 = all cores. wave_kmers: k-mers counted per phase 2 wave."""
    k: int = 21
    m: int = None
    rule: str = None
    partitions: int = None
    threads: int = 0
    wave_kmers: int = WAVE_KMERS

    def check(self):
        if not isinstance(self.k, (int, np.integer)) or not 1 <= self.k <= KC.MAX_K:
            raise UsageError(f"-k must be an integer in 1..{KC.MAX_K}, got {self.k}")
        self.k = int(self.k)
        if self.m is None:
            self.m = default_m(self.k)
        if not 1 <= int(self.m) <= self.k:
            raise UsageError(f"-m must be in 1..k ({self.k}), got {self.m}")
        self.m = int(self.m)
        if self.rule is None:
            self.rule = "rapidgkc" if self.m >= 3 else "none"
        try:
            self.rule_code = MZ.check_params(self.k, self.m, self.rule)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if self.partitions is not None:
            p = int(self.partitions)
            if p < 1 or p > 1 << 20 or p & (p - 1):
                raise UsageError(f"--partitions must be a power of two in 1..1048576, got {self.partitions}")
        if self.threads is None or self.threads < 0:
            raise UsageError(f"-t/--threads must be >= 1 (0 = all cores), got {self.threads}")
        if self.wave_kmers < 1:
            raise UsageError(f"wave_kmers must be >= 1, got {self.wave_kmers}")
        return self


@dataclass
class KmerCounts:
    """Distinct canonical k-mers (uint64, 2 bits a base, first base most significant: A=0 C=1 G=2
    T=3) and their counts (uint32)."""
    k: int
    kmers: np.ndarray
    counts: np.ndarray

    def __len__(self):
        return int(self.kmers.shape[0])

    def strings(self):
        """The k-mers as str (for small results)."""
        return [decode_kmer(int(x), self.k) for x in self.kmers]

    def as_dict(self):
        """{k-mer string: count} (for small results)."""
        return dict(zip(self.strings(), self.counts.tolist()))


def decode_kmer(x, k):
    return "".join("ACGT"[(x >> (2 * (k - 1 - i))) & 3] for i in range(k))


# --------------------------------------------------------------------------------------------------
# input

def _paths(paths):
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise UsageError("no input file")
    return paths


def _estimate_bases(paths):
    total = 0
    for p in paths:
        try:
            size = os.path.getsize(p)
            with open(p, "rb") as fh:
                gz = fh.read(2) == b"\x1f\x8b"
        except OSError:
            continue                      # reported when it is read
        total += size * 4 if gz else size
    return total


def _prefetch(path):
    """The chunks of pymap.reads' reader (plain or gzip, its error messages), read one chunk ahead on
    a thread: decompressing overlaps counting (zlib releases the GIL)."""
    from pymap.reads import _chunks
    q = queue.Queue(maxsize=2)
    stop = threading.Event()

    def reader():
        try:
            for data in _chunks(path):
                while not stop.is_set():
                    try:
                        q.put(data, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(None)
        except BaseException as exc:      # handed to the consumer
            q.put(exc)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def iter_pieces(path, k, max_piece=MAX_PIECE):
    """(codes, offsets) of the sequences of one FASTA/FASTQ file (plain or gzip), chunk by chunk:
    every k-mer of every record lies in exactly one piece (kernels/kmer_count.parse_chunk)."""
    source = str(path)
    max_piece = max(int(max_piece), 2 * k + 2)
    state = None
    carry = np.zeros(max(k, 1), np.uint8)
    pending = None
    for data in _prefetch(path):
        if state is None:
            stripped = data.lstrip()
            if not stripped:
                continue
            if b"\x00" in stripped[:4096]:
                raise InputError(f"{source}: not a FASTA/FASTQ file (binary data)")
            first = stripped[:1]
            if first == b">":
                state = KC.new_parse_state(KC.FASTA)
            elif first == b"@":
                state = KC.new_parse_state(KC.FASTQ)
            else:
                raise InputError(f"{source}: not a FASTA/FASTQ file (first character {first!r})")
            data = stripped
        if pending is not None:
            yield _parse(pending, state, carry, k, max_piece, False, source)
        pending = data
    if state is None:
        return                            # empty input
    yield _parse(pending, state, carry, k, max_piece, True, source)


_ERRORS = {KC.ERR_FASTQ_HEADER: "FASTQ header line does not start with '@'",
           KC.ERR_FASTQ_QUAL: "quality string longer than the sequence",
           KC.ERR_TRUNCATED: "truncated FASTQ record at the end of the file"}


def _parse(data, state, carry, k, max_piece, final, source):
    buf = np.frombuffer(data, np.uint8)
    codes, offsets = KC.parse_chunk(buf, state, carry, ASCII_TO_CODE, k, max_piece, final)
    if state[6]:
        raise InputError(f"{source}: record {int(state[7])}: {_ERRORS[int(state[6])]}")
    return codes, offsets


# --------------------------------------------------------------------------------------------------
# phase 1

class _Store:
    """The super k-mer records of the whole input: one growing uint64 array (the arena) of blocks, one
    block per input chunk, each holding its records partition by partition; block_off[b][p] is the
    first word of partition p in block b."""

    def __init__(self, log2_parts, capacity_words):
        self.nparts = 1 << log2_parts
        # pages never written are never resident: an over-estimate costs address space, not memory
        self.arena = np.empty(max(1 << 16, int(capacity_words)), np.uint64)
        self.used = 0                     # words
        self.block_off = []
        self.part_kmers = np.zeros(self.nparts, np.int64)

    def add_block(self, results):
        """Append one block made of phase 1 outputs (records, part_offsets, part_kmers)."""
        sizes = np.zeros(self.nparts, np.int64)
        for recs, part_off, part_kmers in results:
            sizes += np.diff(part_off)
            self.part_kmers += part_kmers
        dest = np.empty(self.nparts + 1, np.int64)
        dest[0] = self.used
        np.cumsum(sizes, out=dest[1:])
        dest[1:] += self.used
        need = int(dest[-1])
        if need > self.arena.shape[0]:
            grown = np.empty(max(need, int(self.arena.shape[0] * 1.5)), np.uint64)
            grown[:self.used] = self.arena[:self.used]
            self.arena = grown
        cursor = np.zeros(self.nparts, np.int64)
        for recs, part_off, _ in results:
            KC.merge_block(self.arena, dest, cursor, recs, part_off)
        self.block_off.append(dest)
        self.used = need

    def offsets(self):
        if not self.block_off:
            return np.zeros((0, self.nparts + 1), np.int64)
        return np.ascontiguousarray(np.vstack(self.block_off))


def _phase1(store, codes, offsets, opt, log2p):
    npieces = offsets.shape[0] - 1
    if npieces <= 0:
        return
    # ranges of pieces holding about equal numbers of bases
    nb = int(offsets[-1])
    cuts = range_bounds(nb, min_len=MAX_PIECE // 2, per_thread=2)
    bounds = np.unique(np.searchsorted(offsets, cuts, side="left").clip(0, npieces))
    bounds[0], bounds[-1] = 0, npieces
    results = {}

    def work(lo, hi):
        results[lo] = KC.partition_super_kmers(codes, offsets, lo, hi, opt.k, opt.m, opt.rule_code, log2p)

    run_ranges(work, bounds)
    store.add_block([results[lo] for lo in sorted(results)])


# --------------------------------------------------------------------------------------------------
# phase 2

def _waves(part_kmers, budget):
    """Consecutive partition ranges of about `budget` k-mers (at least one partition each)."""
    bounds = [0]
    acc = 0
    for p, n in enumerate(part_kmers.tolist()):
        if acc and acc + n > budget:
            bounds.append(p)
            acc = 0
        acc += n
    bounds.append(len(part_kmers))
    return bounds


def _phase2(store, opt, reuse=False):
    """Yield KmerCounts wave by wave, in partition order (reuse: every wave in the same buffers, so a
    wave's arrays are valid until the next one is asked for)."""
    block_off = store.offsets()
    arena = store.arena
    pk = store.part_kmers
    waves = _waves(pk, opt.wave_kmers)
    sums = [int(pk[waves[w]:waves[w + 1]].sum()) for w in range(len(waves) - 1)]
    kmers = counts = None
    if reuse and sums:
        kmers = np.empty(max(sums), np.uint64)
        counts = np.empty(max(sums), np.uint32)
    for w in range(len(waves) - 1):
        p0, p1 = waves[w], waves[w + 1]
        total = sums[w]
        if total == 0:
            continue
        key_off = np.zeros(store.nparts + 1, np.int64)
        key_off[p0 + 1:p1 + 1] = np.cumsum(pk[p0:p1])
        if not reuse:
            kmers = np.empty(total, np.uint64)
            counts = np.empty(total, np.uint32)
        ndist = np.zeros(store.nparts, np.int64)
        # ranges of partitions of about equal k-mer counts, several per thread
        cum = key_off[p0:p1 + 1]
        cuts = range_bounds(total, min_len=1 << 15, per_thread=4)
        bounds = np.unique(np.concatenate([[p0, p1], p0 + np.searchsorted(cum, cuts, side="right") - 1]))
        bounds = bounds[(bounds >= p0) & (bounds <= p1)]
        run_ranges(KC.count_partitions, bounds, arena, block_off, key_off, opt.k, kmers, counts, ndist)
        d = _compact(kmers, counts, key_off, ndist, p0, p1)
        yield KmerCounts(opt.k, kmers[:d], counts[:d])


def _compact(kmers, counts, key_off, ndist, p0, p1):
    d = 0
    for p in range(p0, p1):
        n = int(ndist[p])
        o = int(key_off[p])
        if n and o != d:
            kmers[d:d + n] = kmers[o:o + n]
            counts[d:d + n] = counts[o:o + n]
        d += n
    return d


# --------------------------------------------------------------------------------------------------
# the API

@contextlib.contextmanager
def _threads(n):
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n or os.cpu_count() or 1, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def iter_counts(paths, k, threads=0, options=None, reuse_buffers=False, **kw):
    """The counts of the canonical k-mers of FASTA/FASTQ files (plain or gzip) as a stream of
    KmerCounts, one per phase 2 wave (every k-mer in exactly one). kw: CountOptions fields.
    reuse_buffers: all waves share two arrays (less memory; each item is valid until the next)."""
    opt = (options or CountOptions(k=k, threads=threads, **kw)).check()
    paths = _paths(paths)
    with _threads(opt.threads):
        if opt.partitions:
            log2p = int(opt.partitions).bit_length() - 1
        else:
            est = _estimate_bases(paths)
            log2p = int(min(16, max(6, math.ceil(math.log2(max(1, est) / 16384 + 1)))))
        # about 2 / (w + 1) super k-mers a base (w = k - m + 1), of 1 or 2 words
        store = _Store(log2p, 2 * _estimate_bases(paths) // max(2, (opt.k - opt.m + 2) // 2))
        for path in paths:
            for codes, offsets in iter_pieces(path, opt.k):
                _phase1(store, codes, offsets, opt, log2p)
        yield from _phase2(store, opt, reuse_buffers)


def count_kmers(paths, k, threads=0, options=None, **kw):
    """Canonical k-mer counts of one or more FASTA/FASTQ files (plain or gzip) -> KmerCounts.

    k: 1..31; threads: 0 = all cores; kw: the other CountOptions fields (m, rule, partitions).
    k-mers holding a non-ACGT base are skipped; lowercase counts as uppercase. Order: by partition,
    sorted within each (sort the result for a global order)."""
    parts = list(iter_counts(paths, k, threads, options, **kw))
    if not parts:
        return KmerCounts(int(k), np.empty(0, np.uint64), np.empty(0, np.uint32))
    if len(parts) == 1:
        return KmerCounts(parts[0].k, parts[0].kmers.copy(), parts[0].counts.copy())
    return KmerCounts(parts[0].k, np.concatenate([p.kmers for p in parts]),
                      np.concatenate([p.counts for p in parts]))


def format_counts(counts, threads=0, out=None):
    """KMER<TAB>COUNT lines of a KmerCounts as a uint8 array (formatted by a kernel on threads);
    out: a buffer to format into when it is large enough (a view of it is returned)."""
    n = len(counts)
    if n == 0:
        return np.empty(0, np.uint8)
    with _threads(threads) if threads else contextlib.nullcontext():
        bounds = np.asarray(range_bounds(n, min_len=1 << 14, per_thread=2), np.int64)
        r = bounds.shape[0] - 1
        sizes = np.empty(r, np.int64)
        idx = np.arange(r + 1, dtype=np.int64)
        run_ranges(KC.line_bytes_ranges, idx, bounds, counts.counts, counts.k, sizes)
        starts = np.zeros(r + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        size = int(starts[-1])
        if out is None or out.shape[0] < size:
            out = np.empty(size, np.uint8)
        run_ranges(KC.format_lines_ranges, idx, bounds, counts.kmers, counts.counts, counts.k, starts, out)
    return out[:size]


#: lines formatted at a time by write_counts (two such buffers: one written while the next is formatted)
FORMAT_LINES = 1 << 19


def write_counts(counts, out, threads=0):
    """Write KMER<TAB>COUNT lines to a binary file object. counts: a KmerCounts or an iterable of
    them (iter_counts); FORMAT_LINES lines are formatted at a time into one of two buffers while the
    other is written (the write releases the GIL). Returns the number of lines."""
    if isinstance(counts, KmerCounts):
        counts = [counts]
    lines = 0
    from concurrent.futures import ThreadPoolExecutor
    buffers = [None, None]
    turn = 0
    with ThreadPoolExecutor(1) as pool:
        pending = None
        for part in counts:
            for a in range(0, len(part), FORMAT_LINES):
                piece = KmerCounts(part.k, part.kmers[a:a + FORMAT_LINES], part.counts[a:a + FORMAT_LINES])
                text = format_counts(piece, threads, buffers[turn])
                buffers[turn] = text if text.base is None else text.base     # kept for the next turn
                lines += len(piece)
                if pending is not None:
                    pending.result()
                pending = pool.submit(out.write, memoryview(text))
                turn = 1 - turn
        if pending is not None:
            pending.result()
    return lines


def _histo_params(low, high, increment):
    low, high, increment = int(low), int(high), int(increment)
    if low < 0 or increment < 1 or high < low:
        raise UsageError(f"histogram: need 0 <= low <= high and increment >= 1, got low={low}, "
                         f"high={high}, increment={increment}")
    base = 0 if increment >= low else low - increment
    ceil = high + increment
    nbuckets = (ceil + increment - base) // increment
    return base, ceil, increment, nbuckets


def histogram(counts, low=1, high=10000, increment=1, full=False):
    """The histogram of `jellyfish histo -l low -h high -i increment [-f]`: (labels, values).

    counts: the counts (an array, a KmerCounts, or an iterable of KmerCounts). Bucket i, labelled
    base + i*increment, holds the k-mers whose count c has base + i*increment <= c < base +
    (i+1)*increment, where base = 0 if increment >= low else low - increment; counts below base go to
    the first bucket and counts above high + increment to the last one. Empty buckets are left out
    unless full."""
    base, ceil, inc, nb = _histo_params(low, high, increment)
    if isinstance(counts, KmerCounts):
        counts = [counts.counts]
    elif isinstance(counts, np.ndarray):
        counts = [counts]
    dense = ceil < 1 << 24                # a count table up to ceil + 1; else a tally of the values seen
    spectrum = np.zeros(ceil + 2 if dense else 0, np.int64)
    seen = collections.Counter()
    for c in counts:
        c = c.counts if isinstance(c, KmerCounts) else np.asarray(c)
        if not c.size:
            continue
        c = np.minimum(c, ceil + 1)       # every count above ceil lands in the last bucket
        if dense:
            spectrum += np.bincount(c, minlength=ceil + 2)
        else:
            v, n = np.unique(c, return_counts=True)
            seen.update(dict(zip(v.tolist(), n.tolist())))
    if dense:
        cs = np.flatnonzero(spectrum)
        ns = spectrum[cs]
    else:
        cs = np.array(sorted(seen), np.int64)
        ns = np.array([seen[c] for c in cs.tolist()], np.int64)
    idx = np.where(cs < base, 0, np.where(cs > ceil, nb - 1, (cs - base) // inc))
    if full:
        values = np.zeros(nb, np.int64)
        np.add.at(values, idx, ns)
        return base + inc * np.arange(nb, dtype=np.int64), values
    buckets, inverse = np.unique(idx, return_inverse=True)
    values = np.zeros(buckets.shape[0], np.int64)
    np.add.at(values, inverse, ns)
    return base + inc * buckets.astype(np.int64), values


def format_histogram(labels, values):
    """`jellyfish histo` text: 'LABEL VALUE' lines."""
    return "".join(f"{a} {b}\n" for a, b in zip(labels.tolist(), values.tolist()))


def count_to_file(paths, k, out, histo=False, threads=0, histo_options=None, options=None, **kw):
    """`pymap count`: count, then write KMER<TAB>COUNT lines (or, histo=True, the `jellyfish histo`
    histogram; histo_options: low, high, increment, full) to the binary file object out, wave by
    wave. Returns (distinct k-mers, k-mers)."""
    ho = dict(histo_options or {})
    if histo:
        _histo_params(ho.get("low", 1), ho.get("high", 10000), ho.get("increment", 1))
    stats = [0, 0]

    def tally(stream):
        for part in stream:
            stats[0] += len(part)
            stats[1] += int(part.counts.sum(dtype=np.int64))
            yield part

    stream = tally(iter_counts(paths, k, threads, options, reuse_buffers=True, **kw))
    if histo:
        labels, values = histogram(stream, **ho)
        out.write(format_histogram(labels, values).encode())
    else:
        write_counts(stream, out, threads)
    return stats[0], stats[1]
