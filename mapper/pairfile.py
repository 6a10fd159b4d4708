"""Pair files for the filter studies: one `read<TAB>segment` pair per line (the `pymap filter`
input and the `pymap candidates` output). Evaluation I/O, not the mapping path."""
import sys

import numpy as np

from pymap.api import make_filter, make_pipeline, set_threads
from pymap.errors import InputError
from pymap.options import AlignOptions
from pymap.reads import read_batches


def read_pairs(path):
    """A pair file (read TAB segment per line) -> list of (line numbers, reads (n,L), refs (n,L)) per length."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        from pymap.reference import open_maybe_gzip
        data = open_maybe_gzip(path)
    lines = data.replace(b"\r", b"").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    groups = {}
    for no, line in enumerate(lines):  # pair files are evaluation input, not the mapping path
        a, tab, b = line.partition(b"\t")
        b = b.split(b"\t", 1)[0]
        if not tab or len(a) != len(b) or not a:
            raise InputError(f"{path}: line {no + 1}: expected 'read<TAB>segment' of equal, non-zero lengths")
        groups.setdefault(len(a), []).append((no, a, b))
    out = []
    for length, items in sorted(groups.items()):
        nos = np.array([i[0] for i in items], dtype=np.int64)
        reads = np.frombuffer(b"".join(i[1] for i in items), dtype=np.uint8).reshape(-1, length)
        refs = np.frombuffer(b"".join(i[2] for i in items), dtype=np.uint8).reshape(-1, length)
        out.append((nos, reads, refs))
    return out, len(lines)


def filter_pair_file(path, filter_spec, max_edits, filter_opts=None, threads=0):
    """Run a filter (or chain) on a pair file. Returns (accept bool[n], estimate int32[n], filter)."""
    set_threads(threads)
    filt = make_filter(filter_spec, filter_opts)
    groups, n = read_pairs(path)
    accept = np.zeros(n, dtype=np.bool_)
    estimate = np.zeros(n, dtype=np.int32)
    e_of = (lambda L: int(max_edits)) if max_edits >= 1 or max_edits == 0 else (lambda L: int(L * max_edits + 0.5))
    try:
        for nos, reads, refs in groups:
            acc, est = filt.filter_pairs(reads, refs, e_of(reads.shape[1]))
            accept[nos] = acc
            estimate[nos] = est
    finally:
        filt.close()
    return accept, estimate, filt


def candidate_pairs(ref_path, reads_path, out, options=None, index_path=None):
    """Write the seeding stage's (read, segment) pairs of every read in the pair-file format."""
    from pymap.kernels.gather import gather_pairs
    options = options or AlignOptions()
    pipe = make_pipeline(ref_path, options, index_path)
    pipe.filt.close()
    count = 0
    for batch in read_batches(reads_path, pipe.opt.batch_size):
        batch.with_rc()
        maxe, reason = pipe.read_limits(batch)
        cands = pipe.candidates(batch, maxe, reason)
        lengths = cands.lengths
        for length in np.unique(lengths):
            idx = np.flatnonzero(lengths == length)
            reads = np.empty((idx.size, length), np.uint8)
            refs = np.empty((idx.size, length), np.uint8)
            gather_pairs(batch.codes, batch.rc_codes, batch.offsets, pipe.ref.codes, cands.read[idx],
                         cands.strand[idx], cands.pos[idx], cands.lo[idx], cands.hi[idx], int(length), reads, refs)
            tab = np.full((idx.size, 1), 9, np.uint8)
            nl = np.full((idx.size, 1), 10, np.uint8)
            out.write(np.hstack([reads, tab, refs, nl]).tobytes())
            count += idx.size
    return count
