"""The Python API: everything the CLI does is a function here first.

    >>> from pymap import api
    >>> stats = api.align("examples/lambda.fa", "examples/reads.fq.gz", out="out.sam")
"""
import contextlib
import dataclasses
import json
import os
import sys
import time
import zlib

import numpy as np

from pymap import jitcache, plugins
from pymap.errors import IndexCorrupt, IndexMismatch, IndexNotOnDisk, InputError, UsageError
from pymap.index import REBUILD_HINT
from pymap.kernels.threads import ahead, ordered_map, quick_switching
from pymap.options import AlignOptions
from pymap.pipeline import Pipeline, gpu_stages
from pymap.reads import read_batches
from pymap.reference import from_index, load_reference, note_unusual_names

# as the CLI does: kernels load without SciPy (0.25 s) or Numba's registries (about 0.15 s), for API users too
jitcache.prepare_numba()


def _log(msg):
    print(f"[pymap] {msg}", file=sys.stderr, flush=True)


def make_filter(spec, opts=None):
    """A filter instance from a name or a comma-separated chain of names.

    In a chain an option reaches only the stages that take it: `name.key=value` the named stage,
    `key=value` every stage whose class takes `key` (an error when none does). `device` is
    forwarded to the stages that take it and ignored by the others unless it asks for a GPU."""
    from pymap.filters.chain import FilterChain
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise plugins.PluginError("--filter needs a plugin name")
    per_stage = route_options("filter", names, opts or {})
    stages = [plugins.create("filter", n, **o) for n, o in zip(names, per_stage)]
    return stages[0] if len(stages) == 1 else FilterChain(stages, names)


def route_options(kind, names, opts):
    """Per stage of a chain, the options it takes (see make_filter)."""
    takes = [plugins.option_names(plugins.load_class(kind, n)) for n in names]
    out = [{} for _ in names]
    norm = [n.replace("-", "_") for n in names]
    for key, value in opts.items():
        if "." in key:
            scope, sub = key.split(".", 1)
            scope = scope.replace("-", "_")
            if scope not in norm:
                raise plugins.PluginError(f"option {key!r}: no stage {scope!r} in the chain {','.join(names)}")
            out[norm.index(scope)][sub] = value
            continue
        hits = [i for i, t in enumerate(takes) if t is None or key in t]
        if not hits:
            if key == "device" and value in ("auto", "cpu"):
                continue
            if key == "device":
                raise plugins.PluginError(f"no {kind} of {','.join(names)} runs on a GPU")
            if len(names) == 1:
                takes = ", ".join(sorted(takes[0])) or "no options"
                raise plugins.PluginError(f"{kind} {names[0]!r} has no option {key!r} (it takes: {takes})")
            raise plugins.PluginError(f"{kind} {','.join(names)!r} has no option {key!r} (no stage of the chain "
                                      f"takes it)")
        for i in hits:
            out[i][key] = value
    return out


def set_threads(threads):
    """Numba's threads for the kernels: threads, or all cores for 0 (a negative count: UsageError)."""
    if threads < 0:
        raise UsageError(f"-t/--threads must be >= 1 (0 = all cores), got {threads}")
    import numba
    numba.set_num_threads(max(1, min(threads or os.cpu_count() or 1, numba.config.NUMBA_NUM_THREADS)))


#: genomes longer than this are seeded by the sampled minimizer index by default: the dense
#: neighborhood index takes ~12.6 bytes per base (1.68 GB at 133 Mbp), the minimizer index 1.3-1.5
#: (BENCHMARKS.md "Seeders compared"); up to it the neighborhood seeder keeps the figures measured with it
LARGE_GENOME = 100_000_000


def default_seeder(genome_len):
    """The seeder used when none is named: 'neighborhood' up to LARGE_GENOME bases, else 'minimizer'."""
    return "neighborhood" if genome_len <= LARGE_GENOME else "minimizer"


def open_reference(ref_path, seeder=None, index_path=None):
    """The reference at ref_path, from the index that will serve it when that index carries it
    (index_path, else the named seeder's default index, else the default seeders')."""
    if index_path:
        paths = [index_path]
    else:
        names = [seeder] if seeder else ["neighborhood", "minimizer"]
        # lazily: a seeder's module is imported only when the indexes before it do not serve
        paths = (plugins.create("seeder", name).index_path(ref_path) for name in names)
    return load_reference(ref_path, paths)


