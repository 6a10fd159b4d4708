"""Mapping on a Dask cluster: `pymap align --dask local:N` or `--dask tcp://HOST:PORT`.

The client reads the input in chunks of options.batch_size reads (pairs stay together; the chunking
never depends on the number of workers), submits each chunk to the cluster and writes the results
in input order, with a bounded number of chunks in flight. A worker builds its Pipeline once (the
saved index memory-mapped from a path every worker can read) and keeps it for all its chunks; a
task is a pure function of its chunk, so a chunk whose worker is lost is run again elsewhere and
nothing is lost or written twice. Each task runs single-threaded: a worker's threads run chunks
side by side. With --sort each chunk comes back coordinate-sorted (BAM) and the client merges.
"""
import dataclasses
import os
import threading
import time
from collections import deque

import numpy as np

from pymap.errors import InputError, UsageError

#: chunks in flight per worker thread: enough to keep every worker busy while the client writes
IN_FLIGHT_PER_THREAD = 2
#: pipelines built in this (worker) process, one per (run, thread)
_PIPELINES = {}


def connect(spec):
    """(distributed.Client, what to close at the end: [client, cluster], [client] or []) for
    "local:N", "tcp://HOST:PORT" (or any scheduler address) or an existing distributed.Client."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs Dask: pip install 'pymap[dask]'") from None
    if isinstance(spec, Client):
        return spec, []
    if not isinstance(spec, str) or not spec:
        raise UsageError(f"--dask must be local:N or a scheduler address, got {spec!r}")
    if spec.startswith("local:") or spec == "local":
        n = spec.partition(":")[2] or str(os.cpu_count() or 1)
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"--dask local:N needs a number of workers >= 1, got {spec!r}")
        import dask
        # a private cluster: no GPU polling by Dask's system monitor (on a GPU machine it costs
        # seconds of the scheduler's time per run), the dashboard on any free port
        with dask.config.set({"distributed.diagnostics.nvml": False}):
            cluster = LocalCluster(n_workers=int(n), threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        client = Client(cluster)
        return client, [client, cluster]
    if "://" not in spec:
        raise UsageError(f"--dask must be local:N or a scheduler address such as tcp://host:8786, got {spec!r}")
    try:
        client = Client(spec, timeout="30s")
        return client, [client]
    except OSError as exc:
        raise InputError(f"--dask {spec}: cannot reach the scheduler ({exc})") from None


def _worker_pipeline(key, ref_path, options, index_path, paired):
    """This worker thread's Pipeline of the run `key`, built on first use."""
    from pymap import api
    slot = (key, threading.get_ident())
    pipe = _PIPELINES.get(slot)
    if pipe is None:
        if not os.path.exists(index_path):
            raise InputError(f"{index_path}: index not readable on worker {os.uname().nodename} "
                             f"(the index must be on a path every worker can read)")
        pipe = api.make_pipeline(ref_path, options, index_path, paired=paired)
        _PIPELINES[slot] = pipe
    return pipe


def _map_chunk(run, chunk, model, header_text):
    """One chunk on a worker: (SAM text, or sorted BAM when header_text is given; RunStats; the
    filter allowances measured; notes)."""
    from pymap.pipeline import RunStats
    pipe = _worker_pipeline(*run)
    pipe.stats = RunStats()
    if model is not None:
        text = pipe.map_pairs(chunk[0], chunk[1], model)
    else:
        text = pipe.map_batch(chunk)
    if header_text is not None:
        from pymap.sam import sort_chunk
        text = sort_chunk(header_text.encode() + text)
    pipe.slack.save()
    # a NumPy array travels without the copies Dask makes of a bytes object (3 x faster here)
    text = np.frombuffer(text, np.uint8)
    return text, pipe.stats, sorted(set(pipe.slack.table.values())), pipe.seeder.run_notes() + pipe.slack.notes()


def _learn_model(run, pairs):
    """The insert-size model from the first pairs, computed on a worker (as LocalRun does)."""
    from pymap import api
    pipe = _worker_pipeline(*run)
    model, _ = api.insert_model(pipe, iter(pairs), pipe.opt)
    return model


def merge_stats(total, part):
    for f in dataclasses.fields(total):
        a, b = getattr(total, f.name), getattr(part, f.name)
        if isinstance(a, int):
            setattr(total, f.name, a + b)
        elif isinstance(a, dict):
            for k, v in b.items():
                a[k] = a.get(k, 0) + v


