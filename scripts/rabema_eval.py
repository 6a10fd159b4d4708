#!/usr/bin/env python3
"""RABEMA evaluation: how many of the locations within e errors does each mapper report?

For every error rate e (percent of the read length, default 3 and 5):

1. gold standard: a full-sensitivity RazerS 3 run
   ``razers3 -rr 100 -i (100-e) -m 1000000 -ds`` (all locations within e edits, alignments not
   shrunk), sorted by name, ``rabema_prepare_sam`` (fills in '*' sequences), sorted by coordinate,
   then ``rabema_build_gold_standard --max-error e --distance-metric edit``;
2. each mapper's SAM: ``pymap align --all -e E`` (all locations within e; E = floor(e * L / 100)
   edits as RABEMA counts them when all reads have length L, else the fraction e/100), ``razers3 -i (100-e)``
   (its defaults otherwise), and optionally ``bwa mem -a``, ``bowtie2 -k 100``, ``minimap2 -ax sr -N 100``;
   each is name-sorted (samtools sort -n), passed through rabema_prepare_sam, and evaluated with
   ``rabema_evaluate --max-error e --distance-metric edit --benchmark-category C
   --show-missed-intervals`` for C in all-best and all (``--categories``). ``--pymap-variant
   LABEL=ARGS`` adds pymap runs with other options (e.g. ``step3=--seeder-opt step=3``), labelled
   ``pymap.LABEL``.

Reported per mapper / category / e: intervals to find and found (%), normalized intervals found (%)
(each read counts 1, split equally over its intervals: the RABEMA sensitivity), invalid alignments
(hits with more than e errors), additional hits (valid hits missing from the gold standard: should be
0; soft-clipping local aligners can produce a few) and mapped reads (% of mappable). The missed
intervals (read, distance, contig, strand, first and last end position in RABEMA's coordinates,
reverse-strand ones counted from the contig end) go to ``LABEL_eE.CATEGORY.missed.tsv``.

    python scripts/rabema_eval.py --ref /tmp/data/ecoli.fa --reads /tmp/data/r100.fq --n-reads 10000 \\
        --errors 3,5 --mappers razers3,pymap --workdir /tmp/eval/rabema --md /tmp/eval/results/rabema.md
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_mapping  # noqa: E402
import simulate  # noqa: E402

CATEGORIES = ("all-best", "all")
KNOWN = ("razers3", "pymap", "bwa", "bowtie2", "minimap2")


def sh(cmd, log, stdout=None, check=True):
    with open(log, "a") as lf:
        lf.write("# " + " ".join(shlex.quote(str(c)) for c in cmd) + "\n")
        lf.flush()
        out = open(stdout, "wb") if stdout else lf
        try:
            r = subprocess.run([str(c) for c in cmd], stdout=out, stderr=lf)
        finally:
            if stdout:
                out.close()
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed (exit {r.returncode}); see {log}")
    return r.returncode


def subset_reads(src, dst, n, lengths=None):
    """First ``n`` records of a FASTQ (all when n is 0). Returns the count; the set of read lengths
    is added to ``lengths`` when given."""
    count = 0
    with simulate.open_text(src) as fin, open(dst + ".tmp", "w") as fout:
        while not n or count < n:
            rec = [fin.readline() for _ in range(4)]
            if not rec[0]:
                break
            rec[0] = "@" + simulate.strip_mate(rec[0][1:].rstrip("\n")) + "\n"
            if lengths is not None:
                lengths.add(len(rec[1].rstrip("\n")))
            fout.write("".join(rec))
            count += 1
    os.replace(dst + ".tmp", dst)
    return count


def max_errors(e, read_len):
    """RABEMA's error count for e % of a read of read_len bases: floor(e * L / 100) (RazerS 3 and
    rabema_build_gold_standard round down; pymap's fractional -e rounds to nearest, so 3 % of 150 bp
    would be 5 edits in pymap but 4 in the gold standard)."""
    return int(e * read_len // 100)


def mapper_command(mapper, e, ref_fa, reads, out_sam, threads, pymap_args="", razers3_args="", pymap_index=None,
                   read_len=None, pymap_cmd="pymap"):
    """(argv, stdout path or None) of one mapper run. pymap gets -e as a count (floor(e * read_len / 100),
    as RABEMA) when the reads have one length, else the fraction e / 100."""
    if mapper == "pymap":
        e_arg = str(max_errors(e, read_len)) if read_len else f"{e / 100:g}"
        cmd = shlex.split(pymap_cmd) + ["align", ref_fa, reads, "--all", "-e", e_arg, "-t", threads, "-o", out_sam,
                                        "--no-progress"]
        if pymap_index:
            cmd += ["--index", pymap_index]
        return cmd + shlex.split(pymap_args), None
    if mapper == "razers3":
        return ([simulate.tool("razers3"), "-i", f"{100 - e:g}", "-tc", threads] + shlex.split(razers3_args)
                + ["-o", out_sam, ref_fa, reads], None)
    if mapper == "bwa":
        return ["bwa", "mem", "-a", "-t", threads, ref_fa, reads], out_sam
    if mapper == "bowtie2":
        return ["bowtie2", "-k", "100", "-p", threads, "-x", ref_fa + ".bt2", "-U", reads, "-S", out_sam], None
    if mapper == "minimap2":
        return ["minimap2", "-ax", "sr", "-N", "100", "-t", threads, "-o", out_sam, ref_fa, reads], None
    raise ValueError(f"unknown mapper {mapper!r} (known: {', '.join(KNOWN)})")


def build_gold(ref_fa, reads, e, wd, threads, gold_args=""):
    """Full-sensitivity RazerS 3 run at e % and the RABEMA gold standard built from it. Returns
    (gsi path, info dict)."""
    log = os.path.join(wd, f"gold_e{e}.log")
    raw = os.path.join(wd, f"gold_e{e}.sam")
    t0 = time.time()
    cmd = [simulate.tool("razers3"), "-rr", "100", "-i", f"{100 - e:g}", "-m", "1000000", "-ds", "-tc", threads] \
        + shlex.split(gold_args) + ["-o", raw, ref_fa, reads]
    tres = bench_mapping.timed(cmd, log_path=log + ".razers3")
    if not tres["ok"]:
        raise RuntimeError(f"gold razers3 failed; see {log}.razers3")
    byname = os.path.join(wd, f"gold_e{e}.byname.sam")
    prep = os.path.join(wd, f"gold_e{e}.prep.sam")
    bycoord = os.path.join(wd, f"gold_e{e}.bycoord.bam")
    gsi = os.path.join(wd, f"gold_e{e}.gsi")
    sh(["samtools", "sort", "-n", "-o", byname, raw], log)
    sh([simulate.tool("rabema_prepare_sam"), "-i", byname, "-o", prep], log)
    sh(["samtools", "sort", "-o", bycoord, prep], log)
    sh([simulate.tool("rabema_build_gold_standard"), "--max-error", str(e), "--distance-metric", "edit",
        "-o", gsi, "-r", ref_fa, "-b", bycoord], log)
    n_records = int(subprocess.run(["samtools", "view", "-c", raw], capture_output=True, text=True).stdout or 0)
    for p in (byname, prep):
        os.remove(p)
    return gsi, dict(cmd=tres["cmd"], razers3_wall_s=tres["wall_s"], razers3_rss_mib=(tres["max_rss_kb"] or 0) / 1024,
                     records=n_records, seconds=round(time.time() - t0, 2))


_FIELDS = {
    "intervals_to_find": r"Intervals to find:\s+(\S+)",
    "intervals_found": r"Intervals found:\s+(\S+)",
    "intervals_found_pct": r"Intervals found \[%\]\s+(\S+)",
    "invalid": r"Invalid alignments:\s+(\S+)",
    "additional": r"Additional Hits:\s+(\S+)",
    "reads": r"Number of reads:\s+(\S+)",
    "reads_with_intervals": r"Number of reads with intervals:\s+(\S+)",
    "mapped_reads": r"Mapped reads:\s+(\S+)",
    "mapped_pct_total": r"Mapped reads \[% of total\]:\s+(\S+)",
    "mapped_pct_mappable": r"Mapped reads \[% of mappable\]:\s+(\S+)",
    "normalized_found": r"Normalized intervals found:\s+(\S+)",
    "normalized_found_pct": r"Normalized intervals found \[%\]:\s+(\S+)",
}


def parse_rabema_report(text):
    """Key figures of rabema_evaluate's stdout report (numbers as float; missing as None)."""
    out = {}
    for key, pat in _FIELDS.items():
        m = re.search(pat, text)
        if m:
            try:
                out[key] = float(m.group(1))
            except ValueError:
                out[key] = None
        else:
            out[key] = None
    return out


