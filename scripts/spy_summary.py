#!/usr/bin/env python
"""Summarise py-spy's raw output (`py-spy record -f raw`): samples per pymap function (inclusive:
the function or anything it calls) and per innermost frame (self), with their share of all samples.

    python scripts/spy_summary.py spy.txt [--top 40] [--under Pipeline.hits] [--exclude compile ...]
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
    args = ap.parse_args()
    inclusive, own, total = collections.Counter(), collections.Counter(), 0
    with (gzip.open(args.raw, "rt") if args.raw.endswith(".gz") else open(args.raw)) as fh:
        for line in fh:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if args.under and not any(args.under in f for f in frames):
                continue
            if any(x in f for x in args.exclude for f in frames):
                continue
            n = int(n)
            total += n
            own[frames[-1]] += n
            for f in set(frames):
                if "pymap/" in f or "kernels/" in f or "mapper/" in f:
                    inclusive[f] += n
    print(f"{total} samples" + (f" through {args.under}" if args.under else ""))
    print("## inclusive (pymap frames)")
    for f, n in inclusive.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {f[:150]}")
    print("## self (innermost frame)")
    for f, n in own.most_common(args.top):
        print(f"{n:7d} {100 * n / max(total, 1):5.1f}%  {f[:150]}")


if __name__ == "__main__":
    main()
