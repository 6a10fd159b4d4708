"""Parallel loops without a parallel kernel: a nogil kernel run over index ranges on Python threads.

A `prange` kernel costs seconds of Numba compilation (parfor passes, a gufunc, and once more the
code generation of everything it calls); the per-range kernel it would call is compiled anyway.
run_ranges calls that kernel from numba.get_num_threads() Python threads instead, each taking the
next range as it finishes one (the kernels release the GIL). Results must not depend on which thread
runs which range: the kernels write disjoint outputs.
"""
import contextlib
import itertools
import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np


def range_bounds(n, min_len=1, per_thread=2):
    """Boundaries 0 = b[0] < ... < b[-1] = n of about per_thread ranges per thread, of nearly equal
    length and at least min_len items each (one range when n < 2 min_len; none when n == 0). Two a
    thread by default: each range is a kernel dispatch under Python's lock, and batches mapped side
    by side keep the threads busy between one call's ranges (BENCHMARKS.md, thirty-first session)."""
    n = int(n)
    if n <= 0:
        return [0]
    pieces = max(1, min(numba.get_num_threads() * per_thread, n // max(1, min_len)))
    return [n * i // pieces for i in range(pieces + 1)]


def run_ranges(kernel, bounds, *args):
    """kernel(bounds[i], bounds[i + 1], *args) for every i, in parallel: the calling thread and up to
    numba.get_num_threads() - 1 helper threads kept for the whole run (starting threads anew at every
    call held the GIL a good part of a run); returns when all are done. A kernel's exception is raised
    once the running ranges finish (no new range starts)."""
    bounds = [int(x) for x in np.asarray(bounds).tolist()]
    pieces = len(bounds) - 1
    nthreads = min(numba.get_num_threads(), pieces)
    if nthreads <= 1:
        for i in range(pieces):
            kernel(bounds[i], bounds[i + 1], *args)
        return
    next_piece = itertools.count()
    stop = []

    def worker():
        try:
            while not stop:
                i = next(next_piece)
                if i >= pieces:
                    return
                kernel(bounds[i], bounds[i + 1], *args)
        except BaseException:
            stop.append(True)
            raise

    done = queue.SimpleQueue()
    tasks = _helper_tasks()
    for _ in range(nthreads - 1):
        tasks.put((worker, done))
    error = None
    try:
        worker()
    except BaseException as exc:  # noqa: BLE001 - raised below, once the helpers are done
        error = exc
    for _ in range(nthreads - 1):
        error = error or done.get()
    if error is not None:
        raise error


_TASKS = []
_TASKS_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_TASKS.clear)     # a forked child has the queue but not the threads


def _helper_tasks():
    """The queue of run_ranges' helper threads, started at the first call and kept for the run: plain
    threads on a C queue (a ThreadPoolExecutor's futures and conditions cost more GIL time than
    small kernels), enough for several callers at once (batches mapped side by side)."""
    with _TASKS_LOCK:
        if not _TASKS:
            tasks = queue.SimpleQueue()
            for k in range(4 * (os.cpu_count() or 1)):
                threading.Thread(target=_helper, args=(tasks,), daemon=True, name=f"pymap-range-{k}").start()
            _TASKS.append(tasks)
        return _TASKS[0]


def _helper(tasks):
    while True:
        work, done = tasks.get()
        try:
            work()
            done.put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.put(exc)


def ahead(items, depth=1):
    """The items of an iterable, in order, produced on a background thread up to `depth` items ahead
    of the consumer (the next batch is read, or mapped, while this one is used). The thread keeps
    the caller's Numba thread count (numba.set_num_threads is per thread); the producer's exception
    is raised where its item would have come; a consumer that stops early stops the producer, which
    closes `items` (a generator's clean-up runs on that thread, before ahead's own close returns)."""
    done, failed = object(), object()
    q = queue.Queue(maxsize=depth)
    stop = threading.Event()
    nthreads = numba.get_num_threads()

    def put(x):
        while not stop.is_set():
            try:
                q.put(x, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def produce():
        numba.set_num_threads(nthreads)
        try:
            for x in items:
                if not put((None, x)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put((failed, exc))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()             # a generator's own clean-up (work in flight ends) runs here
        put((done, None))

    thread = threading.Thread(target=produce, daemon=True, name="pymap-ahead")
    thread.start()
    try:
        while True:
            tag, x = q.get()
            if tag is done:
                return
            if tag is failed:
                raise x
            yield x
    finally:
        stop.set()
        thread.join()


def ordered_map(fn, items, workers, pause=None):
    """fn(item) for every item, on `workers` threads (at most that many items in flight), the results
    yielded in the items' order: batches are mapped side by side, so that one batch's serial steps
    overlap the others' parallel kernels. The threads keep the caller's Numba thread count. pause:
    None, or a callable asked before an item is started; when it says True, the items in flight finish
    first and the item starts alone (Pipeline.batch then trims the reference). An exception of fn is
    raised where its result would have come (the items in flight finish first); a consumer that stops
    early stops the rest."""
    if workers <= 1:
        for x in items:
            yield fn(x)
        return
    nthreads = numba.get_num_threads()
    pool = ThreadPoolExecutor(workers, initializer=numba.set_num_threads, initargs=(nthreads,),
                              thread_name_prefix="pymap-batch")
    pending = []
    try:
        for x in items:
            while len(pending) >= workers:
                yield pending.pop(0).result()
            if pending and pause is not None and pause():
                while pending:
                    yield pending.pop(0).result()
            pending.append(pool.submit(fn, x))
        while pending:
            yield pending.pop(0).result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)


_SWITCH_LOCK = threading.Lock()
_SWITCH = {"users": 0, "saved": None}


@contextlib.contextmanager
def quick_switching(seconds):
    """Python's thread switch interval at most `seconds` inside (the one before restored when the last
    user leaves). Python's default, 5 ms, is how long a thread back from a GPU wait or a nogil kernel
    may wait for the GIL while another holds it: with many batches side by side on a GPU their
    threads take turns at NumPy glue, and a shorter interval shortens each batch's waits."""
    with _SWITCH_LOCK:
        if _SWITCH["users"] == 0:
            _SWITCH["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(seconds, _SWITCH["saved"]))
        _SWITCH["users"] += 1
    try:
        yield
    finally:
        with _SWITCH_LOCK:
            _SWITCH["users"] -= 1
            if _SWITCH["users"] == 0:
                sys.setswitchinterval(_SWITCH["saved"])


_TALLY = threading.Lock()


def tally(counts, key, value):
    """counts[key] += value for a dict that batches mapped side by side update (ordered_map)."""
    with _TALLY:
        counts[key] = counts.get(key, 0) + value
