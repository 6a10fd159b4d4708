"""Mapping on a Dask cluster: `pymap align --dask local:N` or `--dask tcp://HOST:PORT`.

The input is cut in chunks of options.batch_size reads (pairs stay together; the chunking never
depends on the number of workers), one task a chunk; the client writes the results in input order,
with a bounded number of chunks in flight. A worker builds its Pipeline once (the saved index
memory-mapped from a path every worker can read) and keeps it for all its chunks; a task is a pure
function of its chunk, so a chunk whose worker is lost is run again elsewhere and nothing is lost
or written twice. Each task runs single-threaded: a worker's threads run chunks side by side, on one
Pipeline where its stages allow batches side by side (on a GPU: one index copy a worker), else on
one each.

What travels: where every worker sees the client's files (a local cluster, a shared file system),
a chunk of plain FASTQ files is sent as byte ranges that the worker reads and parses itself, and
its records come back as a part file in a scratch directory beside the output, which the client
copies to the output in order. Otherwise (gzip or FASTA reads, stdin, workers on other file
systems) the client parses the chunk and sends the arrays, and the records come back in the result.
With --sort each chunk comes back coordinate-sorted (BAM) and the client merges.
"""
import dataclasses
import logging
import os
import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from pymap import chunks
from pymap.errors import InputError, UsageError
from pymap.workers import DASK_PRELOAD, is_local, local_workers

#: chunks in flight per worker thread: enough to keep every worker busy while the client waits for
#: the oldest chunk (workers start, and chunks end, at different times); results wait on the workers
#: or in part files, not in the client
IN_FLIGHT_PER_THREAD = 4
#: pipelines built in this (worker) process: by (run, None) the first one (pipeline, ready time, the
#: thread that built it), by (run, thread) those of the other threads where it is not shared
_PIPELINES = {}
#: Dask settings of the private cluster of `--dask local:N` (docs/dask.md gives them for other clusters):
#: no GPU polling by the system monitor (on a GPU machine it costs seconds of the scheduler's time a
#: run); no statistical profiler sampling the worker threads every 10 ms; workers keep glibc's dynamic
#: malloc thresholds (Dask's default MALLOC_TRIM_THRESHOLD_ makes every large NumPy array a fresh
#: mmap: about 2.5 s more system time per million reads on two workers)
LOCAL_CLUSTER_CONFIG = {
    "distributed.diagnostics.nvml": False,
    "distributed.worker.profile.enabled": False,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
}


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
    if is_local(spec):
        n = local_workers(spec)
        import dask
        with dask.config.set({**LOCAL_CLUSTER_CONFIG, **_fork_workers()}):
            # silence_logs: a chunk's failure reaches the client, which says it in one line; the
            # workers' own log of it (the task, its traceback) would repeat it on the same terminal
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, silence_logs=logging.CRITICAL,
                                   dashboard_address=":0", preload=["pymap.distributed"])
        client = Client(cluster)
        return client, [client, cluster]
    spec = scheduler_address(spec)
    try:
        client = Client(spec, timeout="30s")
        return client, [client]
    except OSError as exc:
        raise InputError(f"--dask {spec}: cannot reach the scheduler ({exc})") from None


def scheduler_address(spec):
    """A scheduler address as Dask takes it: SCHEME://..., or HOST:PORT (tcp)."""
    if "://" in spec:
        return spec
    if not re.fullmatch(r"[\w.\-]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+", spec):
        raise UsageError(f"--dask must be local:N or a scheduler address such as tcp://host:8786, got {spec!r}")
    return f"tcp://{spec}"


def _fork_workers():
    """Dask settings that fork local workers from one server process that has imported the mapper
    (multiprocessing's forkserver, where the platform has one) rather than start each anew to import
    it (about 1.3 s of CPU a worker); {} where there is none."""
    import multiprocessing
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return {}
    import dask
    from distributed.utils import get_mp_context
    method = {"distributed.worker.multiprocessing-method": "forkserver"}
    with dask.config.set(method):
        ctx = get_mp_context()          # Dask's preload (its own packages) is set once, here
    # ours instead; no effect once this process's server runs (the command line's
    # workers.start_dask_server, an earlier local cluster)
    ctx.set_forkserver_preload(DASK_PRELOAD)
    return method


def dask_setup(worker):
    """Dask preload of local workers: import the mapper while the cluster starts."""
    import pymap.api  # noqa: F401


def _worker_pipeline(key, ref_path, options, index_path, paired):
    """(the Pipeline of the run `key` for this worker thread, built on first use; the time.time() it
    was ready). The process's first one is built alone, by the thread that asks first: where its
    stages allow batches side by side (Pipeline.concurrent, as on a GPU) every thread of the worker
    shares it, as the batches of one process do (one index copy on the GPU, not one a thread);
    otherwise it stays that thread's and each other thread builds its own."""
    me = threading.get_ident()
    with _FIRST_BUILD:
        first = _PIPELINES.get((key, None))
        if first is None:
            first = _PIPELINES[(key, None)] = (*_build_pipeline(ref_path, options, index_path, paired), me)
    pipe, ready, owner = first
    if pipe.concurrent or owner == me:
        return pipe, ready
    if (key, me) not in _PIPELINES:
        _PIPELINES[(key, me)] = _build_pipeline(ref_path, options, index_path, paired)
    return _PIPELINES[(key, me)]


