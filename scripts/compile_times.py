"""Numba compile time per kernel for one pymap command, with an empty kernel cache.

    python3 scripts/compile_times.py align examples/lambda.fa examples/reads.fq.gz -o /tmp/x.sam

Runs `pymap ARGS...` in this process with NUMBA_CACHE_DIR set to a new empty directory (unless
--keep-cache), listens to Numba's "numba:compile" events and prints, per kernel, the seconds spent
compiling it (inclusive: a kernel's time contains the kernels it calls that were compiled with it)
and the number of specialisations, then the run's wall time. A Markdown table with --markdown.
"""
import collections
import os
import sys
import tempfile
import time


def main(argv):
    markdown = "--markdown" in argv
    keep = "--keep-cache" in argv
    args = [a for a in argv if a not in ("--markdown", "--keep-cache")]
    if not keep:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="pymap-compile-")
    from numba.core import event

    seconds = collections.defaultdict(float)
    count = collections.Counter()

    class Listener(event.Listener):
        def __init__(self):
            self.started = {}

        def on_start(self, ev):
            self.started[id(ev.data["dispatcher"]), str(ev.data["args"])] = time.perf_counter()

        def on_end(self, ev):
            d = ev.data["dispatcher"]
            t0 = self.started.pop((id(d), str(ev.data["args"])), None)
            if t0 is None:
                return
            name = f"{d.py_func.__module__.replace('pymap.', '')}.{d.py_func.__name__}"
            seconds[name] += time.perf_counter() - t0
            count[name] += 1

    event.register("numba:compile", Listener())
    t0 = time.perf_counter()
    from pymap.cli import main as pymap_main
    rc = pymap_main(args)
    wall = time.perf_counter() - t0
    rows = sorted(seconds.items(), key=lambda kv: -kv[1])
    out = sys.stderr
    if markdown:
        print("| kernel | compile s (inclusive) | specialisations |", file=out)
        print("| --- | ---: | ---: |", file=out)
        for name, s in rows:
            print(f"| `{name}` | {s:.2f} | {count[name]} |", file=out)
    else:
        for name, s in rows:
            print(f"{s:7.2f} s {count[name]:3d}x {name}", file=out)
    print(f"wall {wall:.1f} s (pymap exit {rc})", file=out)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
