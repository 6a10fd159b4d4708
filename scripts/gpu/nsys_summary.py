"""Summarise an Nsight Systems trace of a pymap run: how busy the GPU was, and what the host waited on.

    nsys profile -t cuda --sample=none -o run pymap align ...
    nsys export -t sqlite -o run.sqlite run.nsys-rep
    python3 scripts/gpu/nsys_summary.py run.sqlite [--bin 0.5]

Prints, as Markdown: the traced span; the GPU's busy share (kernels, copies, either), over the whole span
and in time bins (the fill and drain of the pipeline show there); kernels by total time; copies by
direction and host memory kind (pageable copies cannot overlap); the CUDA calls the host threads
spent longest in (a thread waiting in a synchronize is waiting for the GPU; one busy elsewhere keeps the
GPU waiting); and, where the trace sampled the CPUs (`--sample=process-tree`), the host's samples
between the first and the last kernel by the library their innermost frame is in (NumPy, the Python
interpreter, Numba's compiled code, which has no symbols, the CUDA driver, libc).
"""
import argparse
import sqlite3


def tables(db):
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def enum(db, have, table):
    """An nsys enumeration table as {value: label} (the numbering changes between nsys versions)."""
    if table not in have:
        return {}
    return {row[0]: row[-1] for row in db.execute(f"SELECT * FROM {table}")}