def evaluate(ref_fa, gsi, sam, e, category, wd, label):
    """name-sort + rabema_prepare_sam + rabema_evaluate; returns the parsed report."""
    base = os.path.join(wd, f"{label}_e{e}")
    byname, prep = base + ".byname.sam", base + ".prep.sam"
    log = base + ".prepare.log"
    if not os.path.exists(prep) or os.path.getmtime(prep) < os.path.getmtime(sam):
        sh(["samtools", "sort", "-n", "-o", byname, sam], log)
        sh([simulate.tool("rabema_prepare_sam"), "-i", byname, "-o", prep], log)
        os.remove(byname)
    out_log = f"{base}.{category}.rabema.log"
    tsv = f"{base}.{category}.rabema_report_tsv"
    if os.path.exists(out_log):
        os.remove(out_log)
    rc = sh([simulate.tool("rabema_evaluate"), "--max-error", str(e), "--distance-metric", "edit",
             "--benchmark-category", category, "--DONT-PANIC", "--show-missed-intervals", "-r", ref_fa, "-g", gsi,
             "-b", prep, "--out-tsv", tsv], out_log, check=False)
    with open(out_log) as fh:
        text = fh.read()
    res = parse_rabema_report(text)
    missed = parse_missed(text)
    missed_path = f"{base}.{category}.missed.tsv"
    with open(missed_path, "w") as fh:
        fh.write("#read\tdistance\tcontig\tstrand\tfirst\tlast\n")
        for m in missed:
            fh.write("\t".join(m) + "\n")
    res.update(returncode=rc, log=out_log, missed_intervals=len(missed),
               missed_reads=len({m[0] for m in missed}), missed_tsv=missed_path)
    return res


