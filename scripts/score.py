#!/usr/bin/env python3
"""mapeval: score SAM/BAM mappings of simulated reads against their truth.

A read is *correct* when its PRIMARY alignment is on the true contig and strand and its leftmost
reference position is within ``--tolerance`` bp (default 10) of the true leftmost position. The
position compared is the alignment start, or the start extended over a leading soft/hard clip
(the "unclipped start"), whichever is closer: a local aligner that clips a noisy read end has still
placed the read right. Secondary (0x100) and supplementary (0x800) records are ignored.

Per mapper: reads (simulated), mapped, correct, wrong, unmapped, sensitivity = correct / reads,
precision = correct / mapped, *ties* (wrong reads placed as well as the truth: no clipping and NM at
most the true edit distance, i.e. another copy of a repeat that no mapper can tell apart; needs the
true NM of the TSV), optimal = (correct + ties) / reads, and, like minimap2's ``paftools.js mapeval``, for MAPQ thresholds
60, 30, 20, 10, 1, 0 the cumulative number of primary alignments with MAPQ >= q, the wrong ones
among them and the wrong rate. Every simulated read must appear exactly once as primary or
unmapped: reads that are missing, duplicated or unknown are reported as violations.

    python scripts/score.py --truth truth.tsv bwa=bwa.sam minimap2=mm2.bam --md out.md --plot out.png

The truth is the TSV of scripts/simulate.py (name contig pos strand nm) or Mason's ``-oa`` SAM.
"""
import argparse
import json
import os
import sys

MAPQ_THRESHOLDS = (60, 30, 20, 10, 1, 0)


# ------------------------------------------------------------------ truth

def _strip_mate(name):
    if len(name) > 2 and name[-2] == "/" and name[-1] in "12":
        return name[:-2]
    return name


def load_truth(path):
    """{read name: (contig, pos1, strand, nm)}. ``path`` is a truth TSV (from simulate.py) or a SAM/BAM
    of true alignments (Mason -oa). Contig '*' marks a read with no true location."""
    if _is_alignment_file(path):
        return _truth_from_sam(path)
    truth = {}
    opener = _open_text(path)
    with opener as fh:
        for ln, line in enumerate(fh, 1):
            if not line.strip() or line.startswith("#"):
                continue
            f = line.rstrip("\n").split("\t")
            if len(f) < 4:
                raise ValueError(f"{path}:{ln}: expected name contig pos strand [nm]")
            nm = int(f[4]) if len(f) > 4 and f[4] not in ("", ".") else -1
            truth[_strip_mate(f[0].split()[0])] = (f[1], int(f[2]), f[3], nm)
    return truth


def _open_text(path):
    import gzip
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rt") if magic == b"\x1f\x8b" else open(path, "rt")


def _is_alignment_file(path):
    low = path.lower()
    if low.endswith((".sam", ".bam", ".cram", ".sam.gz")):
        return True
    with _open_text(path) as fh:
        first = fh.readline()
    return first.startswith("@HD") or first.startswith("@SQ")


def _truth_from_sam(path):
    import pysam
    truth = {}
    with pysam.AlignmentFile(path, check_sq=False) as sam:
        for r in sam:
            if r.is_secondary or r.is_supplementary:
                continue
            nm = r.get_tag("NM") if r.has_tag("NM") else -1
            if r.is_unmapped:
                truth[_strip_mate(r.query_name)] = ("*", 0, "*", nm)
            else:
                truth[_strip_mate(r.query_name)] = (r.reference_name, r.reference_start + 1,
                                                    "-" if r.is_reverse else "+", nm)
    return truth


# ------------------------------------------------------------------ scoring

def is_correct(truth_rec, contig, start1, unclipped1, strand, tolerance):
    """True when an alignment (contig, 1-based start, 1-based unclipped start, strand) matches truth."""
    t_contig, t_pos, t_strand, _ = truth_rec
    if t_contig == "*" or contig != t_contig or strand != t_strand:
        return False
    return min(abs(start1 - t_pos), abs(unclipped1 - t_pos)) <= tolerance


