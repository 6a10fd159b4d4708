#!/usr/bin/env python
"""Benchmark a pre-alignment filter plugin: pairs per second for several (L, E).

    python scripts/bench_filters.py                       # gatekeeper-gpu, L 100 150 250, E 2 5 10
    python scripts/bench_filters.py --pairs 20000 --filter gatekeeper --json out.json
    python scripts/bench_filters.py --filter edlib --pairs 2000 --no-gpu

Rows: the CPU with 1 thread and with all Numba threads (numba.set_num_threads; filters without a
`device` option run as they are), then, when numba.cuda.is_available() and the filter has a `device`
option, the GPU with encode=host and encode=device, on one GPU and (when several are visible) on all
of them. For the GPU, `kt` is the kernel time from CUDA events (the GateKeeper-GPU paper's kernel
time) and `ft` the whole filter_pairs call by the host clock, encoding and transfers included (the
paper's filter time). Every figure is the best of --repeat runs (the machines these run on are shared).

Pairs are made with NumPy: a random reference segment and a read copied from it with a few edits
(0..E+2 per pair, --indel-frac of them insertions/deletions, the rest substitutions), plus a
--random-frac of unrelated random reads; all of length L.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from pymap.plugins import PluginError, create, parse_options   # noqa: E402

BASES = np.frombuffer(b"ACGT", np.uint8)


def make_pairs(n, length, max_edits, seed=0, random_frac=0.1, indel_frac=0.3):
    """(reads, refs) uint8 ASCII (n, L): mostly similar pairs with a few edits, some random reads."""
    rng = np.random.default_rng(seed)
    pad = max_edits + 4
    ext = length + 2 * pad
    ref_ext = BASES[rng.integers(0, 4, (n, ext), dtype=np.int8)]
    nedit = rng.integers(0, max_edits + 3, n)
    cols = np.arange(length)
    delta = np.zeros((n, length), np.int64)
    subs = np.zeros((n, length), np.bool_)
    for k in range(int(nedit.max(initial=0))):
        rows = np.flatnonzero(nedit > k)
        pos = rng.integers(0, length, rows.size)
        kind = rng.random(rows.size)
        ins = kind < indel_frac / 2
        dele = (kind >= indel_frac / 2) & (kind < indel_frac)
        np.add.at(delta, (rows[dele], pos[dele]), 1)       # read skips a reference base
        np.add.at(delta, (rows[ins], pos[ins]), -1)        # read repeats one (then substituted)
        subs[rows[~dele], pos[~dele]] = True
    src = pad + cols[None, :] + np.cumsum(delta, axis=1)
    src = np.clip(src, 0, ext - 1)
    reads = np.take_along_axis(ref_ext, src, axis=1)
    reads[subs] = BASES[rng.integers(0, 4, int(subs.sum()))]
    refs = np.ascontiguousarray(ref_ext[:, pad:pad + length])
    rand = rng.random(n) < random_frac
    reads[rand] = BASES[rng.integers(0, 4, (int(rand.sum()), length))]
    return np.ascontiguousarray(reads), refs


def make_candidates(n_pairs, length, max_edits, seed=0, per_read=8, genome=5_000_000):
    """The mapper's filter input: a random reference (mapping codes), reads copied from it with a
    few substitutions, and per_read candidates per read (the true locus, then random loci, both
    strands). Returns the pymap.batch.CandidateBatch that Filter.filter_candidates takes."""
    from pymap.batch import CandidateBatch, ReadBatch
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 4, genome).astype(np.uint8)
    n_reads = max(1, n_pairs // per_read)
    start = rng.integers(0, genome - length, n_reads)
    codes = ref[start[:, None] + np.arange(length)[None, :]]
    nsub = rng.integers(0, max_edits + 3, n_reads)
    for k in range(int(nsub.max(initial=0))):
        rows = np.flatnonzero(nsub > k)
        cols = rng.integers(0, length, rows.size)
        codes[rows, cols] = (codes[rows, cols] + rng.integers(1, 4, rows.size)) % 4
    rc = (3 - codes)[:, ::-1]
    offsets = np.arange(n_reads + 1, dtype=np.int64) * length
    c_read = np.repeat(np.arange(n_reads, dtype=np.int32), per_read)
    c_pos = rng.integers(0, genome - length, c_read.size).astype(np.int64)
    c_pos[::per_read] = start
    c_strand = np.zeros(c_read.size, np.int8)
    c_strand[1::2] = 1
    c_lo = np.zeros(c_read.size, np.int64)
    c_hi = np.full(c_read.size, genome, np.int64)
    c_maxe = np.full(c_read.size, max_edits, np.int32)
    reads = ReadBatch(codes=np.ascontiguousarray(codes).reshape(-1), offsets=offsets, names=np.empty(0, np.uint8),
                      name_offsets=np.zeros(n_reads + 1, np.int64), quals=np.empty(0, np.uint8),
                      rc_codes=np.ascontiguousarray(rc).reshape(-1))
    return CandidateBatch(reads, ref, c_read, c_strand, c_pos, c_lo, c_hi, c_maxe)


def bench_candidates(name, opts, args, device, repeat):
    """filter_candidates (the mapper path): on the GPU the reference is resident (copied once, at
    the warm-up) and only reads and candidates travel; ft is the whole call by the host clock."""
    f = _create(name, opts, device=device)
    if f is None:
        return None
    f.filter_candidates(args.take(slice(0, 4096)))              # compile, copy the reference
    best_ft, best_kt, acc = float("inf"), None, None
    for _ in range(repeat):
        t = time.perf_counter()
        acc, _est = f.filter_candidates(args)
        best_ft = min(best_ft, time.perf_counter() - t)
        kt = getattr(f, "last_kernel_ms", None)
        if kt:
            best_kt = kt / 1e3 if best_kt is None else min(best_kt, kt / 1e3)
    units = len(f._gpu.devices) if getattr(f, "_gpu", None) is not None else None
    f.close()
    return {"device": device, "units": units, "encode": "candidates",
            "ft_s": best_ft, "kt_s": best_kt, "accept": float(acc.mean())}


def _create(name, opts, **extra):
    try:
        return create("filter", name, **opts, **extra)
    except PluginError:
        if extra:
            return None
        raise


def _time(fn, repeat):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_cpu(name, opts, reads, refs, e, threads, repeat):
    import numba
    f = _create(name, opts, device="cpu")
    if f is None:
        f = _create(name, opts)
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        f.filter_pairs(reads[:256], refs[:256], e)             # compile / warm up
        t, (acc, _est) = _time(lambda: f.filter_pairs(reads, refs, e), repeat)
    finally:
        numba.set_num_threads(old)
        f.close()
    return {"device": "cpu", "units": threads, "encode": "-", "ft_s": t, "kt_s": None,
            "accept": float(acc.mean())}


def _restrict_to_gpus(f, count):
    """Make a gatekeeper filter use only the first `count` GPUs (the bench's 1-GPU rows)."""
    gpu = getattr(f, "_gpu", None)
    if gpu is None or count >= len(gpu.devices):
        return
    from pymap.kernels.gatekeeper_cuda import GateKeeperCUDA
    f._gpu = GateKeeperCUDA(mode=gpu.mode, encode=gpu.encode, devices=range(count))


def bench_gpu(name, opts, reads, refs, e, encode, ngpus, repeat, pinned=False):
    f = _create(name, opts, device="gpu", encode=encode)
    if f is None:
        return None
    _restrict_to_gpus(f, ngpus)
    if pinned:                        # the pairs already sit in page-locked buffers (not timed)
        pr, pf = f.host_pairs(*reads.shape)
        pr[:] = reads
        pf[:] = refs
        reads, refs = pr, pf
    f.filter_pairs(reads[:4096], refs[:4096], e)               # compile / allocate
    best_ft, best_kt, acc = float("inf"), None, None
    for _ in range(repeat):
        t = time.perf_counter()
        acc, _est = f.filter_pairs(reads, refs, e)
        ft = time.perf_counter() - t
        kt = getattr(f, "last_kernel_ms", None)
        if ft < best_ft:
            best_ft = ft
        if kt is not None and kt > 0:
            best_kt = kt / 1e3 if best_kt is None else min(best_kt, kt / 1e3)
    f.close()
    return {"device": "gpu", "units": ngpus, "encode": encode + ("+pinned" if pinned else ""),
            "ft_s": best_ft, "kt_s": best_kt,
            "accept": float(acc.mean())}


def gpu_info():
    try:
        from pymap.kernels.cuda_support import cuda, cuda_available
        if not cuda_available():
            return []
        return [cuda.gpus[i].name.decode() if isinstance(cuda.gpus[i].name, bytes) else str(cuda.gpus[i].name)
                for i in range(len(cuda.gpus))]
    except Exception:        # noqa: BLE001 - no usable GPU
        return []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--filter", default="gatekeeper-gpu", help="filter plugin name")
    ap.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="filter option")
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs per (L, E)")
    ap.add_argument("--tile", type=int, default=1,
                    help="repeat the generated pairs this many times (large GPU batches without the "
                         "cost of generating them; the filter work per pair is unchanged)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[100, 150, 250])
    ap.add_argument("--edits", type=int, nargs="+", default=[2, 5, 10])
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is reported")
    ap.add_argument("--random-frac", type=float, default=0.1)
    ap.add_argument("--indel-frac", type=float, default=0.3)
    ap.add_argument("--encode", nargs="+", choices=["host", "device"], default=["host", "device"],
                    help="GPU input paths to measure")
    ap.add_argument("--candidates", action="store_true",
                    help="also measure the mapper path (filter_candidates: reference resident on the "
                         "GPU, reads + candidates copied, segments cut on the device)")
    ap.add_argument("--no-pairs", action="store_true", help="with --candidates: only the candidate path")
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--no-gpu", action="store_true")
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="CPU thread counts (default: 1 and all)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = ap.parse_args(argv)

    import numba
    opts = parse_options(args.opt)
    threads = args.threads or sorted({1, numba.config.NUMBA_NUM_THREADS})
    gpus = [] if args.no_gpu else gpu_info()
    rows = []
    for length in args.lengths:
        for e in args.edits:
            reads, refs = make_pairs(args.pairs, length, e, seed=length * 1000 + e,
                                     random_frac=args.random_frac, indel_frac=args.indel_frac)
            if args.tile > 1:
                reads, refs = np.tile(reads, (args.tile, 1)), np.tile(refs, (args.tile, 1))
            npairs = reads.shape[0]
            runs = []
            if not args.no_cpu and not args.no_pairs:
                for t in threads:
                    runs.append(bench_cpu(args.filter, opts, reads, refs, e, t, args.repeat))
            if gpus and not args.no_pairs:
                counts = [1] + ([len(gpus)] if len(gpus) > 1 else [])
                for encode in args.encode:
                    for pinned in ((False, True) if encode == "device" else (False,)):
                        for c in counts:
                            r = bench_gpu(args.filter, opts, reads, refs, e, encode, c, args.repeat, pinned)
                            if r is not None:
                                runs.append(r)
            if args.candidates:
                cargs = make_candidates(npairs, length, e, seed=length * 1000 + e)
                if not args.no_cpu:
                    import numba
                    r = bench_candidates(args.filter, opts, cargs, "cpu", args.repeat)
                    if r is not None:
                        r["units"] = numba.config.NUMBA_NUM_THREADS
                        runs.append(r)
                if gpus:
                    r = bench_candidates(args.filter, opts, cargs, "gpu", args.repeat)
                    if r is not None:
                        runs.append(r)
            for r in runs:
                r.update(filter=args.filter, L=length, E=e, pairs=npairs,
                         ft_mpairs_s=npairs / r["ft_s"] / 1e6,
                         kt_mpairs_s=None if not r["kt_s"] else npairs / r["kt_s"] / 1e6,
                         per_unit_mpairs_s=(npairs / r["ft_s"] / 1e6 / r["units"]
                                            if r["device"] == "cpu" else None))
                rows.append(r)
                print(_fmt_row(r), file=sys.stderr, flush=True)
    print(markdown(rows, gpus))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpus": gpus, "cpu_threads": numba.config.NUMBA_NUM_THREADS, "rows": rows}, fh,
                      indent=1)
    return 0


