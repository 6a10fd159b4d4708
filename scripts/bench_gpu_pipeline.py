#!/usr/bin/env python
"""Per-stage times of `--device cpu` and `--device gpu` on the same reads, in one warm process.

For each device the reads are mapped --repeats times (the first run also pays kernel compiles or
cache loads; the table shows the fastest later one) with -t THREADS; the SAM records of the two
devices are compared. Stage seconds are the mapper's own (RunStats); "extend kernel" is the time
of the affine kernel on the GPU by CUDA events; "cpu s" the process's CPU seconds during the run,
all threads (over s: how many cores were busy). Reads per second = reads / mapping seconds (FASTQ
parsing and SAM formatting included; reference and index loading excluded).

    python scripts/bench_gpu_pipeline.py REF READS.fq [-t 16] [--batch-size 200000] [--repeats 2] [--batches 1,2]

--batches: how many batches are mapped side by side, one row per value and device (default: pymap's).
"""
import argparse
import os
import time

from pymap import api
from pymap.kernels.threads import ahead
from pymap.options import AlignOptions
from pymap.sam import make_header


def _cpu_seconds():
    """User and system CPU seconds of this process so far, all its threads."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_once(ref, reads, device, threads, batch_size, out_path, batches=None):
    opts = AlignOptions(device=device, threads=threads, batch_size=batch_size, batches=batches,
                        progress=False).validate()
    run = api.LocalRun(ref, opts, None, False)
    header = make_header(run.reference, "bench", None)
    t, cpu = time.perf_counter(), _cpu_seconds()
    with open(out_path, "wb") as out:
        for text in ahead(run.sam_batches(reads, None, header)):     # as pymap align does
            out.write(text)
    seconds = time.perf_counter() - t
    cpu = _cpu_seconds() - cpu
    run.close()
    timing = {f"{stage} kernel s": t.get("kernel_ms", 0.0) / 1000
              for stage, t in (("seed", getattr(run.pipe.seeder, "timing", {})),
                               ("extend", getattr(run.pipe.extender, "timing", {})))}
    return seconds, run.stats, timing, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("reads")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch-size", type=int, default=200000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--devices", default="cpu,gpu", help="comma-separated, compared with the first")
    ap.add_argument("--batches", default="", help="comma-separated batches side by side (default: pymap's)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="profile one more run per device (cProfile) and print its N costliest functions")
    args = ap.parse_args()
    rows, outputs = [], {}
    runs = [(d, int(b) if b else None) for d in args.devices.split(",") for b in args.batches.split(",")]
    for device, batches in runs:
        label = device if batches is None else f"{device}, {batches} side by side"
        best = None
        for _ in range(args.repeats):
            path = os.path.join(args.workdir, f"bench_{device}_{batches}.sam")
            res = run_once(args.ref, args.reads, device, args.threads, args.batch_size, path, batches)
            best = res if best is None or res[0] < best[0] else best
        outputs[label] = path
        if args.profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.runcall(run_once, args.ref, args.reads, device, args.threads, args.batch_size, path, batches)
            print(f"## profile, {label}")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
        seconds, st, timing, cpu = best
        rows.append((label, st.reads, seconds, cpu, st.seconds, timing, st.on_gpu))
    paths = list(outputs.values())
    with open(paths[0], "rb") as a:
        first = a.read()
    same = all(open(p, "rb").read() == first for p in paths[1:])
    stages = sorted({k for r in rows for k in r[4]})
    kernels = sorted({k for r in rows for k in r[5]})
    print(f"| device | reads | s | reads/s | cpu s (cores busy) | {' | '.join(stages + kernels)} | on gpu |")
    print("|" + " --- |" * (len(stages) + len(kernels) + 6))
    for device, n, seconds, cpu, sec, timing, on_gpu in rows:
        cells = " | ".join([f"{sec.get(k, 0):.2f}" for k in stages] + [f"{timing.get(k, 0):.2f}" for k in kernels])
        print(f"| {device} | {n} | {seconds:.2f} | {n / seconds:,.0f} | {cpu:.2f} ({cpu / seconds:.1f}) | {cells} | "
              f"{', '.join(on_gpu)} |")
    print(f"records identical: {same}")


if __name__ == "__main__":
    main()
