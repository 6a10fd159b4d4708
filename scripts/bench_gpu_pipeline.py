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
--timeline: for the last run of each row, when each batch's reads were parsed, when its mapping started
and ended (on its thread) and when its SAM was written, in seconds from the run's start: which of the
reader, the mapping or the writer the run waits for.
--switch-interval S: Python's switch interval (seconds) while GPU batches run side by side, instead of
pymap's (api.GPU_SWITCH_INTERVAL): how much the batch threads wait for Python's lock in turn.
--mates R2.fq: pairs (READS holding read 1), --batch-size / 2 pairs a batch as in pymap align; the
timeline then shows each batch's hits and its pairing apart.
--gil-probe: a thread that sleeps 1 ms again and again during each run and measures how much longer
each sleep took, i.e. how long it waited for Python's lock: near 0 when the lock is mostly free, about
the switch interval or more when some thread holds it nearly all the time (the same probe is run with
the process idle first, for its baseline).
"""
import argparse
import os
import threading
import time

import numpy as np

from pymap import api
from pymap.kernels.threads import ahead
from pymap.options import AlignOptions
from pymap.sam import make_header


def _usage():
    """(CPU seconds, of them system, minor page faults) of this process so far, all its threads."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return np.array([r.ru_utime + r.ru_stime, r.ru_stime, r.ru_minflt])


class Timeline:
    """Event times of one run's batches, in seconds from its start (see --timeline): when each batch's
    reads were parsed, when each stage hooked here started and ended on a batch ("mapping" for single
    reads; "hits" and "pairing" for pairs, whose first batches' hits start beside the insert-size
    model), and when each batch's SAM was written."""

    def __init__(self, run, pairs):
        import pymap.mates as mates
        self.t0 = time.perf_counter()
        self.parsed, self.written, self.spans = [], [], {}
        self._undo = []
        pipe = run.pipe
        if pairs:
            self._patch(mates, "read_mate_batches", self._timed_reads(mates.read_mate_batches))
            self._patch(pipe, "pair_hits_of", self._timed("hits", pipe.pair_hits_of))
            self._patch(pipe, "map_pairs", self._timed("pairing", pipe.map_pairs))
        else:
            self._patch(api, "read_batches", self._timed_reads(api.read_batches))
            self._patch(pipe, "map_batch", self._timed("mapping", pipe.map_batch))

    def _patch(self, owner, name, fn):
        self._undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, fn)

    def _timed_reads(self, read):
        def timed(*args, **kwargs):
            for batch in read(*args, **kwargs):
                self.parsed.append(self.now())
                yield batch
        return timed

    def _timed(self, stage, fn):
        spans = self.spans.setdefault(stage, {})

        def timed(batch, *args):
            start = self.now()
            out = fn(batch, *args)
            spans[batch.first_index] = (start, self.now())
            return out
        return timed

    def now(self):
        return time.perf_counter() - self.t0

    def report(self, label):
        for owner, name, fn in self._undo:
            setattr(owner, name, fn)
        stages = list(self.spans)
        keys = sorted(self.spans[stages[-1]])          # the last stage hooked yields each written batch
        print(f"## timeline, {label} (s from the start)")
        print("| batch | " + " | ".join(f"{s} starts | ends | takes" for s in stages) + " | written |")
        print("| ---: |" + " ---: | ---: | ---: |" * len(stages) + " ---: |")
        for i, (k, w) in enumerate(zip(keys, self.written)):
            cells = []
            for s in stages:
                a, b = self.spans[s].get(k, (float("nan"), float("nan")))
                cells.append(f"{a:.3f} | {b:.3f} | {b - a:.3f}")
            print(f"| {i} | " + " | ".join(cells) + f" | {w:.3f} |")
        print("parsed at: " + ", ".join(f"{p:.3f}" for p in self.parsed))
        for s in stages:
            spans = list(self.spans[s].values())
            busy = sum(b - a for a, b in spans)
            wall = max(b for _, b in spans) - min(a for a, _ in spans)
            print(f"{s}: {busy:.2f} batch-seconds over {wall:.2f} s ({busy / max(wall, 1e-9):.1f} in flight)")
        print(f"reader done at {self.parsed[-1]:.3f} s; last write {self.written[-1]:.3f} s")


class GilProbe:
    """Sleeps of 1 ms on a thread of its own, each one's overshoot recorded (see --gil-probe)."""

    def __init__(self):
        self.waits = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(0.001)
            self.waits.append(time.perf_counter() - t - 0.001)

    def stop(self):
        self._stop.set()
        self._thread.join()
        w = np.array(self.waits) * 1000
        return (f"lock wait after a 1 ms sleep: mean {w.mean():.2f} ms, p90 {np.percentile(w, 90):.2f} ms "
                f"({w.size} sleeps)")