def _fmt_row(r):
    kt = "-" if r["kt_mpairs_s"] is None else f"{r['kt_mpairs_s']:.1f}"
    return (f"{r['filter']} L={r['L']} E={r['E']} {r['device']}x{r['units']} encode={r['encode']}: "
            f"ft {r['ft_mpairs_s']:.2f} M pairs/s, kt {kt}")


def markdown(rows, gpus):
    head = ("| filter | L | E | device | threads/GPUs | encode | M pairs/s (ft) | M pairs/s per thread "
            "| M pairs/s (kt) | ft ms | kt ms | accepted |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append("| {filter} | {L} | {E} | {device} | {units} | {encode} | {ft:.2f} | {pu} | {kt} | "
                     "{ftms:.1f} | {ktms} | {acc:.1%} |".format(
                         ft=r["ft_mpairs_s"], ftms=r["ft_s"] * 1e3,
                         pu="-" if r["per_unit_mpairs_s"] is None else f"{r['per_unit_mpairs_s']:.2f}",
                         kt="-" if r["kt_mpairs_s"] is None else f"{r['kt_mpairs_s']:.1f}",
                         ktms="-" if r["kt_s"] is None else f"{r['kt_s'] * 1e3:.2f}",
                         acc=r["accept"], **r))
    if gpus:
        lines.append("")
        lines.append("GPUs: " + ", ".join(gpus))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