class DaskRun:
    """The Dask counterpart of pymap.api.LocalRun (same interface)."""

    def __init__(self, spec, ref_path, options, index_path, paired):
        from pymap import api, plugins
        from pymap.pipeline import RunStats
        from pymap.reference import load_reference
        t0 = time.perf_counter()
        self.client, self.owned = connect(spec)
        self.t_ready = time.perf_counter() - t0
        self.t0, self.t_first, self.chunks = t0, None, 0
        try:
            self.options = dataclasses.replace(options, dask=None, threads=1, progress=False)
            self.reference = load_reference(ref_path)
            self.options.seeder = self.options.seeder or api.default_seeder(int(self.reference.codes.shape[0]))
            # the client makes sure a saved index exists; workers only load it
            seeder = plugins.create("seeder", self.options.seeder, **options.seeder_opts)
            path = os.path.abspath(index_path or seeder.index_path(ref_path))
            api.open_index(seeder, self.reference, ref_path, index_path, verify=False)
            if not os.path.exists(path):
                raise InputError(f"{path}: the index could not be saved, and Dask workers need it on disk")
            self.run = (f"{os.getpid()}-{id(self)}", os.path.abspath(ref_path), self.options, path, paired)
            self.paired = paired
            self.stats = RunStats()
            self.model = None
            self.slack = set()
            self._notes = []
            threads = self.threads = sum(self.client.nthreads().values()) or 1
            self.in_flight = IN_FLIGHT_PER_THREAD * threads
        except BaseException:
            self.close()
            raise

    def writer(self, out, header, ref_path):
        from pymap.sam import SamWriter, SortedPartsWriter
        threads = max(1, min(4, os.cpu_count() or 1))      # htslib's threads on the client
        max_len = int(self.reference.lengths.max())
        if self.options.sort:
            return SortedPartsWriter(out, header, ref_path=ref_path, threads=threads, level=self.options.level,
                                     max_contig_len=max_len)
        return SamWriter(out, header, ref_path=ref_path, threads=threads, level=self.options.level)

    def _chunks(self, reads_path, mates_path):
        if not self.paired:
            from pymap.reads import read_batches
            yield from read_batches(reads_path, self.options.batch_size)
            return
        from pymap import insert
        from pymap.mates import read_mate_batches
        batches = read_mate_batches(reads_path, mates_path, self.options.batch_size)
        if self.options.insert_size is not None:
            self.model = self.options.insert_size
            yield from batches
            return
        held, seen = [], 0
        for pair in batches:
            held.append(pair)
            seen += len(pair[0])
            if seen >= insert.MODEL_PAIRS:
                break
        self.model = self.client.submit(_learn_model, self.run, held, pure=False).result()
        yield from held
        yield from batches

    def sam_batches(self, reads_path, mates_path, header):
        """Results in input order: SAM text, or sorted BAM parts under options.sort."""
        from distributed import wait
        header_text = str(header) if self.options.sort else None
        pending = deque()
        for chunk in self._chunks(reads_path, mates_path):
            pending.append(self.client.submit(_map_chunk, self.run, chunk, self.model, header_text, pure=False))
            while len(pending) >= self.in_flight:
                yield self._collect(pending.popleft())
        wait(list(pending))
        while pending:
            yield self._collect(pending.popleft())
        self.stats.filter_slack = (None if not self.slack else str(min(self.slack)) if len(self.slack) == 1
                                   else f"{min(self.slack)}..{max(self.slack)}")

    def _collect(self, future):
        text, stats, slack, notes = future.result()
        future.release()
        self.chunks += 1
        if self.t_first is None:
            self.t_first = time.perf_counter() - self.t0
        merge_stats(self.stats, stats)
        self.slack.update(slack)
        self._notes.extend(n for n in notes if n not in self._notes)
        return text

    def filter_counts(self):
        return None

    def notes(self):
        timing = (f"dask: {self.threads} worker threads, cluster ready after {self.t_ready:.2f} s, first chunk "
                  f"back after {self.t_first or 0:.2f} s, {self.chunks} chunks in "
                  f"{time.perf_counter() - self.t0:.2f} s")
        return self._notes + [timing]

    def close(self):
        for thing in self.owned:
            thing.close()
        self.owned = []