_MISSED = re.compile(r"MISSED\t(\S+)\t(\d+)\t(\S+)\t([FR])\t(\d+)\t(\d+)")


def parse_missed(text):
    """(read, distance, contig, strand, first, last) of every interval rabema_evaluate
    --show-missed-intervals reports as missed (the lines may share a line with progress dots)."""
    return _MISSED.findall(text)


def parse_variant(spec):
    """'LABEL=ARGS' -> (label, env dict, extra pymap args): leading NAME=VALUE tokens of ARGS whose
    NAME is upper case are environment variables for the run, the rest are pymap align arguments."""
    label, eq, args = spec.partition("=")
    if not eq or not label or not re.fullmatch(r"[\w.+-]+", label):
        raise ValueError(f"--pymap-variant {spec!r}: expected LABEL=ARGS, LABEL of letters, digits, _.+-")
    toks = shlex.split(args)
    env = {}
    while toks and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", toks[0]):
        k, _, v = toks.pop(0).partition("=")
        env[k] = v
    return label, env, toks


def run(ref, reads, workdir, errors=(3, 5), mappers=("razers3", "pymap"), categories=CATEGORIES, threads=2,
        n_reads=0, pymap_args="", razers3_args="", gold_args="", pymap_variants=(), pymap_cmd="pymap"):
    os.makedirs(workdir, exist_ok=True)
    ref_fa = os.path.join(workdir, "ref.fa")
    simulate.prepare_reference(ref, ref_fa)
    sub = os.path.join(workdir, "reads.fq")
    lengths = set()
    n = subset_reads(reads, sub, n_reads, lengths)
    read_len = lengths.pop() if len(lengths) == 1 else None
    threads = str(threads)
    variants = [parse_variant(v) for v in pymap_variants]
    idx_log = os.path.join(workdir, "index.log")
    pymap_index = None
    if "pymap" in mappers or variants:
        pymap_index = os.path.join(workdir, "ref.pymap.idx")
        if not os.path.exists(pymap_index) or os.path.getmtime(pymap_index) < os.path.getmtime(ref_fa):
            if sh(["pymap", "index", ref_fa, "-o", pymap_index, "-t", threads], idx_log, check=False):
                print(f"[rabema] pymap index failed; see {idx_log}", file=sys.stderr)
    if "bwa" in mappers and not os.path.exists(ref_fa + ".bwt"):
        sh(["bwa", "index", ref_fa], idx_log)
    if "bowtie2" in mappers and not os.path.exists(ref_fa + ".bt2.1.bt2"):
        sh(["bowtie2-build", "--threads", threads, "-q", ref_fa, ref_fa + ".bt2"], idx_log)
    report = dict(ref=ref, reads=reads, n_reads=n, read_len=read_len, errors=list(errors),
                  categories=list(categories), mappers=list(mappers), threads=int(threads), gold={}, results=[],
                  pymap_args=pymap_args, pymap_variants=list(pymap_variants))
    runs = [(m, m, None, "") for m in mappers]
    for label, env, args in variants:
        runs.append((f"pymap.{label}", "pymap", env, " ".join(shlex.quote(a) for a in args)))
    for e in errors:
        print(f"[rabema] e={e}%: gold standard", file=sys.stderr, flush=True)
        gsi, ginfo = build_gold(ref_fa, sub, e, workdir, threads, gold_args)
        report["gold"][str(e)] = ginfo
        for m, kind, env, extra in runs:
            sam = os.path.join(workdir, f"{m}_e{e}.sam")
            args = pymap_args + (" " + extra if extra else "")
            cmd, stdout = mapper_command(kind, e, ref_fa, sub, sam, threads, args, razers3_args, pymap_index,
                                         read_len, pymap_cmd)
            env_full = dict(os.environ, **env) if env else None
            envs = " ".join(f"{k}={v}" for k, v in (env or {}).items())
            print(f"[rabema] e={e}%: {m}: {envs + ' ' if envs else ''}{' '.join(map(str, cmd))}", file=sys.stderr,
                  flush=True)
            t = bench_mapping.timed(cmd, stdout_path=stdout, log_path=os.path.join(workdir, f"{m}_e{e}.log"),
                                    env=env_full)
            for cat in categories:
                row = dict(mapper=m, e=e, category=cat, cmd=(envs + " " if envs else "") + t["cmd"],
                           wall_s=t["wall_s"], cpu_s=t.get("cpu_s"), rss_mib=(t["max_rss_kb"] or 0) / 1024,
                           ok=t["ok"])
                if t["ok"]:
                    row.update(evaluate(ref_fa, gsi, sam, e, cat, workdir, m))
                else:
                    row.update(returncode=t["returncode"], log=t["log"])
                report["results"].append(row)
                print(f"[rabema]   {cat}: normalized found {row.get('normalized_found_pct')} %", file=sys.stderr)
    return report


