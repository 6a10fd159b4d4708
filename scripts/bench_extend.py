#!/usr/bin/env python
"""Throughput of the banded extender (kernels.banded): candidates/s for distances() and align().

Candidates are simulated hits: a random reference, reads cut from it with U{0..e} random
substitutions/insertions/deletions, either strand, candidate diagonal shifted by U{-e..e} from the
truth (so most are within e). `--miss F` replaces a fraction F by random positions (mostly
rejected early). e > 15 gives bands wider than 64 diagonals (several words per row). Prints a
Markdown table; compile time is excluded (one warm-up call, timed separately: a cold compile when
NUMBA_CACHE_DIR points to an empty folder, else mostly a cache load).

    python scripts/bench_extend.py [--n 100000] [--lengths 100,150,250] [--errors 3,5,10]
"""
import argparse
import os
import time

import numba
import numpy as np

from pymap.kernels.banded import banded_align, banded_distances
from pymap.kernels.encoding import reverse_complement_batch


def simulate(rng, n, L, e, genome=1_000_000, miss=0.0):
    ref = rng.integers(0, 4, genome).astype(np.uint8)
    reads = np.empty((n, L + e), np.uint8)
    lens = np.empty(n, np.int64)
    truth = rng.integers(e, genome - L - e, n)
    for i in range(n):
        seg = list(ref[truth[i]:truth[i] + L])
        for _ in range(int(rng.integers(0, e + 1))):
            kind, j = int(rng.integers(0, 3)), int(rng.integers(0, len(seg)))
            if kind == 0:
                seg[j] = (seg[j] + 1 + int(rng.integers(0, 3))) % 4
            elif kind == 1:
                seg.insert(j, int(rng.integers(0, 4)))
            else:
                del seg[j]
        lens[i] = len(seg)
        reads[i, :len(seg)] = seg
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    codes = np.concatenate([reads[i, :lens[i]] for i in range(n)])
    strand = rng.integers(0, 2, n).astype(np.int8)
    # strand 1: store the reverse complement, so that the kernel's rc view is the simulated read
    stored = codes.copy()
    rc = reverse_complement_batch(codes, offsets)
    for i in np.flatnonzero(strand):
        stored[offsets[i]:offsets[i + 1]] = rc[offsets[i]:offsets[i + 1]]
    stored_rc = reverse_complement_batch(stored, offsets)
    pos = truth + rng.integers(-e, e + 1, n)
    if miss:
        m = rng.random(n) < miss
        pos[m] = rng.integers(0, genome - L, m.sum())
    return (stored, stored_rc, offsets, ref, np.arange(n, dtype=np.int32), strand, pos.astype(np.int64),
            np.zeros(n, np.int64), np.full(n, genome, np.int64), np.full(n, e, np.int32))


def rate(fn, args, reps):
    """Best candidates/s over `reps` calls: (wall clock, process CPU time)."""
    wall = cpu = 0.0
    n = args[4].size
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fn(*args)
        wall = max(wall, n / (time.perf_counter() - t))
        cpu = max(cpu, n / max(time.process_time() - c, 1e-9))
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--lengths", default="100,150,250")
    ap.add_argument("--errors", default="3,5,10")
    ap.add_argument("--miss", type=float, default=0.0)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    nthreads = numba.config.NUMBA_NUM_THREADS
    tiny = simulate(np.random.default_rng(0), 4, 50, 2, genome=1000)
    first = []
    for fn in (banded_distances, banded_align):
        t = time.perf_counter()
        fn(*tiny)
        first.append(time.perf_counter() - t)
    print(f"first call (compile or cache load): distances {first[0]:.2f} s, align {first[1]:.2f} s")
    print(f"n={a.n} candidates per cell, miss={a.miss}, best of {a.reps}; load average before: "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("wall = candidates / wall-clock second; cpu = candidates / process CPU second (1 thread: robust "
          "against other load on the machine)\n")
    print(f"| L | e | hits | dist 1T wall | dist 1T cpu | dist {nthreads}T wall | align 1T wall "
          f"| align 1T cpu | align {nthreads}T wall |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for L in (int(x) for x in a.lengths.split(",")):
        for e in (int(x) for x in a.errors.split(",")):
            args = simulate(rng, a.n, L, e, miss=a.miss)
            hits = (banded_distances(*args)[0] >= 0).mean()
            banded_align(*args)
            row = []
            for fn in (banded_distances, banded_align):
                numba.set_num_threads(1)
                row.extend(rate(fn, args, a.reps))
                numba.set_num_threads(nthreads)
                row.append(rate(fn, args, a.reps)[0])
            print(f"| {L} | {e} | {hits:.3f} | " + " | ".join(f"{r / 1e3:,.0f}k" for r in row) + " |")


if __name__ == "__main__":
    main()