def build_index(ref_path, seeder=None, seeder_opts=None, index_path=None):
    """Build and save the index of a reference (seeder None: default_seeder); returns the index path."""
    reference = open_reference(ref_path, seeder, index_path)
    seeder = seeder or default_seeder(int(reference.codes.shape[0]))
    sd = plugins.create("seeder", seeder, **(seeder_opts or {}))
    path = index_file(sd, reference, ref_path, index_path)
    t = time.perf_counter()
    reference.decode_all()
    index = sd.build_index(reference)
    sd.save_index(index, path)
    _log(f"index of {len(reference)} contig(s), {int(reference.lengths.sum())} bp built in "
         f"{time.perf_counter() - t:.1f} s: {path}")
    return path


def open_index(seeder, reference, ref_path, index_path=None, save=True, verify=True):
    """Load the saved index that matches the reference, or build (and save) one.

    An explicit index_path must match; the default path next to the reference (index_file) is
    rebuilt when it belongs to another reference or version. verify=False: header and sizes only
    (a Dask client, whose workers check the arrays)."""
    import inspect
    path = index_file(seeder, reference, ref_path, index_path)
    # verify is pymap's own seeders' keyword; a plugin's load_index may not take it
    quick = {} if verify or "verify" not in inspect.signature(seeder.load_index).parameters else {"verify": False}
    if os.path.exists(path):
        try:
            return seeder.load_index(path, reference, **quick)
        except (IndexMismatch, IndexCorrupt) as exc:
            if index_path:
                raise
            _log(f"{str(exc).replace('; ' + REBUILD_HINT, '')}; rebuilding it")
    elif index_path:
        raise InputError(f"{index_path}: no such index file (build it with `pymap index`)")
    t = time.perf_counter()
    reference.decode_all()
    index = seeder.build_index(reference)
    _log(f"index built in {time.perf_counter() - t:.1f} s")
    if save:
        try:
            seeder.save_index(index, path)
            _log(f"index saved to {path}")
        except OSError as exc:
            _log(f"index not saved ({path}: {exc.strerror}); it will be rebuilt next time")
        else:
            # map with the saved (memory-mapped) index, as every later run does: the same arrays,
            # the same compiled kernels, and the saved file checked once
            return seeder.load_index(path, reference)
    return index


def _own_copy(options):
    """The run's own copy of the caller's options (AlignOptions() if None): validation and the
    pipeline fill in defaults (extender, seeder, batches) that must not stay in the caller's object
    for its next run."""
    return dataclasses.replace(options) if options is not None else AlignOptions()


def index_file(seeder, reference, ref_path, index_path=None):
    """The index file a run uses: index_path when given, else the seeder's default path next to the
    reference, or, where its options change what it builds (--seeder-opt seed_len=13), a path of
    those build parameters (REF.pymap.<crc>.idx): the default file stays that of runs without them."""
    if index_path:
        return index_path
    path = seeder.index_path(ref_path)
    build = getattr(seeder, "build_params", None)
    if build is None:
        return path
    genome_len = int(reference.codes.shape[0])
    params = build(genome_len)
    try:
        default = type(seeder)().build_params(genome_len)
    except TypeError:           # a plugin's seeder that cannot be made without options: its own path
        return path
    if params == default:
        return path
    tag = zlib.crc32(json.dumps(params, sort_keys=True).encode()) & 0xFFFFFFFF
    return f"{path[:-len('.idx')]}.{tag:08x}.idx" if path.endswith(".idx") else f"{path}.{tag:08x}"


def with_device(kind, spec, opts, device):
    """opts plus device=DEVICE when a stage of spec (a name, or a filter chain a,b) has a device
    option and opts do not set one: --device reaches every stage that can run on a GPU."""
    if device is None or "device" in opts:
        return opts
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if any("device" in (plugins.option_names(plugins.load_class(kind, n)) or ()) for n in names):
        return {**opts, "device": device}
    return opts