def _n(x, fmt="{:.0f}"):
    return "-" if x is None else fmt.format(x)


def markdown(report, title=None):
    rl = report.get("read_len")
    out = [f"## {title or 'RABEMA evaluation'}", "",
           f"{report['n_reads']} reads ({report['reads']}{f', {rl} bp' if rl else ''}), reference {report['ref']}, "
           f"edit distance, threads {report['threads']}. Gold standard: full-sensitivity RazerS 3 per e"
           + (f" (e % of {rl} bp = " + ", ".join(f"{e} % -> {max_errors(e, rl)}" for e in report["errors"])
              + " edits)" if rl else "") + ".", ""]
    if report.get("pymap_args"):
        out += [f"pymap extra arguments: `{report['pymap_args']}`", ""]
    for v in report.get("pymap_variants") or ():
        out.append(f"* variant `pymap.{v.partition('=')[0]}`: `{v.partition('=')[2]}`")
    if report.get("pymap_variants"):
        out.append("")
    out += ["| e % | gold razers3 records | gold razers3 s |", "| ---: | ---: | ---: |"]
    for e, g in report["gold"].items():
        out.append(f"| {e} | {g['records']} | {g['razers3_wall_s']:.1f} |")
    out += ["", "| mapper | category | e % | intervals found % | normalized found % (sensitivity) | "
            "intervals to find | missed intervals | missed reads | invalid | additional | mapped % of mappable | "
            "map wall s | map CPU s |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in report["results"]:
        if not r.get("ok"):
            out.append(f"| {r['mapper']} | {r['category']} | {r['e']} | FAILED (exit {r.get('returncode')}, "
                       f"{r.get('log')}) | | | | | | | | | |")
            continue
        out.append(f"| {r['mapper']} | {r['category']} | {r['e']} | {_n(r['intervals_found_pct'], '{:.3f}')} | "
                   f"{_n(r['normalized_found_pct'], '{:.3f}')} | {_n(r['intervals_to_find'])} | "
                   f"{_n(r.get('missed_intervals'))} | {_n(r.get('missed_reads'))} | {_n(r['invalid'])} | "
                   f"{_n(r['additional'])} | {_n(r['mapped_pct_mappable'], '{:.2f}')} | {r['wall_s']:.2f} | "
                   f"{_n(r.get('cpu_s'), '{:.2f}')} |")
    out.append("")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--reads", help="FASTQ reads (the first --n-reads are used)")
    ap.add_argument("--simulate", metavar="L,PROFILE,N", help="simulate reads with simulate.py instead")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n-reads", type=int, default=10000, help="reads to use (0 = all; default %(default)s)")
    ap.add_argument("--errors", default="3,5", help="error rates in percent of read length (default %(default)s)")
    ap.add_argument("--mappers", default="razers3,pymap", help=f"comma list from {','.join(KNOWN)}")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help="all-best,all,any-best")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--pymap-args", default="", help="extra arguments for every pymap run")
    ap.add_argument("--pymap-variant", action="append", default=[], metavar="LABEL=ARGS",
                    help="an extra pymap run labelled pymap.LABEL with these extra arguments (repeatable); "
                         "leading NAME=VALUE tokens (upper-case NAME) are set in its environment, e.g. "
                         "'step3=--seeder-opt step=3' or 'nofilter=--filter none'")
    ap.add_argument("--pymap-cmd", default="pymap", help="the pymap command (default %(default)s)")
    ap.add_argument("--razers3-args", default="", help="extra razers3 arguments for the evaluated run")
    ap.add_argument("--gold-args", default="", help="extra razers3 arguments for the gold-standard run")
    ap.add_argument("--workdir", default="/tmp/eval/rabema")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--title")
    a = ap.parse_args(argv)
    mappers = [m for m in a.mappers.split(",") if m]
    for m in mappers:
        if m not in KNOWN:
            ap.error(f"unknown mapper {m!r}")
    reads = a.reads
    if a.simulate:
        length, profile, n = a.simulate.split(",")
        info = simulate.simulate(a.ref, os.path.join(a.workdir, "sim"), int(length), profile, int(n), a.seed)
        reads = info["reads"]
    if not reads:
        ap.error("give --reads or --simulate")
    errors = [int(x) for x in a.errors.split(",")]
    report = run(a.ref, reads, a.workdir, errors, mappers, a.categories.split(","), a.threads, a.n_reads,
                 a.pymap_args, a.razers3_args, a.gold_args, a.pymap_variant, a.pymap_cmd)
    md = markdown(report, a.title)
    print(md)
    if a.md:
        os.makedirs(os.path.dirname(os.path.abspath(a.md)), exist_ok=True)
        with open(a.md, "w") as fh:
            fh.write(md)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0 if all(r.get("ok") for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
