"""The input mapped in chunks by workers that build their own Pipeline: what a Dask cluster
(pymap.distributed) and worker processes on this machine (pymap.processes) share.

A chunk is options.batch_size reads (pairs stay together); the chunking never depends on the number
of workers, and a chunk's records are a pure function of it, so the output is the same whoever maps
it. The client loads only the reference and makes sure the index is saved; workers load the saved
index. Where workers see the client's files, a chunk of plain FASTQ files is sent as byte ranges that
the worker reads and parses itself (FileChunk), and its records come back as a part file in a
scratch directory beside the output, which the writer copies to the output in order (worker
processes of this machine write a plain SAM output themselves: pymap.processes). Otherwise
(gzip or FASTA reads, stdin) the client parses the chunk and sends the arrays.
"""
import contextlib
import dataclasses
import itertools
import os
import threading
import time

import numpy as np

from pymap.errors import IndexNotOnDisk


@dataclasses.dataclass(frozen=True)
class FileChunk:
    """Reads (pairs) first.. of plain FASTQ files, read by the worker: per file (path, name in
    errors, start, end, final) from reads.fastq_spans; R1 and R2, or one file of interleaved mates."""
    first: int
    spans: tuple
    interleaved: bool = False

    def load(self):
        """A ReadBatch, or (r1, r2) for pairs."""
        from pymap import mates
        from pymap.reads import read_span
        first = 2 * self.first if self.interleaved else self.first
        batches = [read_span(path, a, b, final, first, name) for path, name, a, b, final in self.spans]
        if self.interleaved:
            return mates.interleaved_mates(batches[0], self.first, self.spans[0][1])
        if len(batches) == 2:
            return mates.mates_of(*batches, self.first, self.spans[0][1], self.spans[1][1])
        return batches[0]


def load(chunk):
    """The reads of a chunk: a FileChunk read here, or the parsed reads sent."""
    return chunk.load() if isinstance(chunk, FileChunk) else chunk


def client_load(ref_path, options, index_path):
    """The client's share of loading: (reference, the options with the seeder named, the absolute
    path of the saved index the workers load; built and saved here when missing)."""
    from pymap import api, plugins
    reference = api.open_reference(ref_path, options.seeder, index_path)
    options = dataclasses.replace(options)
    options.seeder = options.seeder or api.default_seeder(int(reference.codes.shape[0]))
    seeder = plugins.create("seeder", options.seeder, **options.seeder_opts)
    path = os.path.abspath(api.index_file(seeder, reference, ref_path, index_path))
    if not os.path.exists(path) and not os.access(os.path.dirname(path), os.W_OK):
        # said before the index is built (minutes for a large genome) rather than after
        # an auto run then maps here with the reference, without loading it again
        raise IndexNotOnDisk(f"{path}: the workers need the index on disk, and it cannot be saved there "
                             f"(pymap index -o PATH, then --index PATH)", reference=reference)
    api.open_index(seeder, reference, ref_path, index_path, verify=False)
    if not os.path.exists(path):
        raise IndexNotOnDisk(f"{path}: the index could not be saved, and the workers need it on disk",
                             reference=reference)
    return reference, options, path