def _unclipped_start(r):
    """1-based reference position of the first read base, counting leading clips."""
    clip = 0
    for op, n in r.cigartuples or ():
        if op in (4, 5):  # S, H
            clip += n
        else:
            break
    return r.reference_start + 1 - clip


def score_sam(truth, path, tolerance=10, label=None, keep_wrong=0):
    """Score one SAM/BAM against ``truth`` (from load_truth). Returns a dict of counts (see module
    doc); ``mapq_hist`` / ``wrong_hist`` are 256-long lists of primary mapped / wrong counts per
    MAPQ. ``keep_wrong`` > 0 keeps that many examples of wrong reads."""
    import pysam
    seen = {}
    mapq_hist = [0] * 256
    wrong_hist = [0] * 256
    mapped = correct = unmapped = secondary = supplementary = ties = 0
    duplicates = unknown = 0
    dup_examples, unknown_examples, wrong_examples = [], [], []
    save = pysam.set_verbosity(0)
    try:
        sam = pysam.AlignmentFile(path, check_sq=False)
    finally:
        pysam.set_verbosity(save)
    with sam:
        for r in sam:
            flag = r.flag
            if flag & 0x100:
                secondary += 1
                continue
            if flag & 0x800:
                supplementary += 1
                continue
            name = _strip_mate(r.query_name)
            t = truth.get(name)
            if t is None:
                unknown += 1
                if len(unknown_examples) < 5:
                    unknown_examples.append(name)
                continue
            if name in seen:
                duplicates += 1
                if len(dup_examples) < 5:
                    dup_examples.append(name)
                continue
            if flag & 4:
                seen[name] = 0
                unmapped += 1
                continue
            seen[name] = 1
            mapped += 1
            q = min(max(r.mapping_quality, 0), 255)
            mapq_hist[q] += 1
            ok = is_correct(t, r.reference_name, r.reference_start + 1, _unclipped_start(r),
                            "-" if flag & 16 else "+", tolerance)
            if ok:
                correct += 1
            else:
                wrong_hist[q] += 1
                if is_tie(t, r):
                    ties += 1
                if len(wrong_examples) < keep_wrong:
                    wrong_examples.append(dict(name=name, truth=list(t), contig=r.reference_name,
                                               pos=r.reference_start + 1, strand="-" if flag & 16 else "+",
                                               mapq=q, cigar=r.cigarstring))
    n = len(truth)
    missing = n - len(seen)
    missing_examples = []
    if missing:
        for name in truth:
            if name not in seen:
                missing_examples.append(name)
                if len(missing_examples) >= 5:
                    break
    wrong = mapped - correct
    res = dict(label=label or os.path.basename(path), path=path, tolerance=tolerance, reads=n, mapped=mapped,
               correct=correct, wrong=wrong, unmapped=unmapped, missing=missing, ties=ties,
               optimal=_div(correct + ties, n), sensitivity=_div(correct, n), precision=_div(correct, mapped), mapped_frac=_div(mapped, n),
               secondary_records=secondary, supplementary_records=supplementary,
               violations=dict(missing=missing, duplicate_primary=duplicates, unknown_reads=unknown,
                               missing_examples=missing_examples, duplicate_examples=dup_examples,
                               unknown_examples=unknown_examples),
               mapq_hist=mapq_hist, wrong_hist=wrong_hist)
    res["mapq_table"] = mapq_table(mapq_hist, wrong_hist, n)
    if keep_wrong:
        res["wrong_examples"] = wrong_examples
    return res


def is_tie(truth_rec, r):
    """A wrong placement that is as good as the truth: unclipped, with an NM tag no larger than the
    true edit distance (unknown true NM: never a tie)."""
    nm_true = truth_rec[3]
    if nm_true < 0 or not r.has_tag("NM") or any(op in (4, 5) for op, _ in (r.cigartuples or ())):
        return False
    return r.get_tag("NM") <= nm_true