def make_pipeline(ref_path, options, index_path=None, paired=False, reference=None):
    """The Pipeline of a run (reference: ref_path's already loaded by open_reference, None: load it)."""
    options = _own_copy(options)
    options.validate()
    set_threads(options.threads)
    if options.device == "gpu":
        from pymap.kernels.cuda_support import start_contexts
        start_contexts()        # the driver's start overlaps the loading below (warm_up waits for it)
    if reference is None:
        reference = open_reference(ref_path, options.seeder, index_path)
    options.seeder = options.seeder or default_seeder(int(reference.codes.shape[0]))
    seeder_opts = dict(options.seeder_opts)
    if options.report_all:
        cls = plugins.load_class("seeder", options.seeder)
        seeder_opts = {**getattr(cls, "all_locations_defaults", {}), **seeder_opts}
    seeder = plugins.create("seeder", options.seeder, **with_device("seeder", options.seeder, seeder_opts,
                                                                     options.device))
    filt = make_filter(options.filter, with_device("filter", options.filter, options.filter_opts, options.device))
    extender_opts = with_device("extender", options.extender, options.extender_opts, options.device)
    extender = plugins.create("extender", options.extender, **extender_opts)
    pair_extender = None
    pair_opts = extender_opts
    if paired and "min_score" in (plugins.option_names(type(extender)) or ()):
        # mates of a proper pair are kept down to a lower score than single reads (as bwa mem does)
        pair_opts = {**extender_opts, "min_score": min(extender.min_score, PAIR_MIN_SCORE)}
        pair_extender = plugins.create("extender", options.extender, **pair_opts)
    host_twins = None
    if paired and {"filter", "extend"} & set(gpu_stages(None, filt, extender)):
        # the mate rescue's small calls run on the host: the same routines, without a GPU round trip
        # queued behind the other batches' kernels (Pipeline.rescue_windows)
        def on_host(kind, spec, opts):
            return with_device(kind, spec, {k: v for k, v in opts.items() if k != "device"}, "cpu")
        host_twins = (make_filter(options.filter, on_host("filter", options.filter, options.filter_opts)),
                      plugins.create("extender", options.extender, **on_host("extender", options.extender, pair_opts)))
    index = open_index(seeder, reference, ref_path, index_path)
    if gpu_stages(seeder, filt, extender):
        from pymap.kernels.cuda_support import warm_up
        warm_up()
    if reference.index is None:
        # the index was just built: map with the reference it saved, as every later run does (the
        # same decoding kernels; a large genome's parsed FASTA is freed)
        reference = from_index(ref_path, index_file(seeder, reference, ref_path, index_path)) or reference
    return Pipeline(reference, index, seeder, filt, extender, options, pair_extender=pair_extender,
                    host_twins=host_twins)


#: the lowest score a mate of a proper pair is reported with (single reads: the extender's -T)
PAIR_MIN_SCORE = 20


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


def align(ref_path, reads_path, out=None, options=None, index_path=None, command_line=None, summary=True,
          mates_path=None):
    """Map reads to a reference and write SAM (or BAM/CRAM/BGZF SAM by `out`'s extension; sorted
    and indexed with options.sort). The output file appears only when complete. Returns RunStats.

    Paired reads: mates_path (read 2 of each pair, reads_path holding read 1), or
    options.interleaved (reads_path holds mates in turn). options.dask: map on a Dask cluster
    (pymap.distributed); the records are the same as in one process."""
    from pymap.sam import SamWriter, make_header, output_format
    options = _own_copy(options)
    t0 = time.perf_counter()
    auto, given_batches = options.processes == "auto", options.batches
    if auto:
        from pymap.workers import auto_count
        options.processes = auto_count(options.device, options.threads, [reads_path, mates_path], options.dask,
                                       paired=mates_path is not None or options.interleaved, reference=ref_path)
    options.validate()
    if mates_path is not None and options.interleaved:
        raise UsageError("give either two read files or -p/--interleaved with one")
    SamWriter.check_path(out)
    paired = mates_path is not None or options.interleaved
    if options.dask is not None:
        from pymap.distributed import DaskRun
        run = DaskRun(options.dask, ref_path, options, index_path, paired)
    elif options.processes > 1:
        from pymap.processes import ProcessRun
        try:
            run = ProcessRun(ref_path, options, index_path, paired, auto=auto)
        except IndexNotOnDisk as exc:
            if not auto:
                raise
            # an index that cannot be saved: the run maps in this process, as auto would have chosen
            options = dataclasses.replace(options, processes=1, batches=given_batches).validate()
            run = LocalRun(ref_path, options, index_path, paired, reference=exc.reference)
    else:
        run = LocalRun(ref_path, options, index_path, paired)
    note_unusual_names(run.reference.names, ref_path)
    cl = command_line or f"pymap align {ref_path} {reads_path}" + (f" {mates_path}" if mates_path else "")
    uri = "file://" + os.path.abspath(ref_path) if out and output_format(out) == "cram" else None
    header = make_header(run.reference, cl, options.read_group, sort=options.sort, ref_uri=uri)
    progress = Progress(options.progress)
    try:
        writer = run.writer(out, header, ref_path)
        batches = None
        try:
            # the next batch is read and mapped (or a worker's chunk taken in, and the next chunk's byte
            # range found and sent) while this one is written
            batches = ahead(run.sam_batches(reads_path, mates_path, header))
            for text in batches:
                writer.write(text)
                progress.update(run.stats.reads)
            t = time.perf_counter()
            writer.close()
            run.stats.add_time("write", time.perf_counter() - t)
        except BaseException:
            writer.abort()
            raise
        finally:
            if batches is not None:
                batches.close()             # no batch is mapped any more when the stages close
    finally:
        run.close()
    progress.update(run.stats.reads, final=True)
    st = run.stats
    st.seconds["total"] = time.perf_counter() - t0
    if summary:
        _log(summary_line(st))
        if run.model is not None:
            _log(run.model.describe())
            _log(f"mate rescue: {st.rescue_windows} windows searched, {st.rescue_candidates} positions, "
                 f"{st.rescue_accepted} passed the filter, {st.rescue_extended} extended, "
                 f"{st.rescued_pairs} pairs made proper")
        for note in run.notes():
            _log(f"note: {note}")
    return st


