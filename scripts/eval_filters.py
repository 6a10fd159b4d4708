#!/usr/bin/env python
"""Evaluate pre-alignment filters against Edlib's global (NW) edit distance.

Input: pair files, one pair per line: read TAB reference-segment (same length within a line;
lengths may differ between lines: pairs are grouped by length). Ground truth is Edlib's global
distance, computed once per pair with k = the largest threshold. A pair holding any non-ACGT
character is "undefined": counted separately and left out of every accept/reject/error count.

For every filter (by plugin name through pymap.plugins.create) and threshold E, like table S.2
of the GateKeeper-GPU paper: pairs, undefined, Edlib accepted/rejected, filter accepted/rejected,
false accepts (filter accepts, Edlib distance > E), false rejects (filter rejects, distance <= E),
false accept rate = false accepts / Edlib rejects, true reject rate = true rejects / Edlib rejects,
and throughput (pairs/s of the filter_pairs call on the whole group, all pairs, Edlib excluded,
after one warm-up call so JIT compilation is not timed; with --repeat N the median of N calls).
undefined_accepted counts the undefined pairs the filter let through: the paper's comparison
tables (S.7-S.12) add them to GateKeeper-GPU's false accepts ("including undefined"); here they
stay out of false_accepts.

A filter entry is a plugin name, optionally with options after colons, e.g.
`gatekeeper-gpu:ends=full:device=cpu`; the entry as written is its label, so one plugin can be
evaluated with several settings in one run. `--opt NAME:KEY=VALUE` applies to every entry of
plugin NAME (options written in the entry win).

Writes OUT/results.csv, OUT/results.md (a false-accept comparison per read length: rows =
thresholds, columns = filters, like tables S.7-S.12; then one S.2-style table per filter) and
OUT/false_accepts.png (false accepts vs threshold, one line per filter, one panel per length).

    python scripts/eval_filters.py pairs.txt [more.txt] --filters shouji,sneakysnake \
        [--thresholds 0,1,2,3] [--out eval_out] [--threads 2] [--opt shouji:window=4] \
        [--name SET] [--repeat 5]
"""
import argparse
import csv
import math
import os
import sys
import time

import edlib
import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path[:1]:  # this checkout's code first, even next to an older installed copy
    sys.path.insert(0, _ROOT)

DEFAULT_FILTERS = "gatekeeper-gpu,gatekeeper,shouji,sneakysnake"
COLUMNS = ["filter", "read_length", "threshold", "pairs", "undefined", "edlib_accepted", "edlib_rejected",
           "filter_accepted", "filter_rejected", "false_accepts", "false_rejects", "false_accept_rate",
           "true_reject_rate", "filter_seconds", "throughput_pairs_per_s", "undefined_accepted"]

_ACGT = np.zeros(256, np.bool_)
for _b in b"ACGT":
    _ACGT[_b] = True


def read_pairs(paths):
    """{length: (reads uint8 (n, L), refs uint8 (n, L))} from pair files (upper-cased)."""
    groups = {}
    for path in paths:
        with open(path, "rb") as fh:
            for lineno, line in enumerate(fh, 1):
                line = line.strip()
                if not line or line.startswith(b"#"):
                    continue
                fields = line.split(b"\t")
                if len(fields) < 2:
                    raise ValueError(f"{path}:{lineno}: expected read<TAB>reference")
                read, ref = fields[0].strip().upper(), fields[1].strip().upper()
                if len(read) != len(ref):
                    raise ValueError(f"{path}:{lineno}: read and reference lengths differ "
                                     f"({len(read)} != {len(ref)})")
                groups.setdefault(len(read), ([], []))
                groups[len(read)][0].append(read)
                groups[len(read)][1].append(ref)
    out = {}
    for length in sorted(groups):
        reads, refs = groups[length]
        n = len(reads)
        out[length] = (np.frombuffer(b"".join(reads), np.uint8).reshape(n, length).copy(),
                       np.frombuffer(b"".join(refs), np.uint8).reshape(n, length).copy())
    return out