#: the first pipeline of a run in a worker process is built by one thread at a time
_FIRST_BUILD = threading.Lock()


def _build_pipeline(ref_path, options, index_path, paired):
    from pymap import api
    if not os.path.exists(index_path):
        raise InputError(f"{index_path}: index not readable on worker {os.uname().nodename} "
                         f"(the index must be on a path every worker can read)")
    return api.make_pipeline(ref_path, options, index_path, paired=paired), time.time()


#: a worker process's first chunk that may run on a GPU maps alone, its pipeline's construction
#: included: Numba's CUDA driver makes its device objects, contexts and kernel modules at first use,
#: not safely from several threads at once (H200 host, workers of 8 threads starting together: "key
#: already in dictionary" from Numba's driver, a segmentation fault)
_GPU_START = threading.Lock()
_GPU_STARTED = threading.Event()


def _map_chunk(run, chunk, model, header_text, part):
    """One chunk on a worker: (records: SAM text, or sorted BAM when header_text is given, written
    to the file `part` and its name, or with part None the records; RunStats; the filter allowances
    measured; notes; (this worker thread, when its pipeline was ready, when the task started and
    ended: time.time()))."""
    _, _, options, _, _ = run                 # (key, ref_path, options, index_path, paired)
    if options.device != "cpu" and not _GPU_STARTED.is_set():
        with _GPU_START:
            if not _GPU_STARTED.is_set():
                try:
                    return _map_chunk_here(run, chunk, model, header_text, part)
                finally:
                    _GPU_STARTED.set()
    return _map_chunk_here(run, chunk, model, header_text, part)


def _map_chunk_here(run, chunk, model, header_text, part):
    pipe, ready = _worker_pipeline(*run)
    start = time.time()
    result, stats, slack, notes, used = chunks.map_chunk(pipe, chunk, model, header_text, part)
    times = (f"{os.getpid()}.{threading.get_ident()}", ready, start, time.time(), used)
    return result, stats, slack, notes + _slow_settings_notes(), times


def _slow_settings_notes():
    """A note when this worker runs with Dask settings that cost mapping time (docs/dask.md)."""
    import dask
    found = []
    if os.environ.get("MALLOC_TRIM_THRESHOLD_") is not None:
        found.append(f"MALLOC_TRIM_THRESHOLD_={os.environ['MALLOC_TRIM_THRESHOLD_']}")
    if dask.config.get("distributed.worker.profile.enabled", default=False):
        found.append("Dask's statistical profiler on")
    if not found:
        return []
    return [f"Dask workers run with {' and '.join(found)}, which cost mapping CPU time; docs/dask.md "
            f"says how to start them without"]


def _learn_model(run, held):
    """The insert-size model from the first pairs, computed on a worker."""
    pipe, _ = _worker_pipeline(*run)
    return chunks.learn_model(pipe, held)


def _sees(files, scratch, token):
    """On a worker: (it reads the client's files, the same size and time; it writes to scratch)."""
    try:
        same = all((os.stat(p).st_size, os.stat(p).st_mtime_ns) == (size, mtime) for p, size, mtime in files)
    except OSError:
        same = False
    try:
        with open(os.path.join(scratch, "probe")) as fh:
            writes = fh.read() == token and os.access(scratch, os.W_OK)
    except OSError:
        writes = False
    return same, writes