class LocalRun:
    """Maps in this process: every batch through one Pipeline (threads inside the kernels), up to
    options.batches of them side by side when the stages allow it (Pipeline.concurrent)."""

    def __init__(self, ref_path, options, index_path, paired, reference=None):
        """reference: the reference of ref_path already loaded (None: load it)."""
        self.options = options
        self.pipe = make_pipeline(ref_path, options, index_path, paired=paired, reference=reference)
        self.reference = self.pipe.ref
        self.stats = self.pipe.run_stats
        self.model = None

    def writer(self, out, header, ref_path):
        from pymap.sam import SamWriter
        return SamWriter(out, header, ref_path=ref_path, threads=self.options.thread_count, sort=self.options.sort,
                         level=self.options.level, max_contig_len=int(self.reference.lengths.max()))

    def sam_batches(self, reads_path, mates_path, header=None):
        """SAM text of each batch of reads (or pairs), in input order."""
        pipe, opt = self.pipe, self.options
        side_by_side = opt.batches if pipe.concurrent else 1
        # a reference decoded on demand is trimmed by a batch that starts with none in flight (Pipeline.batch)
        pause = pipe.ref.trim_wanted
        on_gpus = pipe.run_stats.on_gpu and side_by_side > 1
        with gpu_switching(pipe, side_by_side):
            if mates_path is not None or opt.interleaved:
                from pymap.mates import read_mate_batches
                batches = ahead(read_mate_batches(reads_path, mates_path, opt.pairs_per_batch))
                hits_of = None
                if on_gpus:     # batch k's hits on the GPU its pairing will use (spread_over_gpus)
                    pinned = spread_over_gpus(lambda b: pipe.pair_hits_of(*b))

                    def hits_of(k, r1, r2):
                        return pinned((k, (r1, r2)))
                self.model, batches = insert_model(pipe, batches, opt, side_by_side, hits_of)

                def mapped(b):
                    return pipe.map_pairs(b[0], b[1], self.model, None if b[2] is None else b[2].result())
            else:
                batches = ahead(read_batches(reads_path, opt.batch_size))
                mapped = pipe.map_batch
            if on_gpus:
                mapped, batches = spread_over_gpus(mapped), enumerate(batches)
            yield from ordered_map(mapped, batches, side_by_side, pause)
        self.stats.filter_slack = pipe.slack.summary()

    def notes(self):
        return self.pipe.seeder.run_notes() + self.pipe.slack.notes()

    def close(self):
        self.pipe.close()


#: Python's thread switch interval while batches side by side use a GPU (threads.quick_switching): 1 ms
#: against the default 5 ms, 2,000,000 reads on an H200 host in 0.87-0.96x the time (fourteenth session);
#: on 4,000,000 reads later, 0.2-5 ms all alike (sixteenth; BENCHMARKS.md). On the CPU path (2 cores)
#: 1-2 % slower, so there it stays
GPU_SWITCH_INTERVAL = 0.001


