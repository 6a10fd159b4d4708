#!/usr/bin/env python
"""Summarise py-spy's raw output (`py-spy record -f raw`): samples per pymap function (inclusive:
the function or anything it calls), per innermost frame (self) and per innermost pymap frame, with
their share of all samples. With native frames (`--native`), samples are also told apart by what ran
(Numba's compiled code, NumPy, the CUDA driver, Python, other), and --busy leaves out the samples of
threads waiting for a lock (Python's, or a pthread condition or mutex). --through NAME ... gives
first the share of the samples through each of those frames (the before/after tables of BENCHMARKS.md).
--callers NAME ... gives last, for each name, the innermost pymap frames of the samples whose innermost
frame contains it: which call sites of pymap a native function's samples come from (NumPy's fancy
indexing, `mapiter_trivial_get`; a copy, `pwrite64`).

    python scripts/spy_summary.py spy.txt [--top 40] [--under Pipeline.hits] [--exclude compile ...] [--busy]
        [--through Pipeline.reselect read_span format_sam ...] [--callers mapiter_trivial_get pwrite64 ...]
"""
import argparse
import collections
import gzip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--under", default=None, help="count only stacks through a frame containing this text")
    ap.add_argument("--exclude", nargs="*", default=[], help="drop stacks with a frame containing any of these")
    ap.add_argument("--through", nargs="*", default=[], help="first, the samples through a frame containing each")
    ap.add_argument("--busy", action="store_true", help="leave out samples waiting for a lock (native frames)")
    ap.add_argument("--callers", nargs="*", default=[],
                    help="last, the innermost pymap frames of the samples whose innermost frame contains each")
    args = ap.parse_args()
    inclusive, own, total = collections.Counter(), collections.Counter(), 0
    innermost, kinds, through = collections.Counter(), collections.Counter(), collections.Counter()
    callers = {name: collections.Counter() for name in args.callers}
    with (gzip.open(args.raw, "rt") if args.raw.endswith(".gz") else open(args.raw)) as fh:
        for line in fh:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if args.under and not any(args.under in f for f in frames):
                continue
            if any(x in f for x in args.exclude for f in frames):
                continue
            if args.busy and waiting(frames):
                continue
            n = int(n)
            total += n
            own[frames[-1]] += n
            kind = what_ran(frames)
            kinds[kind] += n
            caller = next((f for f in reversed(frames) if "pymap/" in f), "(none)")
            innermost[(caller, kind)] += n
            for name in args.callers:
                if name in frames[-1]:
                    callers[name][caller] += n
            for f in set(frames):
                if "pymap/" in f or "kernels/" in f or "mapper/" in f:
                    inclusive[f] += n
            for name in args.through:
                if any(name in f for f in frames):
                    through[name] += n
    print(f"{total} samples" + (f" through {args.under}" if args.under else ""))
    if args.through:
        print("## through")
        for name in args.through:
            print(f"{through[name]:7d} {100 * through[name] / max(total, 1):5.1f}%  {name}")
    print("## inclusive (pymap frames)")
    for f, n in inclusive.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {f[:150]}")
    print("## self (innermost frame)")
    for f, n in own.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {f[:150]}")
    ran = ", ".join(f"{k} {100 * n / max(total, 1):.1f}%" for k, n in kinds.most_common())
    print(f"## what ran (native frames: {ran})")
    print("## innermost pymap frame, by what ran")
    for (f, kind), n in innermost.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {kind:6s} {f[:150]}")
    for name, by in callers.items():
        print(f"## callers of {name} ({sum(by.values())} samples)")
        for f, n in by.most_common(args.top):
            print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {f[:150]}")


def waiting(frames):
    """A sample of a thread waiting for a lock: its innermost native frames are a pthread condition or
    mutex wait, or libc under one (py-spy --native)."""
    leaf, caller = frames[-1], frames[-2] if len(frames) > 1 else ""
    return "pthread_cond" in leaf or "pthread_mutex" in leaf or (
        "libc.so" in leaf and ("pthread" in caller or "libc.so" in caller or not caller))


def what_ran(frames):
    """What the innermost frame of a sample ran: jit (Numba's compiled code, which has no symbols),
    numpy, cuda (the driver), python, or other."""
    leaf, caller = frames[-1], frames[-2] if len(frames) > 1 else ""
    if "(?)" in leaf:
        return "jit"
    if "numpy" in leaf or "_multiarray" in leaf or ("libc.so" in leaf and "numpy" in caller):
        return "numpy"
    if "libcuda" in leaf or "libcuda" in caller:
        return "cuda"
    if "libpython" in leaf or ".py:" in leaf:
        return "python"
    return "other"


if __name__ == "__main__":
    main()
