#!/usr/bin/env python
"""Throughput of the banded affine-gap kernel (kernels.affine) next to parasail.

Candidates are simulated hits: a random 1 Mbp reference, reads cut from it with a few edits
(U{0..edits} events: substitutions, or 1-3 bp insertions / deletions), either strand, the
candidate diagonal off by U{-2..2} from the truth, band w. pymap: affine_align (with CIGAR) and
affine_scores (without), bwa-mem defaults, compile time excluded (one warm-up call), best of
--reps; on one thread per process CPU second (robust against other load on a shared machine) and
on all threads per wall-clock second. parasail (one thread, one Python call per pair, the same
pairs, the same scoring: open 7 / extend 1 in parasail's convention, N -1) aligns each read
against its window ref[pos - w, pos + L + w) in semi-global mode with free reference ends
(sg_dx_*) with traceback (the CIGAR is decoded), striped and scan variants, 16 and 32 bit.
parasail has no banded semi-global function (its one banded function, nw_banded, is global), so
it fills the whole window rectangle, L * (L + 2w) cells, against the kernel's L * (2w + 1); its
per-pair Python call (~1-2 us) is included. Prints a Markdown table of candidates per second.

    python scripts/bench_affine.py [--n 20000] [--lengths 100,150,250] [--band 20] [--edits 4]
"""
import argparse
import os
import time

import numba
import numpy as np

from pymap.kernels.affine import affine_align, affine_scores, make_params
from pymap.kernels.encoding import reverse_complement_batch

ASCII = np.frombuffer(b"ACGTN", np.uint8)


def simulate(rng, n, L, w, edits, genome=1_000_000):
    ref = rng.integers(0, 4, genome).astype(np.uint8)
    truth = rng.integers(w + 10, genome - L - w - 10, n)
    reads = []
    for i in range(n):
        seg = list(ref[truth[i]:truth[i] + L])
        for _ in range(int(rng.integers(0, edits + 1))):
            kind, j, k = int(rng.integers(0, 4)), int(rng.integers(1, len(seg) - 1)), int(rng.integers(1, 4))
            if kind <= 1:
                seg[j] = (seg[j] + 1 + int(rng.integers(0, 3))) % 4
            elif kind == 2:
                seg[j:j] = [int(x) for x in rng.integers(0, 4, k)]
            else:
                del seg[j:j + k]
        reads.append(np.array(seg, np.uint8))
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum([r.size for r in reads])
    codes = np.concatenate(reads)
    strand = rng.integers(0, 2, n).astype(np.int8)
    stored = codes.copy()
    rc = reverse_complement_batch(codes, offsets)
    for i in np.flatnonzero(strand):        # strand 1: the kernel's rc view is the simulated read
        stored[offsets[i]:offsets[i + 1]] = rc[offsets[i]:offsets[i + 1]]
    pos = (truth + rng.integers(-2, 3, n)).astype(np.int64)
    args = (stored, reverse_complement_batch(stored, offsets), offsets, ref, np.arange(n, dtype=np.int32),
            strand, pos, np.zeros(n, np.int64), np.full(n, genome, np.int64), np.full(n, w, np.int32))
    pairs = [(ASCII[r].tobytes().decode(), ASCII[ref[p - w:p + r.size + w]].tobytes().decode())
             for r, p in zip(reads, pos)]
    return args, pairs


def rate(fn, reps):
    """Best candidates/s over `reps` calls: (wall clock, process CPU time)."""
    wall = cpu = 0.0
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        k = fn()
        wall = max(wall, k / (time.perf_counter() - t))
        cpu = max(cpu, k / max(time.process_time() - c, 1e-9))
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--n-parasail", type=int, default=2_000)
    ap.add_argument("--lengths", default="100,150,250")
    ap.add_argument("--band", type=int, default=20)
    ap.add_argument("--edits", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-parasail", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    nthreads = numba.config.NUMBA_NUM_THREADS
    P = make_params()
    funcs = {}
    if not a.no_parasail:
        import parasail
        m = parasail.matrix_create("ACGTN", 1, -4)
        for i in range(5):
            m.set_value(i, 4, -1)
            m.set_value(4, i, -1)
        names = ("sg_dx_trace_striped_16", "sg_dx_trace_scan_16", "sg_dx_trace_striped_32",
                 "sg_dx_trace_scan_32")
        funcs = {name: getattr(parasail, name) for name in names}
    print(f"n={a.n} candidates per length (parasail: the first {a.n_parasail}), band w={a.band}, up to "
          f"{a.edits} edit events per read, best of {a.reps}; load average before: {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print("candidates per second: cpu = per process CPU second (1 thread; robust against other load on "
          "the machine), wall = per wall-clock second\n")
    cols = ["align 1T cpu", "scores 1T cpu", f"align {nthreads}T wall"]
    cols += [f"parasail {k[6:]} cpu" for k in funcs]
    print("| L | w | aligned | " + " | ".join(cols) + " | align / best parasail (cpu) |")
    print("|---:|---:|---:|" + "---:|" * (len(cols) + 1))
    for L in (int(x) for x in a.lengths.split(",")):
        args, pairs = simulate(rng, a.n, L, a.band, a.edits)
        out = affine_align(*args, params=P)
        affine_scores(*args, params=P)
        aligned = (out[1] >= 0).mean()
        numba.set_num_threads(1)
        row = [rate(lambda: (affine_align(*args, params=P), a.n)[1], a.reps)[1],
               rate(lambda: (affine_scores(*args, params=P), a.n)[1], a.reps)[1]]
        numba.set_num_threads(nthreads)
        row.append(rate(lambda: (affine_align(*args, params=P), a.n)[1], a.reps)[0])
        sub = pairs[:a.n_parasail]
        for name, fn in funcs.items():
            def go(fn=fn):
                for q, d in sub:
                    fn(q, d, 7, 1, m).cigar   # noqa: B018  (parasail decodes the traceback on access)
                return len(sub)
            row.append(rate(go, max(1, a.reps - 1))[1])
        best_p = max(row[3:]) if funcs else float("nan")
        print(f"| {L} | {a.band} | {aligned:.3f} | " + " | ".join(f"{r / 1e3:,.1f}k" for r in row)
              + f" | {row[0] / best_p:.1f}x |")


if __name__ == "__main__":
    main()