def _div(a, b):
    return a / b if b else 0.0


def mapq_table(mapq_hist, wrong_hist, n_reads, thresholds=MAPQ_THRESHOLDS):
    """Cumulative rows {q, mapped, wrong, wrong_rate, mapped_frac} for MAPQ >= q, q descending."""
    rows = []
    for q in sorted(thresholds, reverse=True):
        m = sum(mapq_hist[q:])
        w = sum(wrong_hist[q:])
        rows.append(dict(q=q, mapped=m, wrong=w, wrong_rate=_div(w, m), mapped_frac=_div(m, n_reads)))
    return rows


def violations_total(res):
    v = res["violations"]
    return v["missing"] + v["duplicate_primary"] + v["unknown_reads"]


def row_at(res, q):
    for row in res["mapq_table"]:
        if row["q"] == q:
            return row
    return mapq_table(res["mapq_hist"], res["wrong_hist"], res["reads"], (q,))[0]


# ------------------------------------------------------------------ reports

def _pct(x, digits=2):
    return f"{100 * x:.{digits}f}"


def _rate(x):
    return "0" if x == 0 else f"{x:.2e}"


def summary_table(results):
    """Markdown table: one row per mapper with the read counts, sensitivity, precision, MAPQ>=20."""
    out = ["| mapper | reads | mapped | correct | wrong | ties | unmapped | sensitivity % | optimal % | "
           "precision % | wrong MAPQ>=20 | wrong rate MAPQ>=20 | violations |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        q20 = row_at(r, 20)
        out.append(f"| {r['label']} | {r['reads']} | {r['mapped']} | {r['correct']} | {r['wrong']} | "
                   f"{r.get('ties', 0)} | {r['unmapped']} | {_pct(r['sensitivity'])} | {_pct(r.get('optimal', 0), 3)} | "
                   f"{_pct(r['precision'], 3)} | {q20['wrong']} | "
                   f"{_rate(q20['wrong_rate'])} | {_violations_text(r)} |")
    return "\n".join(out)


def mapq_markdown(results):
    """Markdown table of the cumulative MAPQ rows, mappers side by side (mapped / wrong / rate)."""
    labels = [r["label"] for r in results]
    out = ["Cumulative by MAPQ threshold: primary alignments with MAPQ >= q, as % of reads / wrong / "
           "wrong rate (wrong / mapped at that threshold):", "",
           "| MAPQ >= | " + " | ".join(labels) + " |", "| ---: |" + " ---: |" * len(labels)]
    for i, q in enumerate(MAPQ_THRESHOLDS):
        cells = []
        for r in results:
            row = row_at(r, q)
            cells.append(f"{_pct(row['mapped_frac'])} % / {row['wrong']} / {_rate(row['wrong_rate'])}")
        out.append(f"| {q} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def markdown(results, title=None):
    """Summary table plus the cumulative MAPQ table."""
    out = []
    if title:
        out += [f"## {title}", ""]
    out += [summary_table(results), "", mapq_markdown(results), ""]
    return "\n".join(out)


def _violations_text(r):
    v = r["violations"]
    if not violations_total(r):
        return "0"
    parts = []
    for key, short in (("missing", "missing"), ("duplicate_primary", "dup"), ("unknown_reads", "unknown")):
        if v[key]:
            parts.append(f"{v[key]} {short}")
    return ", ".join(parts)


def mapeval_text(res):
    """paftools.js mapeval-like lines: Q mapped_at_q wrong_at_q cum_mapped cum_wrong cum_rate."""
    lines = []
    cum_m = cum_w = 0
    for q in range(255, -1, -1):
        m, w = res["mapq_hist"][q], res["wrong_hist"][q]
        if not m:
            continue
        cum_m += m
        cum_w += w
        lines.append(f"Q\t{q}\t{m}\t{w}\t{cum_m}\t{cum_w}\t{_div(cum_w, cum_m):.6g}")
    lines.append(f"U\t{res['unmapped'] + res['missing']}")
    return "\n".join(lines)


def curve(res):
    """(mapped fraction, wrong rate, q) as MAPQ falls, one point per MAPQ value present."""
    pts = []
    cum_m = cum_w = 0
    for q in range(255, -1, -1):
        m = res["mapq_hist"][q]
        if not m:
            continue
        cum_m += m
        cum_w += res["wrong_hist"][q]
        pts.append((_div(cum_m, res["reads"]), _div(cum_w, cum_m), q))
    return pts


def plot(results, path, title=None):
    """Wrong-mapping rate (log) against the fraction of reads mapped, as the MAPQ threshold falls.
    A rate of 0 is drawn at 0.5 / reads (below every real point) and marked hollow."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 5))
    for res in results:
        pts = curve(res)
        if not pts:
            continue
        floor = 0.5 / max(res["reads"], 1)
        xs = [p[0] for p in pts]
        ys = [max(p[1], floor) for p in pts]
        line, = ax.plot(xs, ys, "-o", ms=3, label=res["label"])
        zero = [(x, y) for (x, y, p) in zip(xs, ys, pts) if p[1] == 0]
        if zero:
            ax.plot([z[0] for z in zero], [z[1] for z in zero], "o", mfc="white", color=line.get_color(), ms=5)
        for x, y, p in zip(xs, ys, pts):
            if p[2] in MAPQ_THRESHOLDS:
                ax.annotate(str(p[2]), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7,
                            color=line.get_color())
    ax.set_yscale("log")
    ax.set_xlabel("fraction of reads mapped with MAPQ >= threshold")
    ax.set_ylabel("wrong mappings / mapped")
    ax.set_title(title or "mapping error rate as MAPQ threshold falls")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def strip_hist(res):
    """Copy of a result without the 256-long histograms (for compact JSON)."""
    out = dict(res)
    out["mapq_hist"] = {str(q): v for q, v in enumerate(res["mapq_hist"]) if v}
    out["wrong_hist"] = {str(q): v for q, v in enumerate(res["wrong_hist"]) if v}
    return out


def parse_inputs(items):
    out = []
    for item in items:
        if "=" in item and not os.path.exists(item):
            label, path = item.split("=", 1)
        else:
            label, path = os.path.splitext(os.path.basename(item))[0], item
        out.append((label, path))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--truth", required=True, help="truth TSV (simulate.py) or Mason -oa SAM")
    ap.add_argument("alignments", nargs="+", metavar="LABEL=PATH", help="SAM/BAM files, optionally labelled")
    ap.add_argument("--tolerance", type=int, default=10, help="allowed start difference in bp (default 10)")
    ap.add_argument("--md", help="write the Markdown report here")
    ap.add_argument("--json", help="write results as JSON here")
    ap.add_argument("--plot", help="write a PNG of wrong rate against mapped fraction here")
    ap.add_argument("--title", help="heading for the Markdown report and plot")
    ap.add_argument("--mapeval", action="store_true", help="also print paftools mapeval-style Q lines")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any read is missing/duplicated/unknown")
    a = ap.parse_args(argv)
    truth = load_truth(a.truth)
    results = []
    for label, path in parse_inputs(a.alignments):
        res = score_sam(truth, path, a.tolerance, label)
        results.append(res)
        if a.mapeval:
            print(f"# {label}\n{mapeval_text(res)}")
    md = markdown(results, a.title)
    print(md)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(md)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump([strip_hist(r) for r in results], fh, indent=1)
    if a.plot:
        plot(results, a.plot, a.title)
    bad = [r for r in results if violations_total(r)]
    for r in bad:
        v = r["violations"]
        print(f"score: {r['label']}: {v['missing']} reads missing (e.g. {v['missing_examples'][:3]}), "
              f"{v['duplicate_primary']} duplicate primary (e.g. {v['duplicate_examples'][:3]}), "
              f"{v['unknown_reads']} not in truth (e.g. {v['unknown_examples'][:3]})", file=sys.stderr)
    return 1 if (a.strict and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
