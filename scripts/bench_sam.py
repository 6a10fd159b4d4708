#!/usr/bin/env python
"""How fast SAM text is formatted: kernels.sam.format_sam alone, on the records of real batches.

    python scripts/bench_sam.py REF READS [--reads 400000] [--batch-size 200000] [--threads 1 4 16] [--repeats 3]

The first --reads reads of READS are mapped once on the CPU (pymap.api.align, one process) with
format_sam's arguments kept for each batch; then every kept batch is formatted again, the fastest of
--repeats passes for each number of threads (format_sam's ranges run on Numba's thread count, as in
the mapper). Prints records and megabytes a second. The bytes are checked to equal those of the run.
This is the host's SAM step of a GPU run, which formats on the CPU whatever the device.
"""
import argparse
import itertools
import os
import tempfile
import time

import numba


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("reads")
    ap.add_argument("--reads", dest="n_reads", type=int, default=400000)
    ap.add_argument("--batch-size", type=int, default=200000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, numba.config.NUMBA_NUM_THREADS])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from pymap import api, pipeline
    from pymap.kernels.sam import format_sam
    from pymap.options import AlignOptions

    kept = []

    def keep(*a, **k):
        text = format_sam(*a, **k)
        kept.append((a, k, b"".join(text)))
        return text

    with tempfile.TemporaryDirectory() as tmp:
        head = os.path.join(tmp, "reads.fq")
        with open(args.reads, "rb") as src, open(head, "wb") as dst:
            dst.writelines(itertools.islice(src, 4 * args.n_reads))
        pipeline.format_sam = keep
        try:
            api.align(args.ref, head, os.path.join(tmp, "out.sam"),
                      AlignOptions(threads=max(args.threads), batch_size=args.batch_size, device="cpu"), summary=False)
        finally:
            pipeline.format_sam = format_sam
    records = sum(len(a[0]) for a, _, _ in kept)
    size = sum(len(t) for _, _, t in kept)
    for threads in args.threads:
        numba.set_num_threads(threads)
        if any(b"".join(format_sam(*a, **k)) != text for a, k, text in kept):
            raise SystemExit("format_sam gave other bytes than in the run")
        best = None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for a, k, _ in kept:
                format_sam(*a, **k)
            s = time.perf_counter() - t0
            best = s if best is None else min(best, s)
        print(f"format_sam, {threads} thread(s): {records:,} records ({size / 1e6:.0f} MB) in {best:.3f} s "
              f"({records / best:,.0f} records/s, {size / best / 1e6:,.0f} MB/s)")


if __name__ == "__main__":
    main()