def undefined_mask(reads, refs):
    """True for pairs holding any non-ACGT character."""
    return ~(_ACGT[reads].all(axis=1) & _ACGT[refs].all(axis=1))


def edlib_distances(reads, refs, k):
    """Edlib global distance per pair, -1 when above k."""
    dist = np.empty(reads.shape[0], np.int64)
    for i in range(reads.shape[0]):
        dist[i] = edlib.align(reads[i].tobytes(), refs[i].tobytes(), mode="NW", task="distance",
                              k=k)["editDistance"]
    return dist


def thresholds_for(length, explicit):
    if explicit is not None:
        return explicit
    return list(range(0, length // 10 + 1))


def _rate(num, den):
    return 100.0 * num / den if den else float("nan")


def evaluate(groups, filters, explicit_thresholds=None, log=None, repeat=1):
    """Rows (dicts with COLUMNS) for every (filter, length, threshold). Each filter_pairs call is
    made `repeat` times; filter_seconds is the median (the decisions must be the same every time)."""
    rows = []
    for length, (reads, refs) in groups.items():
        ths = thresholds_for(length, explicit_thresholds)
        undef = undefined_mask(reads, refs)
        defined = ~undef
        dist = edlib_distances(reads, refs, max(ths))
        n = reads.shape[0]
        if log:
            log(f"length {length}: {n} pairs, {int(undef.sum())} undefined, thresholds {ths[0]}..{ths[-1]}")
        for name, flt in filters.items():
            # warm-up (JIT compilation, device start) outside the timing
            flt.filter_pairs(reads[:1], refs[:1], ths[0])
            for e in ths:
                times = []
                for rep in range(max(1, repeat)):
                    t0 = time.perf_counter()
                    acc_rep, _ = flt.filter_pairs(reads, refs, e)
                    times.append(time.perf_counter() - t0)
                    acc_rep = np.asarray(acc_rep, dtype=np.bool_)
                    if acc_rep.shape != (n,):
                        raise ValueError(f"filter {name!r} returned {acc_rep.shape} decisions for {n} pairs")
                    if rep == 0:
                        accept = acc_rep
                    elif not np.array_equal(acc_rep, accept):
                        raise RuntimeError(f"filter {name!r} is not deterministic at E={e}")
                secs = float(np.median(times))
                truth = (dist >= 0) & (dist <= e)
                t_acc = int((truth & defined).sum())
                t_rej = int((~truth & defined).sum())
                f_acc = int((accept & defined).sum())
                f_rej = int((~accept & defined).sum())
                fa = int((accept & ~truth & defined).sum())
                fr = int((~accept & truth & defined).sum())
                tr = int((~accept & ~truth & defined).sum())
                rows.append({
                    "filter": name, "read_length": length, "threshold": e, "pairs": n,
                    "undefined": int(undef.sum()), "edlib_accepted": t_acc, "edlib_rejected": t_rej,
                    "filter_accepted": f_acc, "filter_rejected": f_rej, "false_accepts": fa,
                    "false_rejects": fr, "false_accept_rate": _rate(fa, t_rej),
                    "true_reject_rate": _rate(tr, t_rej), "filter_seconds": secs,
                    "throughput_pairs_per_s": n / secs if secs > 0 else float("inf"),
                    "undefined_accepted": int((accept & undef).sum()),
                })
    return rows


def write_csv(rows, path):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) and k.endswith("rate") else
                            f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def _fmt_rate(x):
    return "–" if math.isnan(x) else f"{x:.2f}"


def _comparison(rows, length):
    """Lines of the S.7-style table for one read length: thresholds x filters, false accepts (rate)."""
    sel = [r for r in rows if r["read_length"] == length]
    names = list(dict.fromkeys(r["filter"] for r in sel))
    by = {(r["filter"], r["threshold"]): r for r in sel}
    ths = sorted({r["threshold"] for r in sel})
    lines = ["| E | Edlib accepted | Edlib rejected | " + " | ".join(names) + " |",
             "|---:|---:|---:|" + "---:|" * len(names)]
    for e in ths:
        first = next(by[(n, e)] for n in names if (n, e) in by)
        cells = []
        for n in names:
            r = by.get((n, e))
            cells.append("" if r is None else
                         f"{r['false_accepts']:,} ({_fmt_rate(r['false_accept_rate'])}%)"
                         + (f" **FR {r['false_rejects']:,}**" if r["false_rejects"] else ""))
        lines.append(f"| {e} | {first['edlib_accepted']:,} | {first['edlib_rejected']:,} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    fr = {n: sum(r["false_rejects"] for r in sel if r["filter"] == n) for n in names}
    lines.append("False rejects over all thresholds: "
                 + ", ".join(f"{n} {v:,}" for n, v in fr.items()) + ".")
    und = {n: [r["undefined_accepted"] for r in sel if r["filter"] == n] for n in names}
    lines.append("Undefined pairs accepted by the filter (not in the counts above; the paper adds them to "
                 "GateKeeper-GPU's false accepts in tables S.7-S.12): "
                 + ", ".join(f"{n} {min(v):,}" + (f"-{max(v):,}" if max(v) != min(v) else "")
                             for n, v in und.items()) + ".")
    return lines


def write_markdown(rows, path, skipped, title=None):
    lines = ["# Pre-alignment filter evaluation (ground truth: Edlib global distance)"
             + (f": {title}" if title else ""), ""]
    if skipped:
        lines.append("Skipped filters: " + "; ".join(f"`{n}` ({why})" for n, why in skipped.items()))
        lines.append("")
    for length in dict.fromkeys(r["read_length"] for r in rows):
        r0 = next(r for r in rows if r["read_length"] == length)
        lines.append(f"## False accepts by filter, {length} bp: {r0['pairs']:,} pairs, "
                     f"{r0['undefined']:,} undefined (excluded from the counts)")
        lines.append("")
        lines.append("Each cell: false accepts (false accept rate = false accepts / Edlib rejects); "
                     "a false reject would be marked **FR n**.")
        lines.append("")
        lines.extend(_comparison(rows, length))
        lines.append("")
    keys = []
    for r in rows:
        if (r["filter"], r["read_length"]) not in keys:
            keys.append((r["filter"], r["read_length"]))
    for name, length in keys:
        sel = [r for r in rows if r["filter"] == name and r["read_length"] == length]
        lines.append(f"## {name}, {length} bp: {sel[0]['pairs']:,} pairs, {sel[0]['undefined']:,} undefined "
                     "(excluded from the counts)")
        lines.append("")
        lines.append("| Error threshold | Edlib accepted | Edlib rejected | Filter accepted "
                     "| Filter rejected "
                     "| False accepts | False rejects | False accept rate (%) | True reject rate (%) "
                     "| Throughput (pairs/s) |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in sel:
            lines.append(f"| {r['threshold']} | {r['edlib_accepted']:,} | {r['edlib_rejected']:,} "
                         f"| {r['filter_accepted']:,} | {r['filter_rejected']:,} | {r['false_accepts']:,} "
                         f"| {r['false_rejects']:,} | {_fmt_rate(r['false_accept_rate'])} "
                         f"| {_fmt_rate(r['true_reject_rate'])} | {r['throughput_pairs_per_s']:,.0f} |")
        lines.append("")
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


def plot_false_accepts(rows, path, title=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = sorted({r["read_length"] for r in rows})
    fig, axes = plt.subplots(1, max(1, len(lengths)), figsize=(5.5 * max(1, len(lengths)), 4), squeeze=False)
    for ax, length in zip(axes[0], lengths):
        for name in dict.fromkeys(r["filter"] for r in rows):
            sel = [r for r in rows if r["filter"] == name and r["read_length"] == length]
            if sel:
                ax.plot([r["threshold"] for r in sel], [r["false_accepts"] for r in sel],
                        marker="o", markersize=3, label=name)
        r0 = next(r for r in rows if r["read_length"] == length)
        ax.set_title((f"{title}: " if title else "") + f"false accepts, {length} bp\n"
                     f"({r0['pairs']:,} pairs, {r0['undefined']:,} undefined excluded)", fontsize=10)
        ax.set_xlabel("Error threshold E")
        ax.set_ylabel("False accepts (vs Edlib)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_filter_spec(spec):
    """'name' or 'name:key=value[:key=value...]' -> (name, {key: value})."""
    from pymap.plugins import parse_options
    name, *items = [x.strip() for x in spec.split(":")]
    return name, parse_options(items)


def load_filters(specs, options, log):
    """{label: filter} for entries 'name[:key=value...]' (the entry is the label); options[name]
    (from --opt) applies to every entry of that plugin, under the entry's own options."""
    from pymap.plugins import create
    filters, skipped = {}, {}
    for spec in specs:
        try:
            name, own = parse_filter_spec(spec)
            filters[spec] = create("filter", name, **{**options.get(name, {}), **own})
        except Exception as exc:  # noqa: BLE001 -- a broken/missing plugin is reported and skipped
            skipped[spec] = f"{type(exc).__name__}: {exc}".strip()
            log(f"skipping filter {spec!r}: {skipped[spec]}")
    return filters, skipped


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pairs", nargs="+", help="pair files: read<TAB>reference per line")
    p.add_argument("--filters", default=DEFAULT_FILTERS,
                   help=f"comma-separated filter entries NAME[:KEY=VALUE...] ({DEFAULT_FILTERS}), e.g. "
                        "gatekeeper-gpu,gatekeeper-gpu:ends=full")
    p.add_argument("--thresholds", default=None,
                   help="comma-separated thresholds (default 0..10%% of each read length)")
    p.add_argument("--out", default="eval_filters_out", help="output directory")
    p.add_argument("--threads", type=int, default=None, help="Numba threads for CPU filters")
    p.add_argument("--opt", action="append", default=[], metavar="FILTER:KEY=VALUE",
                   help="filter option, e.g. shouji:window=4 (repeatable)")
    p.add_argument("--repeat", type=int, default=1,
                   help="time each filter call N times and report the median (default 1)")
    p.add_argument("--name", default=None, help="data set name for the Markdown and plot titles")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr))
    from pymap.plugins import parse_options
    names = list(dict.fromkeys(n.strip() for n in args.filters.split(",") if n.strip()))
    options = {}
    for item in args.opt:
        fname, _, kv = item.partition(":")
        options.setdefault(fname, {}).update(parse_options([kv]))
    explicit = None
    if args.thresholds:
        explicit = sorted({int(t) for t in args.thresholds.split(",") if t.strip()})
        if explicit[0] < 0:
            raise SystemExit("thresholds must be >= 0")
    if args.threads:
        import numba
        numba.set_num_threads(args.threads)

    groups = read_pairs(args.pairs)
    if not groups:
        raise SystemExit("no pairs in the input")
    filters, skipped = load_filters(names, options, log)
    rows = evaluate(groups, filters, explicit, log, args.repeat)
    for flt in filters.values():
        flt.close()

    os.makedirs(args.out, exist_ok=True)
    write_csv(rows, os.path.join(args.out, "results.csv"))
    write_markdown(rows, os.path.join(args.out, "results.md"), skipped, args.name)
    if rows:
        try:
            plot_false_accepts(rows, os.path.join(args.out, "false_accepts.png"), args.name)
        except ImportError as exc:
            log(f"no plot: {exc}")
    log(f"wrote {args.out}/results.csv, results.md, false_accepts.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