def file_chunks(reads_path, mates_path, size, interleaved):
    """(chunks of `size` reads or pairs as FileChunks, in input order; the files as (absolute path,
    size, mtime_ns), for workers to check that they see them), or None unless every input is a plain
    FASTQ file."""
    from pymap.reads import fastq_spans
    names = [str(p) for p in (reads_path, mates_path) if p is not None]
    spans = [fastq_spans(p, 2 * size if interleaved else size) for p in names]
    if any(s is None for s in spans):
        return None
    files = [(os.path.abspath(p), os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in names]
    empty = (0, 0, True)                    # a file that has ended: no reads (R1 and R2 differ)
    chunks = (FileChunk(k * size, tuple((f[0], n, *s) for f, n, s in zip(files, names, part)), interleaved)
              for k, part in enumerate(itertools.zip_longest(*spans, fillvalue=empty)))
    return chunks, files


def parsed_chunks(reads_path, mates_path, size, paired):
    """Chunks of `size` reads (ReadBatch) or pairs ((r1, r2)) parsed here, in input order."""
    if not paired:
        from pymap.reads import read_batches
        return read_batches(reads_path, size)
    from pymap.mates import read_mate_batches
    return read_mate_batches(reads_path, mates_path, size)


def chunk_reads(chunk, size):
    """Reads (pairs) in a chunk: `size` for a FileChunk (all but the last are full)."""
    return size if isinstance(chunk, FileChunk) else len(chunk[0]) if isinstance(chunk, tuple) else len(chunk)


def model_chunks(chunks, size):
    """(the first chunks, enough pairs to learn the insert-size model from; the chunks again)."""
    from pymap import insert
    held, seen = [], 0
    for chunk in chunks:
        held.append(chunk)
        seen += chunk_reads(chunk, size)
        if seen >= insert.MODEL_PAIRS:
            break
    return held, itertools.chain(held, chunks)


class PendingModel:
    """The insert-size model a worker's chunks are paired with once the run has learned it (a worker
    process learns it from the first chunks while the others map their chunks' hits, which need
    none; processes.ProcessRun sends it to every worker)."""

    def __init__(self):
        self._ready = threading.Event()
        self._model = None

    def set(self, model):
        self._model = model
        self._ready.set()

    def cancel(self):
        """The run ends without a model: whoever waits for it gets an error."""
        self._ready.set()

    def wait(self):
        self._ready.wait()
        if self._model is None:
            raise RuntimeError("the run ended before its insert-size model was learned")
        return self._model


def learn_model(pipe, chunks):
    """The insert-size model from the first pairs of `chunks` (as LocalRun learns it)."""
    from pymap import api
    with _on_thread_gpu(pipe):
        model, _ = api.insert_model(pipe, (load(c) for c in chunks), pipe.opt)
    return model


_SLOT = threading.local()
_SLOTS = itertools.count()


def _on_thread_gpu(pipe):
    """Where a worker's threads share a GPU pipeline: this thread's batches on one GPU of those
    visible (thread k on GPU k mod their number), its context attached (cuda_support.batch_on_gpu),
    as LocalRun's batches side by side run."""
    if not (pipe.run_stats.on_gpu and pipe.concurrent):
        return contextlib.nullcontext()
    from pymap.kernels.cuda_support import batch_on_gpu
    if not hasattr(_SLOT, "k"):
        _SLOT.k = next(_SLOTS)
    return batch_on_gpu(_SLOT.k)


def map_chunk(pipe, chunk, model, header_text, part):
    """Map one chunk (model: an InsertModel, a PendingModel, or None for single reads): (the records:
    SAM text, or with header_text a coordinate-sorted BAM chunk, as a list of pieces (format_sam);
    written to the file `part` and its name returned, or with part None the pieces, NumPy arrays
    (they travel without the copies Dask makes of a bytes object); the chunk's RunStats; the filter
    allowances used; notes; the (user, system) CPU seconds of this thread)."""
    cpu = thread_cpu()
    reads = load(chunk)
    with _on_thread_gpu(pipe), pipe.batch() as stats:
        if isinstance(model, PendingModel):      # the hits first: they need no model
            hits = pipe.pair_hits_of(*reads)
            text = pipe.map_pairs(*reads, model.wait(), hits)
        else:
            text = pipe.map_pairs(*reads, model) if model is not None else pipe.map_batch(reads)
    if header_text is not None:
        from pymap.sam import sort_chunk
        text = [np.frombuffer(sort_chunk(b"".join([header_text.encode(), *text])), np.uint8)]
    pipe.slack.save()
    if part is not None:
        tmp = f"{part}.{os.getpid()}.{threading.get_ident()}"
        with open(tmp, "wb") as fh:
            fh.writelines(text)
        os.replace(tmp, part)                # a chunk run twice (a lost worker) writes the same part
        result = part
    else:
        result = text
    notes = pipe.seeder.run_notes() + pipe.slack.notes()
    used = tuple(b - a for a, b in zip(cpu, thread_cpu()))
    return result, stats, pipe.slack.used(), notes, used


def as_records(result):
    """A chunk's records as the writer takes them: pieces, or an outfile.PartFile by name."""
    if isinstance(result, str):
        from pymap.outfile import PartFile
        return PartFile(result)
    return result


class Tally:
    """What a run's chunks report besides their records (map_chunk): the run's counters (stats), the
    filter allowances used and the workers' notes, each note once."""

    def __init__(self):
        from pymap.pipeline import RunStats
        self.stats, self.slack, self.notes = RunStats(), set(), []

    def add(self, stats, slack, notes):
        self.stats.add(stats)
        self.slack.update(slack)
        self.notes.extend(n for n in notes if n not in self.notes)

    def finish(self):
        """The run's filter allowance from those its chunks used ("0", "0..1", "e" under --all; None
        for none), as one process reports it (SlackTable.summary)."""
        from pymap.slack import span_text
        self.stats.filter_slack = span_text(self.slack)


class ChunkedRun:
    """The client's side of a run whose chunks workers map (DaskRun, ProcessRun), beside their own:
    the writer, which takes the records the workers leave as part files in a scratch directory
    beside the output, and the chunk size; each chunk's result taken in (take). Subclasses set
    options, paired, reference, tally and t0 (time.perf_counter() at the start)."""
    scratch = None
    t_first = None              # seconds from t0 to the first chunk's result
    chunks_done = 0

    def take(self, records, stats, slack, notes):
        """A chunk's records as the writer takes them (as_records), its counters, allowances and notes
        tallied."""
        if self.t_first is None:
            self.t_first = time.perf_counter() - self.t0
        self.chunks_done += 1
        self.tally.add(stats, slack, notes)
        return as_records(records)

    def writer(self, out, header, ref_path):
        """SamWriter, or with options.sort SortedPartsWriter merging the sorted chunks."""
        from pymap import outfile
        from pymap.sam import SamWriter, SortedPartsWriter
        self.scratch = outfile.temporary_dir(outfile.scratch_base(out))
        threads = max(1, min(4, os.cpu_count() or 1))      # htslib's threads on the client
        opt = self.options
        if opt.sort:
            return SortedPartsWriter(out, header, ref_path=ref_path, threads=threads, level=opt.level,
                                     max_contig_len=int(self.reference.lengths.max()))
        return SamWriter(out, header, ref_path=ref_path, threads=threads, level=opt.level)

    @property
    def chunk_size(self):
        """Reads in a chunk, or pairs when paired (as a batch of LocalRun)."""
        return self.options.pairs_per_batch if self.paired else self.options.batch_size

    def remove_scratch(self):
        import shutil
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def thread_cpu():
    """(user, system) CPU seconds of this thread so far; (its CPU seconds, 0) where the platform keeps
    no per-thread split of them. A chunk's wall time beside its CPU time tells a slower CPU (contention
    for caches and memory: both grow) from a thread left waiting (only the wall time grows)."""
    import resource
    if hasattr(resource, "RUSAGE_THREAD"):
        use = resource.getrusage(resource.RUSAGE_THREAD)
        return use.ru_utime, use.ru_stime
    return time.thread_time(), 0.0