class DaskRun(chunks.ChunkedRun):
    """The Dask counterpart of pymap.api.LocalRun (same interface)."""

    def __init__(self, spec, ref_path, options, index_path, paired):
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.chunk_cpu = (0.0, 0.0)             # summed (user, system) CPU seconds of the chunks' threads
        self.owned, self.scratch, self.how, self.workers = [], None, "", {}
        try:
            with ThreadPoolExecutor(1) as pool:
                # the cluster starts (its workers import the mapper) while the reference and index load
                connecting = pool.submit(lambda: (connect(spec), time.perf_counter() - self.t0))
                try:
                    self._load(ref_path, options, index_path, paired, local=is_local(spec))
                finally:
                    if connecting.exception() is None:
                        (self.client, self.owned), self.t_ready = connecting.result()
            connecting.result()
            self.paired = paired
            self.tally = chunks.Tally()
            self.stats = self.tally.stats
            self.model = None
            self.threads = sum(self.client.nthreads().values()) or 1
            self.in_flight = IN_FLIGHT_PER_THREAD * self.threads
        except BaseException:
            self.close()
            raise

    def _load(self, ref_path, options, index_path, paired, local):
        # local workers map on the CPU unless --device gpu says otherwise: with "auto" each of N
        # worker processes would open the machine's GPU for its filter (16 workers on a host with two
        # H200s: 16.5 s for 4,000,000 reads, against 8.7 s with no GPU visible)
        device = "cpu" if local and options.device in (None, "auto") else options.device
        options = dataclasses.replace(options, dask=None, threads=1, progress=False, device=device)
        self.reference, self.options, path = chunks.client_load(ref_path, options, index_path)
        self.run = (f"{os.getpid()}-{id(self)}", os.path.abspath(ref_path), self.options, path, paired)

    def _chunks(self, reads_path, mates_path):
        """(the chunks to send, in input order; whether the workers write the records to the
        scratch directory; how chunks and records travel, in words)."""
        size = self.chunk_size
        in_files = chunks.file_chunks(reads_path, mates_path, size, self.paired and mates_path is None)
        reads_shared, writes = self._workers_see(in_files[1] if in_files else [])
        records = ", records in part files" if writes else ", records in the results"
        if in_files and reads_shared:
            return in_files[0], writes, "chunks as file ranges" + records
        return (chunks.parsed_chunks(reads_path, mates_path, size, self.paired), writes,
                "chunks parsed by the client" + records)

    def _workers_see(self, files):
        """(every worker reads `files` (path, size, mtime) as the client does, every worker writes
        to the scratch directory)."""
        token = os.urandom(8).hex()
        with open(os.path.join(self.scratch, "probe"), "w") as fh:
            fh.write(token)
        seen = [s if isinstance(s, tuple) else (False, False)
                for s in self.client.run(_sees, files, self.scratch, token, on_error="return").values()]
        return bool(seen) and all(s[0] for s in seen), bool(seen) and all(s[1] for s in seen)

    def _model(self, todo):
        """(the insert-size model, or the future of one learned on a worker from the first pairs;
        the chunks again)."""
        if self.options.insert_size is not None:
            return self.options.insert_size, todo
        held, todo = chunks.model_chunks(todo, self.chunk_size)
        return self.client.submit(_learn_model, self.run, held, pure=False), todo

    def sam_batches(self, reads_path, mates_path, header):
        """Results in input order: SAM text, or sorted BAM parts under options.sort; as bytes, or as
        outfile.PartFile where the workers wrote them to the scratch directory."""
        from distributed import Future, wait
        todo, writes, self.how = self._chunks(reads_path, mates_path)
        header_text = str(header) if self.options.sort else None
        model = None
        if self.paired:
            model, todo = self._model(todo)
        pending = deque()
        try:
            for k, chunk in enumerate(todo):
                part = os.path.join(self.scratch, f"{k:09d}") if writes else None
                pending.append(self.client.submit(_map_chunk, self.run, chunk, model, header_text, part,
                                                  pure=False))
                while len(pending) >= self.in_flight:
                    yield self._collect(pending.popleft())
            wait(list(pending))
            while pending:
                yield self._collect(pending.popleft())
        finally:
            if pending:                             # a failed run: its chunks leave the cluster
                self.client.cancel(list(pending))
        self.model = model.result() if isinstance(model, Future) else model
        self.tally.finish()

    def _collect(self, future):
        result, stats, slack, notes, (worker, ready, start, end, cpu) = future.result()
        future.release()
        _, first, last, busy = self.workers.get(worker, (ready, start, end, 0.0))
        self.workers[worker] = (ready, min(first, start), max(last, end), busy + end - start)
        self.chunk_cpu = tuple(a + b for a, b in zip(self.chunk_cpu, cpu))
        return self.take(result, stats, slack, notes)

    def notes(self):
        now = time.perf_counter()
        ready = [w[0] - self.wall0 for w in self.workers.values()] or [0]
        busy = sum(w[3] for w in self.workers.values())
        span = sum(w[2] - w[1] for w in self.workers.values())
        timing = (f"dask: {self.threads} worker threads, cluster ready after {self.t_ready:.2f} s, "
                  f"pipelines ready after {min(ready):.2f}..{max(ready):.2f} s, first chunk back after "
                  f"{self.t_first or 0:.2f} s, {self.chunks_done} chunks in {now - self.t0:.2f} s ({self.how}); "
                  f"a chunk took {busy / max(self.chunks_done, 1):.2f} s on average, workers busy "
                  f"{100 * busy / max(span, 1e-9):.0f} % from their first chunk to their last; a chunk's "
                  f"thread used {self.chunk_cpu[0] / max(self.chunks_done, 1):.3f} s user and "
                  f"{self.chunk_cpu[1] / max(self.chunks_done, 1):.3f} s system CPU")
        return self.tally.notes + [timing]

    def close(self):
        for thing in self.owned:
            thing.close()
        self.owned = []
        self.remove_scratch()
