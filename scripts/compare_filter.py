"""Does the pre-alignment filter cost a read its best alignment? Maps each read set with pymap's
default pipeline and with `--filter none` (every seeded candidate extended) and compares the
primary alignments read by read.

    python3 scripts/compare_filter.py REF.fa READS.fq [REF2.fa READS2.fq ...] [--pymap-args "..."]

A difference is one of: mapped by one run only; another position/strand/CIGAR with a higher AS
without the filter (the filter lost the better alignment); with an equal AS (a tie broken
differently, e.g. another copy of a repeat); with a lower AS without the filter (the unfiltered
run met more candidates that changed the choice). Every difference is listed with --list.
"""
import argparse
import os
import shlex
import subprocess
import sys
import tempfile

import pysam


def primaries(path):
    out = {}
    with pysam.AlignmentFile(path) as sam:
        for r in sam:
            if r.is_secondary or r.is_supplementary:
                continue
            if r.is_unmapped:
                out[r.query_name] = None
            else:
                out[r.query_name] = (r.reference_name, r.reference_start, r.is_reverse, r.cigarstring,
                                     r.get_tag("AS"), r.mapping_quality)
    return out


def run(ref, reads, out, extra):
    cmd = ["pymap", "align", ref, reads, "-o", out, "--no-progress", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return [l for l in res.stderr.splitlines() if "reads;" in l][-1]


def compare(ref, reads, extra, show):
    with tempfile.TemporaryDirectory() as d:
        a_log = run(ref, reads, os.path.join(d, "a.sam"), extra)
        b_log = run(ref, reads, os.path.join(d, "b.sam"), extra + ["--filter", "none"])
        a, b = primaries(os.path.join(d, "a.sam")), primaries(os.path.join(d, "b.sam"))
    kinds = {"only_default": [], "only_none": [], "better_none": [], "tie": [], "worse_none": []}
    for name, x in a.items():
        y = b[name]
        if x == y:
            continue
        if y is None:
            kinds["only_default"].append((name, x, y))
        elif x is None:
            kinds["only_none"].append((name, x, y))
        elif x[:4] != y[:4]:
            key = "better_none" if y[4] > x[4] else "tie" if y[4] == x[4] else "worse_none"
            kinds[key].append((name, x, y))
    n = len(a)
    diff = sum(len(v) for v in kinds.values())
    print(f"| {os.path.basename(reads)} | {n} | {diff} | " + " | ".join(str(len(v)) for v in kinds.values()) + " |")
    if show:
        for k, v in kinds.items():
            for name, x, y in v:
                print(f"    {k}\t{name}\tdefault={x}\tnone={y}")
    return a_log, b_log


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="REF READS [REF READS ...]")
    ap.add_argument("--pymap-args", default="", help="extra arguments for both runs")
    ap.add_argument("--list", action="store_true", help="list every difference")
    args = ap.parse_args(argv)
    if len(args.pairs) % 2:
        ap.error("give REF READS pairs")
    extra = shlex.split(args.pymap_args)
    print("| reads | n | primaries differing | mapped only with the filter | only without | higher AS "
          "without | equal AS, other place | lower AS without |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    logs = []
    for ref, reads in zip(args.pairs[::2], args.pairs[1::2]):
        logs.append(compare(ref, reads, extra, args.list))
    for a_log, b_log in logs:
        print(f"\ndefault:      {a_log}\nfilter none:  {b_log}")


if __name__ == "__main__":
    main()