def union_length(intervals):
    """Total length covered by (start, end) intervals."""
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def covered(intervals, lo, hi):
    return union_length([(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sqlite")
    parser.add_argument("--bin", type=float, default=0.5, help="seconds per row of the busy-over-time table")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--window", type=float, nargs=2, metavar=("FROM", "TO"),
                        help="a trace of the CPUs alone: the samples from FROM to TO s after its first")
    args = parser.parse_args()
    db = sqlite3.connect(args.sqlite)
    have = tables(db)
    names = dict(db.execute("SELECT id, value FROM StringIds")) if "StringIds" in have else {}
    copy_kinds, memory_kinds = enum(db, have, "ENUM_CUDA_MEMCPY_OPER"), enum(db, have, "ENUM_CUDA_MEM_KIND")
    kernels = db.execute(
        "SELECT start, end, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall() \
        if "CUPTI_ACTIVITY_KIND_KERNEL" in have else []
    copies = db.execute(
        "SELECT start, end, bytes, copyKind, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchall() \
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in have else []
    calls = db.execute(
        "SELECT start, end, nameId, globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall() \
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in have else []
    kernel_spans = [(s, e) for s, e, _ in kernels]
    copy_spans = [(s, e) for s, e, *_ in copies]
    every = kernel_spans + copy_spans + [(s, e) for s, e, *_ in calls]
    sec = 1e-9
    if not every:                       # a trace of the CPUs alone
        span = db.execute("SELECT min(start), max(start) FROM COMPOSITE_EVENTS").fetchone() \
            if "COMPOSITE_EVENTS" in have else (None, None)
        if span[0] is None:
            raise SystemExit(f"{args.sqlite}: neither CUDA activity nor CPU samples traced")
        lo, hi = span[0], span[1] + 1
        where = "over the whole trace"
        if args.window:
            lo, hi = (span[0] + int(x / sec) for x in args.window)
            where = f"from {args.window[0]} to {args.window[1]} s"
        host_samples(db, have, names, lo, hi, args.top, where)
        return
    t0, t1 = min(s for s, _ in every), max(e for _, e in every)
    g0, g1 = min(s for s, _ in kernel_spans), max(e for _, e in kernel_spans)
    print(f"traced span {(t1 - t0) * sec:.2f} s; first kernel at {(g0 - t0) * sec:.2f} s, "
          f"last kernel ends at {(g1 - t0) * sec:.2f} s")
    print(f"{len(kernels)} kernels, {len(copies)} copies, {len(calls)} CUDA calls\n")
    print("| GPU busy with | seconds | share of first to last kernel |")
    print("| --- | ---: | ---: |")
    for label, spans in (("kernels", kernel_spans), ("copies", copy_spans),
                         ("kernels or copies", kernel_spans + copy_spans)):
        busy = union_length(spans)
        print(f"| {label} | {busy * sec:.2f} | {busy / (g1 - g0):.2f} |")
    print(f"\nbusy over time ({args.bin} s bins from the trace's start; kernels, kernels or copies):\n")
    print("| from s | kernels | kernels or copies |")
    print("| ---: | ---: | ---: |")
    step = int(args.bin / sec)
    both = kernel_spans + copy_spans
    for lo in range(t0, t1, step):
        hi = lo + step
        print(f"| {(lo - t0) * sec:.1f} | {covered(kernel_spans, lo, hi) / step:.2f} | "
              f"{covered(both, lo, hi) / step:.2f} |")
    by_kernel = {}
    for s, e, name in kernels:
        count, total = by_kernel.get(name, (0, 0))
        by_kernel[name] = (count + 1, total + e - s)
    print("\n| kernel | launches | total s | mean us |")
    print("| --- | ---: | ---: | ---: |")
    for name, (count, total) in sorted(by_kernel.items(), key=lambda kv: -kv[1][1])[:args.top]:
        label = names.get(name, str(name))[:60]
        print(f"| {label} | {count} | {total * sec:.3f} | {total / count / 1e3:.1f} |")
    by_copy = {}
    for s, e, nbytes, kind, src, dst in copies:
        key = (copy_kinds.get(kind, str(kind)), memory_kinds.get(src, str(src)), memory_kinds.get(dst, str(dst)))
        count, total, size = by_copy.get(key, (0, 0, 0))
        by_copy[key] = (count + 1, total + e - s, size + nbytes)
    print("\n| copy | from | to | copies | GB | total s | GB/s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for (kind, src, dst), (count, total, size) in sorted(by_copy.items(), key=lambda kv: -kv[1][1]):
        print(f"| {kind} | {src} | {dst} | {count} | {size / 1e9:.2f} | {total * sec:.3f} | "
              f"{size / max(total, 1):.1f} |")
    by_call = {}
    for s, e, name, _ in calls:
        count, total = by_call.get(name, (0, 0))
        by_call[name] = (count + 1, total + e - s)
    threads = len({tid for *_, tid in calls})
    print(f"\nCUDA calls of {threads} host threads, summed over the threads:\n")
    print("| call | count | total s | mean us |")
    print("| --- | ---: | ---: | ---: |")
    for name, (count, total) in sorted(by_call.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {names.get(name, str(name))} | {count} | {total * sec:.3f} | {total / count / 1e3:.1f} |")
    host_samples(db, have, names, g0, g1, args.top)


def host_samples(db, have, names, lo, hi, top, where="from the first to the last kernel"):
    """The CPU samples taken between lo and hi, by the module of their innermost frame."""
    if not {"COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS"} <= have:
        return
    leaf = dict(db.execute("SELECT id, module FROM SAMPLING_CALLCHAINS WHERE stackDepth = 0"))
    modules = {}
    for (sample,) in db.execute("SELECT id FROM COMPOSITE_EVENTS WHERE start >= ? AND start < ?", (lo, hi)):
        name = names.get(leaf.get(sample), "?").rsplit("/", 1)[-1]
        modules[name] = modules.get(name, 0) + 1
    total = sum(modules.values())
    if not total:
        return
    print(f"\nhost CPU samples {where} ({total}), by the innermost frame's module:\n")
    print("| module | share |")
    print("| --- | ---: |")
    for name, count in sorted(modules.items(), key=lambda kv: -kv[1])[:top]:
        label = "Numba's compiled code (anon)" if name == "anon" else name
        print(f"| {label} | {count / total:.3f} |")


if __name__ == "__main__":
    main()
