#!/usr/bin/env python
"""What a host gives N single-threaded processes at once, against one alone: the ceiling of any
scale-out over its cores (issue 16's Dask efficiency is measured against one worker).

Each of N processes warms up (compiles or loads its kernels, maps once), waits until all are ready,
then times --repeats rounds of the same work; start-up is outside the timed window. Efficiency at N =
seconds of one process alone / mean seconds of the N together (the same work each). The CPU seconds
each process used beside them tell slower work (CPU time grows too: shared caches, memory, clocks)
from waiting for a core (only the wall time grows).

    python scripts/bench_host_ceiling.py --procs 1,8,16 --work compute,memory,pymap --ref REF --reads R.fq

Work: "compute" (an integer hash loop in registers, one dependent chain: clock speed only), "ilp"
(eight independent chains of it: the core's multipliers busy every cycle, which two hardware threads
of one physical core would share), "simd" (multiply-adds over a 16 KiB array that stays in L1: the
vector units, likewise), "memory" (random 8-byte reads from a 1 GiB array per process: DRAM latency
and bandwidth), "pymap" (map READS with -t 1, as one `--dask local:N` worker maps its chunks: one
thread, one batch at a time; --batch-size its reads a batch). For pymap a second table gives each
stage's seconds (the run's summary keys) alone and together: which stage the shared memory system
slows.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def _compute_kernel():
    import numba

    @numba.njit(cache=True)
    def mix(n):
        x = np.uint64(0x9E3779B97F4A7C15)
        for i in range(n):
            x ^= x >> np.uint64(31)
            x *= np.uint64(0xBF58476D1CE4E5B9)
            x += np.uint64(i)
        return x
    return lambda: mix(150_000_000)


def _ilp_kernel():
    import numba

    @numba.njit(cache=True)
    def mix8(n):
        m = np.uint64(0xBF58476D1CE4E5B9)
        a = b = c = d = e = f = g = h = np.uint64(0x9E3779B97F4A7C15)
        for i in range(n):
            k = np.uint64(i)
            a = (a ^ (a >> np.uint64(31))) * m + k
            b = (b ^ (b >> np.uint64(29))) * m + k
            c = (c ^ (c >> np.uint64(27))) * m + k
            d = (d ^ (d >> np.uint64(25))) * m + k
            e = (e ^ (e >> np.uint64(23))) * m + k
            f = (f ^ (f >> np.uint64(21))) * m + k
            g = (g ^ (g >> np.uint64(19))) * m + k
            h = (h ^ (h >> np.uint64(17))) * m + k
        return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h
    return lambda: mix8(60_000_000)


def _simd_kernel():
    import numba

    @numba.njit(cache=True, fastmath=True)
    def fma(x, rounds):
        total = np.float32(0)
        for _ in range(rounds):
            for i in range(x.shape[0]):
                x[i] = x[i] * np.float32(0.999) + np.float32(0.001)
            total += x[0]
        return total
    x = np.ones(4096, np.float32)                       # 16 KiB: in L1
    return lambda: fma(x, 1_500_000)


def _memory_kernel():
    import numba

    @numba.njit(cache=True)
    def gather(table, n):
        mask = np.uint64(table.shape[0] - 1)
        x, total = np.uint64(12345), np.uint64(0)
        for _ in range(n):
            x ^= x << np.uint64(13)
            x ^= x >> np.uint64(7)
            x ^= x << np.uint64(17)
            total += table[x & mask]
        return total
    table = np.arange(1 << 27, dtype=np.uint64)       # 1 GiB
    return lambda: gather(table, 20_000_000)


def _pymap_work(ref, reads, batch_size):
    from pymap import api
    from pymap.kernels.threads import ahead
    from pymap.options import AlignOptions
    from pymap.sam import make_header
    opts = AlignOptions(device="cpu", threads=1, batches=1, batch_size=batch_size, progress=False).validate()
    run = api.LocalRun(ref, opts, None, False)
    header = make_header(run.reference, "bench", None)

    def once():
        with open(os.devnull, "wb") as out:
            for text in ahead(run.sam_batches(reads, None, header)):
                out.writelines(text)
    once.stages = run.stats.seconds
    return once


def child(args):
    work = {"compute": _compute_kernel, "ilp": _ilp_kernel, "simd": _simd_kernel, "memory": _memory_kernel,
            "pymap": lambda: _pymap_work(args.ref, args.reads, args.batch_size)}[args.child]()
    work()                                          # warm: compiles or cache loads, first touches
    print("ready", flush=True)
    sys.stdin.readline()                            # all processes start together
    stages = getattr(work, "stages", {})
    before = dict(stages)
    times, cpu = [], time.process_time()
    for _ in range(args.repeats):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    spent = {k: v - before.get(k, 0.0) for k, v in stages.items()}
    print(json.dumps([times, time.process_time() - cpu, spent]), flush=True)


def together(kind, n, args):
    """Per process: (the seconds of its timed rounds, the CPU seconds it used in them, its stages'
    seconds in them), all n started together."""
    cmd = [sys.executable, __file__, "--child", kind, "--repeats", str(args.repeats),
           "--ref", args.ref or "", "--reads", args.reads or ""]
    if args.batch_size:
        cmd += ["--batch-size", str(args.batch_size)]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"bench_host_ceiling: a {kind} process failed to start")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    out = [json.loads(p.stdout.readline()) for p in procs]
    for p in procs:
        p.wait()
    return [(sum(t), c, st) for t, c, st in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="1,8,16")
    ap.add_argument("--work", default="compute,memory,pymap")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref")
    ap.add_argument("--reads")
    ap.add_argument("--batch-size", type=int, default=None, help="pymap's reads a batch (default: pymap's)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    print("| work | processes | seconds each (mean, max) | efficiency (one alone / mean) | CPU seconds each (mean) |")
    print("| --- | ---: | --- | ---: | ---: |")
    stage_rows = []
    for kind in args.work.split(","):
        if kind == "pymap" and not (args.ref and args.reads):
            raise SystemExit("bench_host_ceiling: --work pymap needs --ref and --reads")
        alone = None
        for n in (int(x) for x in args.procs.split(",")):
            got = together(kind, n, args)
            secs = [s for s, _, _ in got]
            mean, cpu = sum(secs) / n, sum(c for _, c, _ in got) / n
            if got[0][2]:
                keys = sorted(got[0][2])
                stage_rows.append((n, {k: sum(st.get(k, 0.0) for _, _, st in got) / n for k in keys}))
            if n == 1:
                alone = mean
            eff = f"{alone / mean:.3f}" if alone else ""
            print(f"| {kind} | {n} | {mean:.2f}, {max(secs):.2f} | {eff} | {cpu:.2f} |", flush=True)
    if stage_rows:
        keys = list(stage_rows[0][1])
        print(f"\npymap stages, seconds each (mean over the processes; batch size {args.batch_size or 'default'}):\n")
        print("| processes | " + " | ".join(keys) + " |")
        print("| ---: | " + " | ".join("---:" for _ in keys) + " |")
        for n, row in stage_rows:
            print(f"| {n} | " + " | ".join(f"{row.get(k, 0.0):.2f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