def run_once(ref, reads, device, threads, batch_size, out_path, batches=None, timeline=False, mates=None):
    opts = AlignOptions(device=device, threads=threads, batch_size=batch_size, batches=batches,
                        progress=False).validate()
    run = api.LocalRun(ref, opts, None, False)
    header = make_header(run.reference, "bench", None)
    tl = Timeline(run, mates is not None) if timeline else None
    if os.path.exists(out_path):
        # the last repeat's file, truncated by open: ext4 then writes the new one out at its close
        # (auto_da_alloc; 0.8 s for 6 M reads' SAM), which pymap align does not do (outfile.publish)
        os.unlink(out_path)
    t, cpu = time.perf_counter(), _usage()
    with open(out_path, "wb") as out:
        for text in ahead(run.sam_batches(reads, mates, header)):     # as pymap align does
            out.writelines(text)
            if tl:
                tl.written.append(tl.now())
    seconds = time.perf_counter() - t
    cpu = _usage() - cpu
    run.close()
    timing = {f"{stage} kernel s": t.get("kernel_ms", 0.0) / 1000
              for stage, t in (("seed", getattr(run.pipe.seeder, "timing", {})),
                               ("extend", getattr(run.pipe.extender, "timing", {})))}
    return seconds, run.stats, timing, cpu, tl


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
    ap.add_argument("--timeline", action="store_true", help="print the batches' timeline of each row's last run")
    ap.add_argument("--mates", help="read 2 of pairs (READS holding read 1): the pairs are mapped")
    ap.add_argument("--switch-interval", type=float, help="Python's switch interval for GPU batches (s)")
    ap.add_argument("--gil-probe", action="store_true", help="measure how long a thread waits for Python's lock")
    args = ap.parse_args()
    if args.switch_interval:
        api.GPU_SWITCH_INTERVAL = args.switch_interval
    if args.gil_probe:
        probe = GilProbe()
        time.sleep(0.5)
        print(f"# idle process, {probe.stop()}", flush=True)
    rows, outputs = [], {}
    runs = [(d, int(b) if b else None) for d in args.devices.split(",") for b in args.batches.split(",")]
    for device, batches in runs:
        label = device if batches is None else f"{device}, {batches} side by side"
        best = None
        for k in range(args.repeats):
            path = os.path.join(args.workdir, f"bench_{device}_{batches}.sam")
            probe = GilProbe() if args.gil_probe else None
            res = run_once(args.ref, args.reads, device, args.threads, args.batch_size, path, batches,
                           timeline=args.timeline and k == args.repeats - 1, mates=args.mates)
            best = res if best is None or res[0] < best[0] else best
            print(f"# {label}, run {k + 1}: {res[0]:.2f} s" + (f"; {probe.stop()}" if probe else ""), flush=True)
        if res[4]:
            res[4].report(label)
        outputs[label] = path
        if args.profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.runcall(run_once, args.ref, args.reads, device, args.threads, args.batch_size, path, batches,
                         mates=args.mates)
            print(f"## profile, {label}")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
        seconds, st, timing, cpu, _ = best
        rows.append((label, st.reads, seconds, cpu, st.seconds, timing, st.on_gpu))
    paths = list(outputs.values())
    with open(paths[0], "rb") as a:
        first = a.read()
    same = all(open(p, "rb").read() == first for p in paths[1:])
    stages = sorted({k for r in rows for k in r[4]})
    kernels = sorted({k for r in rows for k in r[5]})
    print(f"| device | reads | s | reads/s | cpu s (cores busy) | system s | minor faults | {' | '.join(stages + kernels)} | on gpu |")
    print("|" + " --- |" * (len(stages) + len(kernels) + 8))
    for device, n, seconds, cpu, sec, timing, on_gpu in rows:
        cells = " | ".join([f"{sec.get(k, 0):.2f}" for k in stages] + [f"{timing.get(k, 0):.2f}" for k in kernels])
        print(f"| {device} | {n} | {seconds:.2f} | {n / seconds:,.0f} | {cpu[0]:.2f} ({cpu[0] / seconds:.1f}) | "
              f"{cpu[1]:.2f} | {cpu[2]:,.0f} | {cells} | "
              f"{', '.join(on_gpu)} |")
    print(f"records identical: {same}")


if __name__ == "__main__":
    main()
