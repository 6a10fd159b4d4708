"""Mapping in worker processes of this machine: `pymap align --processes N`.

N worker processes map the input's chunks (pymap.chunks), each with its own Pipeline (the saved
index loaded; on a GPU, its own copy), its share of the threads and the batches side by side of that
share (--batches, by default as for one process of those threads); chunks go to whichever worker
asks first. This process parses no reads where the input is plain FASTQ (it sends byte ranges). Into
a plain SAM file the workers write their records themselves, each chunk at the offset this process
gives it once the chunks before it are sized, through a shared mapping of the stretch this process
has allocated (by pwrite where its file system cannot allocate); other outputs take the workers'
part files, copied in order. The records are those of one process. With --device gpu, worker k
uses GPU k mod the GPUs visible.

What it buys (BENCHMARKS.md, seventeenth and twenty-ninth sessions): on the CPU, a process a core
instead of one process's threads (16 cores: 2 M reads in 4.2 s against 5.4 s; one process's threads
share Python's lock for the glue between kernels); on two GPUs, a process per GPU rather than one
process driving both (1.2-1.3x one GPU); on one GPU, two processes rather than one (1.2x on an H100
host of 16 cores). Each process holds its own reference and pipeline, so memory grows with N.

By default (processes "auto") a GPU run of a large plain FASTQ input takes worker processes
(pymap.workers.auto_count, which also holds the server the workers are forked from); everything
else maps in one process.
"""
import dataclasses
import functools
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time
import traceback

import numpy as np

from pymap import chunks, outfile
from pymap.errors import WorkerLost
from pymap.workers import context, visible_gpus

#: chunks sent ahead per batch mapped side by side in the workers: a worker asks for the next chunk
#: as soon as one of its threads is free, while this process waits for the oldest
IN_FLIGHT_PER_BATCH = 2
#: seconds the workers get to end once told to (close): STOP_GRACE, or LOST_GRACE where one has ended
#: unasked (killed, crashed). One killed while its thread waited for a task holds the task queue's lock
#: for good: the others' threads can no longer take the None that ends them, and would wait it out.
STOP_GRACE = 10
LOST_GRACE = 1


class _RemoteTraceback(Exception):
    def __str__(self):
        return self.args[0]


def _portable(exc):
    """(exc as it can travel to the client: itself where it pickles, else a RuntimeError of its text;
    the worker's traceback)."""
    text = "".join(traceback.format_exception(exc))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc, text


