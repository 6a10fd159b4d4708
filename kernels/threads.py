"""Parallel loops without a parallel kernel: a nogil kernel run over index ranges on Python threads.

A `prange` kernel costs seconds of Numba compilation (parfor passes, a gufunc, and once more the
code generation of everything it calls); the per-range kernel it would call is compiled anyway.
run_ranges calls that kernel from numba.get_num_threads() Python threads instead, each taking the
next range as it finishes one (the kernels release the GIL). Results must not depend on which thread
runs which range: the kernels write disjoint outputs.
"""
import itertools
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

import numba
import numpy as np


def range_bounds(n, min_len=1, per_thread=8):
    """Boundaries 0 = b[0] < ... < b[-1] = n of about per_thread ranges per thread, of nearly equal
    length and at least min_len items each (one range when n < 2 min_len; none when n == 0)."""
    n = int(n)
    if n <= 0:
        return [0]
    pieces = max(1, min(numba.get_num_threads() * per_thread, n // max(1, min_len)))
    return [n * i // pieces for i in range(pieces + 1)]


def run_ranges(kernel, bounds, *args):
    """kernel(bounds[i], bounds[i + 1], *args) for every i, in parallel; returns when all are done.
    A kernel's exception is raised once the running ranges finish (no new range starts)."""
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
        while not stop:
            i = next(next_piece)
            if i >= pieces:
                return
            kernel(bounds[i], bounds[i + 1], *args)

    pool = ThreadPoolExecutor(nthreads)
    try:
        futures = [pool.submit(worker) for _ in range(nthreads)]
        done, _ = wait(futures, return_when=FIRST_EXCEPTION)
        for f in done:
            f.result()
    finally:
        stop.append(True)
        pool.shutdown(wait=True)
