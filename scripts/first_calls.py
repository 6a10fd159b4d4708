#!/usr/bin/env python
"""Where a whole pymap command's first-use time goes: every Numba kernel's first call for a signature
(its load from the cache, or its compilation, and the wait for Numba's compiler lock), CPU and CUDA,
timed by thread, with the moment the first and the last of them ended.

    python scripts/first_calls.py align REF READS -o out.sam --device gpu -t 16 [--top 15]

Prints the command's own output, then a summary on stderr at exit.
"""
import atexit
import sys
import threading
import time

T0 = time.perf_counter()
CALLS = []


def _timed(cls):
    original = cls._compile_for_args

    def compile_for_args(self, *args, **kws):
        t = time.perf_counter()
        try:
            return original(self, *args, **kws)
        finally:
            end = time.perf_counter()
            CALLS.append((end - t, end - T0, f"{self.py_func.__module__}.{self.py_func.__name__}",
                          threading.current_thread().name, cls.__name__))
    cls._compile_for_args = compile_for_args


def _report(top):
    if not CALLS:
        return
    by_kind = {}
    for secs, _, _, _, kind in CALLS:
        by_kind[kind] = by_kind.get(kind, 0.0) + secs
    ends = sorted(end for _, end, _, _, _ in CALLS)
    print(f"[first_calls] {len(CALLS)} first calls ({', '.join(f'{k} {v:.2f} s' for k, v in by_kind.items())} "
          f"summed over threads); the first ended {ends[0]:.2f} s, the last {ends[-1]:.2f} s after start",
          file=sys.stderr)
    for secs, end, name, thread, kind in sorted(CALLS, reverse=True)[:top]:
        print(f"  {1000 * secs:8.1f} ms  ended at {end:6.2f} s  {name}  [{thread}, {kind}]", file=sys.stderr)


def main():
    argv = sys.argv[1:]
    top = 15
    if "--top" in argv:
        k = argv.index("--top")
        top = int(argv[k + 1])
        del argv[k:k + 2]
    from numba.core import dispatcher
    _timed(dispatcher._DispatcherBase)
    if "--device" in argv and argv[argv.index("--device") + 1] != "cpu":
        from pymap.kernels.cuda_support import cuda  # noqa: F401  (the shims first)
        from numba.cuda.dispatcher import CUDADispatcher
        if hasattr(CUDADispatcher, "_compile_for_args"):     # not the simulator's
            _timed(CUDADispatcher)
    atexit.register(_report, top)
    from pymap import cli
    sys.argv = ["pymap"] + argv
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