def _work(run, gpu, tasks, stop, conn, orders):
    """A worker process: build the pipeline, then map tasks (k, "map", "hold" or "model", args) from
    the shared queue on options.batches threads until each thread gets a None, or any task once `stop`
    (a shared byte) is set. A chunk to hold keeps its SAM text here and reports its size; a thread of
    its own writes it into the output file when the client names the offset (orders: ("place", k,
    path, offset, the output's name), then None). A chunk of pairs sent without a model is paired
    with the run's learned model, which comes as the order ("model", model); its hits are mapped
    meanwhile. Messages back on this worker's connection: ("ready", None, the stages on a GPU, time,
    the threads that take tasks), ("done", k, result), ("placed", k, None) and ("failed", k or None,
    exception, its traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # the client stops the workers
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu         # before anything starts CUDA here
    send_lock = threading.Lock()

    def send(message):
        with send_lock:
            conn.send(message)

    ref_path, options, index_path, paired = run
    try:
        from pymap import api
        pipe = api.make_pipeline(ref_path, options, index_path, paired=paired)
    except BaseException as exc:
        send(("failed", None, *_portable(exc)))
        return
    side_by_side = options.batches if pipe.concurrent else 1
    send(("ready", None, pipe.run_stats.on_gpu, time.time(), side_by_side))

    held = {}                                           # chunk -> its SAM text, until placed
    learned = chunks.PendingModel() if paired else None

    def serve():
        while (task := tasks.get()) is not None and not stop.value:
            k, what, args = task
            try:
                if what == "model":
                    result = chunks.learn_model(pipe, *args)
                else:
                    if paired and args[1] is None:
                        args = (args[0], learned, *args[2:])
                    result = chunks.map_chunk(pipe, *args)
                    if what == "hold":
                        held[k] = result[0]
                        result = (sum(len(piece) for piece in result[0]), *result[1:])
                send(("done", k, result))
            except BaseException as exc:
                send(("failed", k, *_portable(exc)))

    def place():
        fd = None
        try:
            while (order := orders.recv()) is not None:
                if order[0] == "model":
                    learned.set(order[1])
                    continue
                _, k, path, offset, allocated, name = order
                try:
                    if fd is None:
                        fd = os.open(path, os.O_RDWR)           # a shared mapping needs it readable
                    _write_at(fd, held.pop(k), offset, allocated)
                    send(("placed", k, None))
                except OSError as exc:
                    send(("failed", k, *_portable(outfile.cannot_write(name, exc))))
                except BaseException as exc:
                    send(("failed", k, *_portable(exc)))
        except EOFError:
            pass
        finally:
            if learned is not None:
                learned.cancel()                # threads still waiting for the model end
            if fd is not None:
                os.close(fd)

    threading.Thread(target=place, daemon=True).start()
    with api.gpu_switching(pipe, side_by_side):
        threads = [threading.Thread(target=serve) for _ in range(side_by_side)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    pipe.close()


def _write_at(fd, pieces, offset, allocated):
    """Write the pieces of text (format_sam) one after the other into the file fd from offset: where
    the client has allocated their stretch (HeldPart), copied through a shared mapping of it, else
    (or on a file system without shared mappings) by pwrite. Writes into one file take its lock one
    at a time, and workers writing 20 M reads' SAM that way waited on each other (BENCHMARKS.md,
    fortieth session), where the pages of a mapping fill side by side."""
    size = sum(len(piece) for piece in pieces)
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    try:
        mapped = mmap.mmap(fd, offset + size - start, offset=start) if allocated and size else None
    except OSError:
        mapped = None
    if mapped is None:
        for piece in pieces:
            view, done = memoryview(piece), 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], offset + done)
            offset += len(view)
        return
    text = np.frombuffer(mapped, np.uint8)              # NumPy's copies leave Python's lock free
    try:
        at = offset - start
        for piece in pieces:
            text[at:at + len(piece)] = piece
            at += len(piece)
    finally:
        del text                                        # the mapping closes only once no view holds it
        mapped.close()


def _ended(proc):
    """How a process ended, in words."""
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}" + (", out of memory?" if code == -9 else "")
        except ValueError:
            pass
    return f"exit code {code}"


def _count(n, one, many=None):
    return f"{n} {one if n == 1 else many or one + 's'}"


class ProcessRun(chunks.ChunkedRun):
    """The worker-process counterpart of pymap.api.LocalRun (same interface)."""

    def __init__(self, ref_path, options, index_path, paired, auto=False):
        """auto: the worker count was chosen by processes "auto" (auto_count), as the summary says."""
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.paired, self.model, self.scratch = paired, None, None
        self.tally = chunks.Tally()
        self.stats = self.tally.stats
        self.workers, self.conns, self.orders, self.ready = [], [], [], {}
        self.open_conns, self.finished, self.stopping = [], False, False
        self.place_path = self.place_name = None
        self.holder, self.placed = {}, 0
        self.serving = 0                # the ready workers' threads that take tasks
        self.lost_lock = threading.Lock()
        self.n = n = options.processes
        self.auto = auto
        self.reference, opts, index_path = chunks.client_load(ref_path, options, index_path)
        per_worker = dataclasses.replace(opts, processes=1, progress=False, threads=opts.process_threads)
        self.options = per_worker
        visible = visible_gpus(opts)
        ctx = context()
        # a lock-free flag: a worker killed while reading an Event would leave its lock held, and
        # the client's set() waiting for it
        self.tasks, self.stop = ctx.SimpleQueue(), ctx.RawValue("b", 0)
        run = (os.path.abspath(ref_path), per_worker, index_path, paired)
        try:
            for k in range(n):
                ours, theirs = ctx.Pipe(duplex=False)
                their_orders, orders = ctx.Pipe(duplex=False)
                gpu = None if visible is None else visible[k % len(visible)]
                proc = ctx.Process(target=_work, args=(run, gpu, self.tasks, self.stop, theirs, their_orders),
                                   daemon=True, name=f"pymap-worker-{k}")
                proc.start()
                theirs.close()
                their_orders.close()
                self.workers.append(proc)
                self.conns.append(ours)
                self.orders.append(orders)
                self.open_conns.append(ours)
        except BaseException:
            self.close()
            raise
        self.gpus = visible

    def writer(self, out, header, ref_path):
        """The run's writer (ChunkedRun.writer); where it writes a plain SAM file, the workers write
        their records into it themselves (outfile.HeldPart) rather than as part files this process
        copies (6.7 s of system time for 20 M reads, a quarter of the run, on two GPUs)."""
        writer = super().writer(out, header, ref_path)
        self.place_path, self.place_name = getattr(writer, "plain_file", None), out
        return writer

    def sam_batches(self, reads_path, mates_path, header):
        """Each chunk's records (outfile.HeldPart, or outfile.PartFile) in input order."""
        size = self.chunk_size
        in_files = chunks.file_chunks(reads_path, mates_path, size, self.paired and mates_path is None)
        todo = in_files[0] if in_files else chunks.parsed_chunks(reads_path, mates_path, size, self.paired)
        header_text = str(header) if self.options.sort else None
        done = {}
        self.model = self.options.insert_size if self.paired else None
        learning = self.paired and self.model is None
        if learning:
            # a worker learns the model from the first chunks; the chunks go out at once, without it:
            # the workers map their hits meanwhile and pair them once it comes (_share_model)
            held, todo = chunks.model_chunks(todo, size)
            self.tasks.put((-1, "model", (held,)))
        in_flight = IN_FLIGHT_PER_BATCH * self.options.batches * len(self.workers)
        sent = taken = 0
        todo = iter(todo)
        while True:
            # while the model is learned, only chunks an idle thread takes at once (one thread learns it):
            # a task nobody takes would hold this process in put(), deaf to the model
            limit = min(in_flight, self.serving - 1) if learning else in_flight
            while sent - taken < limit and (chunk := next(todo, None)) is not None:
                if self.place_path is not None:
                    self.tasks.put((sent, "hold", (chunk, self.model, None, None)))
                else:
                    part = os.path.join(self.scratch, f"{sent:09d}")
                    self.tasks.put((sent, "map", (chunk, self.model, header_text, part)))
                sent += 1
            if taken == sent and not learning:
                break
            if taken not in done:
                self._receive(done)
                if learning and -1 in done:
                    self._share_model(done.pop(-1))
                    learning = False
                continue
            records, stats, slack, notes, _ = done.pop(taken)
            records = self.take(records, stats, slack, notes)
            yield outfile.HeldPart(records, functools.partial(self._place, taken)) if self.place_path is not None \
                else records
            taken += 1
        while self.place_path is not None and self.placed < taken:
            self._receive(done)                 # the output is complete once every held part is written
        self.tally.finish()
        self.finished = True
        self._stop()                            # they end while the output is closed

    def _share_model(self, model):
        """The learned insert-size model to every worker (chunks sent without it wait for it)."""
        self.model = model
        for w, orders in enumerate(self.orders):
            try:
                orders.send(("model", model))
            except OSError:
                raise self._lost(w) from None

    def _place(self, k, offset, allocated):
        """Have the worker holding chunk k write its records into the output at offset (through a
        mapping where their stretch is allocated)."""
        w = self.holder.pop(k)
        try:
            self.orders[w].send(("place", k, self.place_path, offset, allocated, self.place_name))
        except OSError:
            raise self._lost(w) from None

    def _lost(self, k):
        """WorkerLost for worker k, which has ended unasked. One thread at a time reads how it ended:
        a forkserver's child reports that once, and a second reader would see 255."""
        with self.lost_lock:
            self.workers[k].join(5)
        return WorkerLost(f"worker process {k} ended before its chunks were mapped ({_ended(self.workers[k])})")

    def _receive(self, done):
        """Wait for the workers' next messages; results go to done[k]. Raises a worker's error, or
        WorkerLost where a worker ended unasked."""
        sentinels = {p.sentinel: k for k, p in enumerate(self.workers)}
        for ready in multiprocessing.connection.wait(self.open_conns + list(sentinels)):
            if ready in sentinels:
                k = sentinels[ready]
                if self.conns[k] in self.open_conns:
                    continue                    # its last messages first
                raise self._lost(k)
            try:
                kind, k, *rest = ready.recv()
            except EOFError:
                self.open_conns.remove(ready)   # its process has ended
                continue
            if kind == "ready":
                self.stats.on_gpu, self.ready[ready], threads = rest
                self.serving += threads
            elif kind == "done":
                done[k] = rest[0]
                self.holder[k] = self.conns.index(ready)
            elif kind == "placed":
                self.placed += 1
            else:
                exc, text = rest
                exc.__cause__ = _RemoteTraceback(f"\n\nin a worker process:\n{text}")
                raise exc

    def notes(self):
        ready = sorted(t - self.wall0 for t in self.ready.values()) or [0]
        n = len(self.gpus or ())
        where = f" on {n} GPU{'s' if n != 1 else ''}" if n else ""
        return self.tally.notes + [
            f"processes{' (auto)' if self.auto else ''}: {self.n} workers{where} "
            f"({_count(self.options.thread_count, 'thread')}, "
            f"{_count(self.options.batches, 'batch', 'batches')} side by side each), "
            f"ready after {ready[0]:.2f}..{ready[-1]:.2f} s, first chunk back after {self.t_first or 0:.2f} s, "
            f"{self.chunks_done} chunks in {time.perf_counter() - self.t0:.2f} s"]

    def _stop(self):
        """Tell the workers to end: a None for each of their threads and writers. After a failed run
        `stop` is set first, so that each thread ends at its next task whatever it is (the chunk it
        maps first ends; a worker left to end by itself cleans up what it made)."""
        if self.stopping:
            return
        self.stopping = True
        if not self.finished:
            self.stop.value = 1
        try:
            for _ in range(len(self.workers) * max(1, self.options.batches)):
                self.tasks.put(None)
            for orders in self.orders:
                orders.send(None)
        except OSError:
            pass

    def close(self):
        """Stop the workers, wait for them to end (one that does not end within STOP_GRACE, or
        LOST_GRACE where another has ended unasked, is terminated), and remove the scratch directory."""
        alive = [p for p in self.workers if p.is_alive()]
        if alive:
            self._stop()
            deadline = time.monotonic() + STOP_GRACE
            for p in alive:
                while p.is_alive() and time.monotonic() < deadline:
                    p.join(0.1)
                    if any(q.exitcode not in (None, 0) for q in self.workers):     # one was lost
                        deadline = min(deadline, time.monotonic() + LOST_GRACE)
                if p.is_alive():
                    p.terminate()
                    p.join()
        for c in self.conns + self.orders:
            c.close()
        self.workers, self.conns, self.orders, self.open_conns = [], [], [], []
        self.remove_scratch()