def gpu_switching(pipe, side_by_side):
    """The context batches side by side are mapped in: Python's thread switch interval at
    GPU_SWITCH_INTERVAL where they share a GPU, unchanged otherwise."""
    if pipe.run_stats.on_gpu and side_by_side > 1:
        return quick_switching(GPU_SWITCH_INTERVAL)
    return contextlib.nullcontext()


def spread_over_gpus(map_one):
    """map_one for numbered batches (k, batch): batch k runs on GPU k mod the number of GPUs, so that
    batches side by side are spread over the GPUs, one GPU each (cuda_support.batch_on_gpu)."""
    from pymap.kernels.cuda_support import batch_on_gpu

    def mapped(numbered):
        with batch_on_gpu(numbered[0]):
            return map_one(numbered[1])
    return mapped


def insert_model(pipe, batches, options, side_by_side=1, hits_of=None):
    """(InsertModel, the batches again as (r1, r2, hits: None or a Future of the pairs' Hits)):
    options.insert_size when given, else learned from the first MODEL_PAIRS pairs whatever the batch
    size. Only those pairs are needed before the model exists: the rest of a larger batch (on a GPU,
    100,000 pairs) goes on as a batch of its own. Up to side_by_side batches' hits are started at once
    (they need no model), the next batches' beside the model's while those are not done, and only the
    model's are waited for here: the others go on as futures, each batch's pairing and SAM text
    starting when its hits are ready. hits_of(k, r1, r2): the hits of the k-th batch (default:
    pipe.pair_hits_of)."""
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    from pymap import insert
    from pymap.reads import batch_slice
    rest = ((r1, r2, None) for r1, r2 in batches)
    if options.insert_size is not None:
        return options.insert_size, rest
    if hits_of is None:
        def hits_of(k, r1, r2):
            return pipe.pair_hits_of(r1, r2)
    held, seen, parts = [], 0, 0
    pool = ThreadPoolExecutor(max(1, side_by_side))
    try:
        # none read ahead once the model's hits are done: with many side by side (a GPU's 12), reading
        # them all first held every batch's pairing back until the reader had parsed them
        while seen < insert.MODEL_PAIRS or (len(held) < side_by_side
                                            and not all(h.done() for _, _, h in held[:parts])):
            item = next(rest, None)
            if item is None:
                break
            r1, r2, _ = item
            need = insert.MODEL_PAIRS - seen
            if 0 < need < len(r1):
                rest = itertools.chain([(batch_slice(r1, need, len(r1)), batch_slice(r2, need, len(r2)), None)],
                                       rest)
                r1, r2 = batch_slice(r1, 0, need), batch_slice(r2, 0, need)
            held.append((r1, r2, pool.submit(hits_of, len(held), r1, r2)))
            if need > 0:
                parts += 1
                seen += len(r1)
    finally:
        pool.shutdown(wait=False)       # its threads end with the hits they compute
    inserts = [pipe.pair_inserts(h.result(), len(r1)) for r1, r2, h in held[:parts]]
    return insert.learn(np.concatenate(inserts) if inserts else []), itertools.chain(held, rest)


def summary_line(st):
    unm = ", ".join(f"{k} {v}" for k, v in st.unmapped.items() if v)
    parts = [f"{st.reads} reads", f"{st.mapped} mapped", f"{st.reads - st.mapped} unmapped" + (f" ({unm})" if unm else ""),
             f"{st.secondary} secondary", f"{st.supplementary} supplementary"
             + (f", {st.proper_pairs} proper pairs" if st.proper_pairs else ""), f"{st.candidates} candidates",
             f"{st.accepted} passed the filter" + (f" (run at e+{st.filter_slack})" if st.filter_slack else ""),
             f"{st.aligned} aligned" + (f" ({st.rescued} rejected candidates of weak reads extended)"
                                        if st.rescued else "")]
    if st.filter_stages:
        parts.append("filter accepts " + ", ".join(f"{n} {a}" for n, a in st.filter_stages.items()))
    stages = ", ".join(f"{k} {v:.2f}" for k, v in st.seconds.items() if k != "total")
    parts.append(f"{st.seconds.get('total', 0):.2f} s" + (f" ({stages})" if stages else ""))
    if st.on_gpu:
        parts.append("on gpu: " + ", ".join(st.on_gpu))
    return "; ".join(parts)
