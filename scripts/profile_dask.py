#!/usr/bin/env python3
"""Where the client of a `--dask` run spends its time: cProfile of api.align on the client, the
20 costliest calls by cumulative time, and the wall time. Used for the scaling figures of
BENCHMARKS.md ("Scale-out on Dask").

    python3 scripts/profile_dask.py REF READS local:16 [OUT.sam]
"""
import cProfile
import pstats
import sys
import time

from pymap import api
from pymap.options import AlignOptions


def main(argv):
    ref, reads, spec = argv[:3]
    out = argv[3] if len(argv) > 3 else "/dev/null"
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    api.align(ref, reads, out=out, options=AlignOptions(dask=spec, progress=False), summary=True)
    prof.disable()
    print(f"{spec}: {time.perf_counter() - t:.2f} s wall on the client")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(20)


if __name__ == "__main__":
    main(sys.argv[1:])
