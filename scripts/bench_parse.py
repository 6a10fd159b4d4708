#!/usr/bin/env python
"""How fast FASTQ reads are read: the reader as the mapper uses it, and its two kernels alone.

    python scripts/bench_parse.py READS.fq [--batch-size 200000] [--parse-threads 1 2 4] [--repeats 3]

- `read_batches`: every batch of the file through pymap.reads.read_batches with each number of parse
  threads (the reader thread cuts runs of --batch-size records, the parse threads turn them into
  batches), the fastest of --repeats passes;
- the kernels on one thread: the runs of the file cut first (not timed), then the scan (records
  found and checked; as the mapper scans, guessing lines' ends, and checking each) and the gather
  (codes, reverse complements, qualities, names) of every run.

Seconds and reads per second on stdout. The file should be in the page cache (run once before).
"""
import argparse
import time

import numpy as np

from pymap import reads
from pymap.kernels import fastq


def best_of(repeats, fn):
    best, out = None, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        s = time.perf_counter() - t
        best = s if best is None else min(best, s)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reads")
    ap.add_argument("--batch-size", type=int, default=200000)
    ap.add_argument("--parse-threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for threads in args.parse_threads:
        reads.PARSE_THREADS = threads
        s, n = best_of(args.repeats, lambda: sum(len(b) for b in reads.read_batches(args.reads, args.batch_size)))
        print(f"read_batches, {threads} parse thread(s): {n:,} reads in {s:.3f} s ({n / s:,.0f} reads/s)")
    records = reads.RecordRuns(args.reads)
    runs = list(iter(lambda: records.next(args.batch_size), None))
    records.close()
    if records.fmt != "fastq":
        raise SystemExit(f"{args.reads}: not FASTQ")
    s_exact, scanned = best_of(args.repeats, lambda: [fastq.scan_records(arr, reads.MAX_NAME)[0]
                                                      for arr, _, _ in runs])
    s_scan, _ = best_of(args.repeats, lambda: [fastq.scan_records(arr, reads.MAX_NAME, guess=True)[0]
                                               for arr, _, _ in runs])
    s_gather, _ = best_of(args.repeats, lambda: [fastq.gather_records(arr, f)
                                                 for (arr, _, _), f in zip(runs, scanned)])
    n = sum(f.shape[0] for f in scanned)
    size = sum(arr.size for arr, _, _ in runs)
    print(f"kernels, one thread, {n:,} reads ({size / 1e6:.0f} MB) in runs of {args.batch_size:,}: "
          f"scan {s_scan:.3f} s (guessing lines' ends; {s_exact:.3f} s checking them), gather {s_gather:.3f} s "
          f"({n / (s_scan + s_gather):,.0f} reads/s)")
    assert n == sum(int(np.count_nonzero(arr == 10)) // 4 for arr, _, _ in runs)


if __name__ == "__main__":
    main()
