"""Paired-end input: two mate files (R1, R2) or one interleaved file, as pairs of ReadBatch.

`read_mate_batches` builds on `pymap.reads.RecordRuns` (FASTQ or FASTA, plain or gzip, "-" for
stdin): each file is cut into runs of batch_size records, and a run of R1 and the run of R2 beside it
are parsed and paired on one of reads.PARSE_THREADS threads. Mate names are checked per batch by a
kernel over the concatenated name bytes; a trailing "/1" on read 1 together with "/2" on read 2 is
removed from both (the rest must agree), otherwise the two names must be identical. Errors are
raised lazily, when the batch holding the offending pair is assembled: every earlier pair batch has
been yielded by then.
"""
import numpy as np

from pymap import reads
from pymap.batch import ReadBatch
from pymap.errors import InputError
from pymap.kernels.text import gather_ranges, mate_names
from pymap.kernels.threads import ordered_map
from pymap.reads import RecordRuns, batch_slice, errors_as_items, raise_if_error

_SLASH, _ONE, _TWO = ord("/"), ord("1"), ord("2")


def read_mate_batches(path1, path2=None, batch_size=20000):
    """Yield (r1, r2) ReadBatch pairs of up to batch_size pairs each; mate i of r1 pairs with mate i
    of r2, and both carry first_index = the pair number of their first pair.

    path2 given: R1 and R2 files (path1 or path2 may be "-", stdin); path2 None: one interleaved
    file, records 2k and 2k+1 being the mates of pair k. Names lose a trailing "/1" (read 1) and
    "/2" (read 2) when both have them. InputError on different read counts, names that disagree or
    an odd interleaved record count, raised when that pair is reached.
    """
    batch_size = int(batch_size)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if path2 is None:
        return _interleaved(path1, batch_size)
    if str(path1) == "-" and str(path2) == "-":
        raise InputError("read 1 and read 2 cannot both come from stdin "
                         "(give two files, or one interleaved file)")
    return _two_files(path1, path2, batch_size)


def _label(path):
    return "stdin" if str(path) == "-" else str(path)


def _two_files(path1, path2, size):
    one, two = RecordRuns(path1), RecordRuns(path2)

    def runs():
        done = 0  # pairs cut so far
        while True:
            a, b = one.next(size), two.next(size)
            if a is None and b is None:
                return
            yield a, b, done
            done += size

    def parse(item):
        a, b, done = raise_if_error(item)
        return mates_of(one.parse(a, done), two.parse(b, done), done, path1, path2)

    try:
        for r1, r2 in ordered_map(parse, errors_as_items(runs()), reads.PARSE_THREADS):
            if len(r1) == 0:
                return
            yield r1, r2
    finally:
        one.close()
        two.close()


def mates_of(r1, r2, done, path1, path2):
    """(r1, r2) as the pairs done.. of R1 and R2 files, "/1" "/2" removed; InputError when names
    differ or one file ended (fewer reads on one side)."""
    m1, m2 = len(r1), len(r2)
    n = min(m1, m2)
    if m1 != m2:  # one file has ended: its mates in the other are checked first
        r1, r2 = batch_slice(r1, 0, n), batch_slice(r2, 0, n)
    bad, r1, r2 = _pair_names(r1, r2)
    if bad >= 0:
        raise InputError(f"read {done + bad + 1:,}: names differ: '{r1.name(bad)}' in {_label(path1)}, "
                         f"'{r2.name(bad)}' in {_label(path2)}")
    if m1 != m2:
        short, long_ = (path1, path2) if m1 < m2 else (path2, path1)
        raise InputError(f"{_label(short)} ends after {done + n:,} reads, {_label(long_)} has more")
    r1.first_index = r2.first_index = done
    return r1, r2


def _interleaved(path, size):
    records = RecordRuns(path)

    def parse(item):
        run = raise_if_error(item)
        return interleaved_mates(records.parse(run), run[1] // 2, path)

    runs = iter(lambda: records.next(2 * size), None)
    try:
        for r1, r2 in ordered_map(parse, errors_as_items(runs), reads.PARSE_THREADS):
            if len(r1) == 0:
                return
            yield r1, r2
    finally:
        records.close()


def interleaved_mates(recs, done, path):
    """(r1, r2): records 2k and 2k+1 of an interleaved file as the pairs done..; InputError when
    names differ or the count is odd."""
    m = len(recs)
    n = m // 2
    even = np.arange(0, 2 * n, 2, dtype=np.int64)
    r1, r2 = recs.subset(even), recs.subset(even + 1)
    bad, r1s, r2s = _pair_names(r1, r2)
    if bad >= 0:
        k = 2 * (done + bad)
        raise InputError(f"{_label(path)}: records {k + 1:,} and {k + 2:,} are not mates: names differ "
                         f"('{r1.name(bad)}', '{r2.name(bad)}')")
    if m % 2:
        raise InputError(f"{_label(path)}: odd number of records in an interleaved file: the last one, "
                         f"record {2 * (done + n) + 1:,} '{recs.name(m - 1)}', has no mate")
    r1s.first_index = r2s.first_index = done
    return r1s, r2s


def _pair_names(r1, r2):
    """(index of the first pair whose names disagree or -1, r1, r2 with "/1" "/2" removed)."""
    if len(r1) == 0:
        return -1, r1, r2
    bad, strip = mate_names(r1.names, r1.name_offsets, r2.names, r2.name_offsets, _SLASH, _ONE, _TWO)
    if bad >= 0:
        return int(bad), r1, r2
    if strip.any():
        cut = 2 * strip.astype(np.int64)
        r1 = _renamed(r1, r1.name_offsets[:-1], r1.name_offsets[1:] - cut)
        r2 = _renamed(r2, r2.name_offsets[:-1], r2.name_offsets[1:] - cut)
    return -1, r1, r2


def _renamed(batch, starts, ends):
    names, name_offsets = gather_ranges(batch.names, starts, ends)
    return ReadBatch(codes=batch.codes, offsets=batch.offsets, names=names, name_offsets=name_offsets,
                     quals=batch.quals, first_index=batch.first_index, rc_codes=batch.rc_codes,
                     comments=batch.comments, comment_offsets=batch.comment_offsets)
