"""The Python API: everything the CLI does is a function here first.

    >>> from pymap import api
    >>> stats = api.align("examples/lambda.fa", "examples/reads.fq", out="out.sam")
"""
import os
import sys
import time

import numpy as np

from pymap import plugins
from pymap.errors import IndexCorrupt, IndexMismatch, InputError, UsageError
from pymap.options import AlignOptions
from pymap.pipeline import Pipeline
from pymap.reads import read_batches
from pymap.reference import load_reference


def _log(msg):
    print(f"[pymap] {msg}", file=sys.stderr, flush=True)


def make_filter(spec, opts=None):
    """A filter instance from a name or a comma-separated chain of names."""
    from pymap.filters.chain import FilterChain
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise plugins.PluginError("--filter needs a plugin name")
    opts = opts or {}
    stages = [plugins.create("filter", n, **(opts if len(names) == 1 else _opts_for(n, opts))) for n in names]
    return stages[0] if len(stages) == 1 else FilterChain(stages, names)


def _opts_for(name, opts):
    """In a chain, options may be scoped as name.key=value; unscoped ones go to every stage."""
    out = {}
    for k, v in opts.items():
        if "." in k:
            scope, key = k.split(".", 1)
            if scope.replace("-", "_") == name.replace("-", "_"):
                out[key] = v
        else:
            out[k] = v
    return out


def set_threads(threads):
    import numba
    numba.set_num_threads(max(1, min(threads or os.cpu_count() or 1, numba.config.NUMBA_NUM_THREADS)))


def build_index(ref_path, seeder="neighborhood", seeder_opts=None, index_path=None):
    """Build and save the index of a reference; returns the index path."""
    reference = load_reference(ref_path)
    sd = plugins.create("seeder", seeder, **(seeder_opts or {}))
    path = index_path or sd.index_path(ref_path)
    t = time.perf_counter()
    index = sd.build_index(reference)
    sd.save_index(index, path)
    _log(f"index of {len(reference)} contig(s), {int(reference.lengths.sum())} bp built in "
         f"{time.perf_counter() - t:.1f} s: {path}")
    return path


def open_index(seeder, reference, ref_path, index_path=None, save=True):
    """Load the saved index that matches the reference, or build (and save) one.

    An explicit index_path must match; the default path next to the reference is rebuilt when
    it belongs to another reference or version."""
    path = index_path or seeder.index_path(ref_path)
    if os.path.exists(path):
        try:
            return seeder.load_index(path, reference)
        except (IndexMismatch, IndexCorrupt) as exc:
            if index_path:
                raise
            _log(f"{exc}; rebuilding it")
    elif index_path:
        raise InputError(f"{index_path}: no such index file (build it with `pymap index`)")
    t = time.perf_counter()
    index = seeder.build_index(reference)
    _log(f"index built in {time.perf_counter() - t:.1f} s")
    if save:
        try:
            seeder.save_index(index, path)
            _log(f"index saved to {path}")
        except OSError as exc:
            _log(f"index not saved ({path}: {exc.strerror}); it will be rebuilt next time")
    return index


def make_pipeline(ref_path, options, index_path=None):
    options.validate()
    set_threads(options.threads)
    reference = load_reference(ref_path)
    seeder_opts = dict(options.seeder_opts)
    if options.report_all:
        cls = plugins.load_class("seeder", options.seeder)
        seeder_opts = {**getattr(cls, "all_locations_defaults", {}), **seeder_opts}
    seeder = plugins.create("seeder", options.seeder, **seeder_opts)
    filt = make_filter(options.filter, options.filter_opts)
    extender = plugins.create("extender", options.extender, **options.extender_opts)
    index = open_index(seeder, reference, ref_path, index_path)
    return Pipeline(reference, index, seeder, filt, extender, options)


class Progress:
    """Reads done and reads/s on stderr, only when stderr is a terminal."""

    def __init__(self, enabled):
        self.enabled = enabled and sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.last = 0.0

    def update(self, reads, final=False):
        if not self.enabled:
            return
        now = time.perf_counter()
        if final or now - self.last > 0.5:
            self.last = now
            rate = reads / max(now - self.t0, 1e-9)
            sys.stderr.write(f"\r[pymap] {reads:,} reads, {rate:,.0f} reads/s" + ("\n" if final else ""))
            sys.stderr.flush()


def align(ref_path, reads_path, out=None, options=None, index_path=None, command_line=None, summary=True):
    """Map reads to a reference and write SAM (or BAM when `out` ends in .bam). Returns RunStats."""
    from pymap.sam import SamWriter, make_header
    options = options or AlignOptions()
    t0 = time.perf_counter()
    pipe = make_pipeline(ref_path, options, index_path)
    cl = command_line or f"pymap align {ref_path} {reads_path}"
    writer = SamWriter(out, make_header(pipe.ref, cl, options.read_group))
    progress = Progress(options.progress)
    try:
        for batch in read_batches(reads_path, options.batch_size):
            writer.write(pipe.map_batch(batch))
            progress.update(pipe.stats.reads)
    except BaseException:
        writer.abort()
        raise
    finally:
        pipe.filter.close()
    writer.close()
    progress.update(pipe.stats.reads, final=True)
    st = pipe.stats
    st.seconds["total"] = time.perf_counter() - t0
    if summary:
        _log(summary_line(st, pipe.filter))
        for note in pipe.seeder.run_notes():
            _log(f"note: {note}")
    return st


def summary_line(st, filt=None):
    unm = ", ".join(f"{k} {v}" for k, v in st.unmapped.items() if v)
    parts = [f"{st.reads} reads", f"{st.mapped} mapped", f"{st.reads - st.mapped} unmapped" + (f" ({unm})" if unm else ""),
             f"{st.secondary} secondary", f"{st.candidates} candidates", f"{st.accepted} passed the filter",
             f"{st.aligned} aligned within e"]
    if filt is not None and hasattr(filt, "accepted"):
        parts.append("filter accepts " + ", ".join(f"{n} {a}" for n, a in zip(filt.names, filt.accepted)))
    parts.append(f"{st.seconds.get('total', 0):.2f} s")
    return "; ".join(parts)


# ---- pair files -------------------------------------------------------------------------------

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
    count = 0
    for batch in read_batches(reads_path, options.batch_size):
        batch.with_rc()
        maxe, reason = pipe.read_limits(batch)
        cands, lo, hi, _ = pipe.candidates(batch, maxe, reason)
        lengths = batch.lengths[cands.read]
        for length in np.unique(lengths):
            idx = np.flatnonzero(lengths == length)
            reads = np.empty((idx.size, length), np.uint8)
            refs = np.empty((idx.size, length), np.uint8)
            gather_pairs(batch.codes, batch.rc_codes, batch.offsets, pipe.ref.codes, cands.read[idx],
                         cands.strand[idx], cands.pos[idx], lo[idx], hi[idx], int(length), reads, refs)
            tab = np.full((idx.size, 1), 9, np.uint8)
            nl = np.full((idx.size, 1), 10, np.uint8)
            out.write(np.hstack([reads, tab, refs, nl]).tobytes())
            count += idx.size
    return count
