#!/usr/bin/env python
"""Seeders compared: sensitivity, candidates, speed, index size and build time against a simulator's truth.

    python scripts/eval_seeders.py --workdir /tmp/seedeval [--datasets ecoli,synth30,...] [-n 20000]
                                   [--setting LABEL=SEEDER[:key=value...]] ... [--markdown T.md]
                                   [--json ROWS.json] [--plot P.png]

Datasets (simulated into --workdir on first use, Mason with --seed 7; REF/READS/TRUTH can also be given
with --data NAME=REF,READS,TRUTH,E):

    ecoli        E. coli MG1655, Mason 100 bp, default profile (e = 5)
    ecoli-high   the same, mismatch scale 3, insert/deletion 0.001 (e = 5)
    synth30      the 30 Mbp synthetic genome of scripts/make_genome.py, high profile (e = 5)
    divergent    reads from a diverged E. coli (mason_variator: 5 % SNPs, 0.5 % indels of 1-4 bp),
                 default profile, mapped to the original (e = 10)
    divergent10  the same at 10 % SNPs, 1 % indels (e = 15)
    contigs      E. coli cut into 2,039 contigs of 500-4,000 bp (a fragmented assembly), high profile (e = 5)
    strains      40 contigs: strains of one 120 kbp E. coli segment, each with its own 2 % substitutions and
                 0.2 % 1-3 bp indels (about 4 % between two strains; a metagenome-like reference), high
                 profile (e = 5); found = the read's own strain among the candidates

Per setting: found = % of reads (true NM <= e) with a candidate on the true strand within e bases of the
truth's POS (the band the filter and the extender work in); cands = candidates per read (both strands);
us_read = wall time per read with all threads (best of 3); cpu_us_read = CPU time per read of one thread
(best of 3; robust to other jobs on the machine); index MiB and build seconds. Settings are
LABEL=SEEDER:key=value:...; a value list key=a,b expands to one setting per value (several lists: their
product), which also covers scripts/eval_seeding.py's --grid. Seeders that are not installed are skipped
with a note (the `minimizer` seeder of issue 14 is listed and runs once its plugin is registered).
"""
import argparse
import gzip
import itertools
import json
import os
import subprocess
import sys
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_seeding import evaluate, make_batch, read_fastq, read_truth  # noqa: E402

from pymap import plugins  # noqa: E402
from pymap.reference import load_reference  # noqa: E402

MASON = "/usr/lib/seqan/bin"
ECOLI = "/work/shared/data/ecoli_MG1655.fa.gz"
SEED = 7
HIGH = ["--illumina-prob-mismatch-scale", "3.0", "--illumina-prob-insert", "0.001",
        "--illumina-prob-deletion", "0.001"]

#: (label, seeder, options) in table order
SETTINGS = [
    ("neighborhood", "neighborhood", {}),
    ("minhash", "minhash", {}),                                         # k 15, s 16, w 48, stride 34
    ("minhash w=64", "minhash", {"window": 64}),
    ("minhash max_cands=64", "minhash", {"max_cands": 64}),
    ("minhash MetaCache k=16 w=127", "minhash", {"k": 16, "window": 127}),
    # the minimizer seeder (issue 14, another engineer): add its settings here; skipped until installed
    ("minimizer", "minimizer", {}),
]

#: name -> (e, description); how each is made: make_dataset
DATASETS = {
    "ecoli": (5, "E. coli, Mason default profile"),
    "ecoli-high": (5, "E. coli, Mason high profile"),
    "synth30": (5, "30 Mbp synthetic genome, high profile"),
    "divergent": (10, "reads of a 5 % SNP / 0.5 % indel variant of E. coli"),
    "divergent10": (15, "reads of a 10 % SNP / 1 % indel variant of E. coli"),
    "contigs": (5, "E. coli in 500-4,000 bp contigs, high profile"),
    "strains": (5, "40 strains (2 % diverged each) of a 120 kbp segment, high profile"),
}


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def mason(ref, out, n, length, extra=(), variants=None):
    cmd = [os.path.join(MASON, "mason_simulator"), "-ir", ref, "-n", str(n), "--illumina-read-length",
           str(length), "--seed", str(SEED), "-o", out + ".fq", "-oa", out + ".sam", *extra]
    if variants:
        cmd += ["-iv", variants]
    run(cmd)


def plain_ecoli(workdir):
    path = os.path.join(workdir, "ecoli.fa")
    if not os.path.exists(path):
        with gzip.open(ECOLI, "rb") as fh, open(path, "wb") as out:
            out.write(fh.read())
    return path


def fragmented(src, path, seed=SEED, lo=500, hi=4000):
    """src's contigs cut into pieces of lo..hi bases (a fragmented assembly)."""
    ref = load_reference(src)
    rng = np.random.default_rng(seed)
    text = b"ACGTN"
    with open(path, "w") as out:
        for name, a, b in zip(ref.names, ref.offsets[:-1], ref.offsets[1:]):
            p = int(a)
            i = 0
            while p < b:
                q = min(int(b), p + int(rng.integers(lo, hi + 1)))
                seq = bytes(np.frombuffer(text, np.uint8)[ref.codes[p:q]]).decode()
                out.write(f">{name}_{i}\n" + "\n".join(seq[j:j + 80] for j in range(0, len(seq), 80)) + "\n")
                p = q
                i += 1


def strains(src, path, seed=SEED, n=40, start=1_000_000, length=120_000, rate=0.02):
    """n independently mutated copies of src[start:start + length] (substitutions at rate, 1-3 bp indels
    at rate / 10), one contig each."""
    ref = load_reference(src)
    rng = np.random.default_rng(seed)
    seg = ref.codes[start:start + length] % 4
    text = np.frombuffer(b"ACGT", np.uint8)
    with open(path, "w") as out:
        for i in range(n):
            s = seg.copy()
            m = rng.random(s.size) < rate
            s[m] = (s[m] + rng.integers(1, 4, int(m.sum()))) % 4
            pieces = []
            last = 0
            for p in np.sort(rng.choice(s.size, int(s.size * rate / 10), replace=False)).tolist():
                pieces.append(s[last:p])
                size = int(rng.integers(1, 4))
                if rng.random() < 0.5:
                    pieces.append(rng.integers(0, 4, size).astype(np.uint8))
                    last = p
                else:
                    last = p + size
            pieces.append(s[last:])
            seq = bytes(text[np.concatenate(pieces)]).decode()
            out.write(f">strain{i}\n" + "\n".join(seq[j:j + 80] for j in range(0, len(seq), 80)) + "\n")


def make_dataset(name, workdir, n, length, synth30):
    """(ref, reads.fq, truth.sam, e) of a dataset, simulated into workdir unless there already."""
    e = DATASETS[name][0]
    base = os.path.join(workdir, f"{name}_{n}_{length}")
    ecoli = plain_ecoli(workdir)
    ref = ecoli
    if name == "synth30":
        ref = synth30
        if not os.path.exists(ref):
            run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_genome.py"),
                 "--ecoli", ECOLI, "--out", ref])
    elif name == "contigs":
        ref = os.path.join(workdir, "ecoli_contigs.fa")
        if not os.path.exists(ref):
            fragmented(ecoli, ref)
    elif name == "strains":
        ref = os.path.join(workdir, "strains.fa")
        if not os.path.exists(ref):
            strains(ecoli, ref)
    if os.path.exists(base + ".sam"):
        return ref, base + ".fq", base + ".sam", e
    if name == "ecoli":
        mason(ref, base, n, length)
    elif name in ("ecoli-high", "synth30", "contigs", "strains"):
        mason(ref, base, n, length, HIGH)
    elif name in ("divergent", "divergent10"):
        snp, indel = (0.05, 0.005) if name == "divergent" else (0.10, 0.01)
        vcf = os.path.join(workdir, f"{name}.vcf")
        if not os.path.exists(vcf):
            run([os.path.join(MASON, "mason_variator"), "-ir", ref, "-ov", vcf, "-s", str(SEED),
                 "--snp-rate", str(snp), "--small-indel-rate", str(indel), "--max-small-indel-size", "4",
                 "--sv-indel-rate", "0", "--sv-inversion-rate", "0", "--sv-translocation-rate", "0",
                 "--sv-duplication-rate", "0"])
        mason(ref, base, n, length, variants=vcf)
    return ref, base + ".fq", base + ".sam", e


def expand(spec):
    """'LABEL=SEEDER:k=v:k2=a,b' -> [(label, seeder, options)], one per combination of value lists."""
    label, _, rest = spec.partition("=")
    if not rest:
        label, rest = spec.split(":")[0], spec
    seeder, *items = rest.split(":")
    keys, lists = [], []
    for item in items:
        key, _, vals = item.partition("=")
        keys.append(key)
        lists.append(vals.split(","))
    out = []
    for combo in itertools.product(*lists) if keys else [()]:
        opts = plugins.parse_options([f"{k}={v}" for k, v in zip(keys, combo)])
        extra = " ".join(f"{k}={v}" for k, v in zip(keys, combo) if len(lists[keys.index(k)]) > 1)
        out.append((f"{label} {extra}".strip(), seeder, opts))
    return out


SKIPPED = set()


def evaluate_dataset(dname, ref_path, reads, truth_path, e, settings, n_reads):
    ref = load_reference(ref_path)
    names, seqs = read_fastq(reads)
    if n_reads:
        names, seqs = names[:n_reads], seqs[:n_reads]
    truth = read_truth(truth_path, ref)
    keep = [i for i, nm in enumerate(names) if nm in truth and truth[nm][2] <= e]
    batch = make_batch([seqs[i] for i in keep])
    ts = np.array([truth[names[i]][0] for i in keep], np.int8)
    tp = np.array([truth[names[i]][1] for i in keep], np.int64)
    rows = []
    for label, seeder_name, opts in settings:
        try:
            seeder = plugins.create("seeder", seeder_name, **opts)
        except plugins.PluginError as exc:
            if label not in SKIPPED:
                print(f"# {label}: skipped ({exc})", file=sys.stderr)
                SKIPPED.add(label)
            continue
        t = time.perf_counter()
        index = seeder.build_index(ref)
        t_build = time.perf_counter() - t
        res = evaluate(seeder, index, batch, ts, tp, e, numba.get_num_threads())
        nbytes = getattr(index, "nbytes", None)
        row = {"dataset": dname, "setting": label, "seeder": seeder_name, "options": opts, "reads": len(keep),
               "e": e, "build_s": t_build,
               "index_MiB": nbytes / 2 ** 20 if nbytes is not None else float("nan"),
               **res}
        rows.append(row)
        print(" | ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
              file=sys.stderr, flush=True)
        del index
    return rows


COLS = [("dataset", "dataset"), ("setting", "setting"), ("found", "found %"), ("cands", "cands/read"),
        ("cpu_us_read", "CPU µs/read"), ("us_read", "wall µs/read"), ("index_MiB", "index MiB"),
        ("build_s", "build s")]


def markdown(rows):
    lines = ["| " + " | ".join(h for _, h in COLS) + " |", "|" + "---|" * len(COLS)]
    for r in rows:
        cells = []
        for key, _ in COLS:
            v = r[key]
            if key == "found":
                cells.append(f"{v:.3f}")
            elif isinstance(v, float):
                cells.append(f"{v:.2f}" if v < 100 else f"{v:.0f}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib is not installed: no plot", file=sys.stderr)
        return
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    ncols = min(4, len(names))
    nrows = (len(names) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols, 3.3 * nrows + 0.8), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[len(names):]:
        ax.axis("off")
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    colors = {s: f"C{i}" for i, s in enumerate(settings)}
    for ax, name in zip(flat, names):
        for r in (r for r in rows if r["dataset"] == name):
            ax.scatter(r["cpu_us_read"], r["found"], s=30 + 25 * r["cands"], color=colors[r["setting"]],
                       label=r["setting"], alpha=0.8)
        ax.set_title(f"{name} (e = {next(r['e'] for r in rows if r['dataset'] == name)})", fontsize=9)
        ax.set_xlabel("CPU µs per read (1 thread)", fontsize=8)
        ax.ticklabel_format(useOffset=False, style="plain", axis="y")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("true locus found (%)", fontsize=8)
    handles, labels = flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(settings), 3), fontsize=8, frameon=False,
               markerscale=0.6)
    fig.suptitle("Seeders compared (marker area grows with candidates per read)", fontsize=10)
    fig.tight_layout(rect=(0, 0.09, 1, 0.96))
    fig.savefig(path, dpi=120)
    print(f"# plot: {path}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default="/tmp/seedeval", help="where simulated data sets are kept")
    ap.add_argument("--datasets", default="ecoli,ecoli-high,synth30,divergent,divergent10,contigs,strains",
                    help=f"comma-separated, of: {', '.join(DATASETS)}")
    ap.add_argument("--data", action="append", default=[], metavar="NAME=REF,READS,TRUTH,E",
                    help="an extra data set of your own (Mason -oa truth SAM)")
    ap.add_argument("-n", type=int, default=20000, help="reads per simulated data set")
    ap.add_argument("--length", type=int, default=100, help="read length of the simulated sets")
    ap.add_argument("--synth30", default="/tmp/synth30.fa", help="the 30 Mbp genome (made if missing)")
    ap.add_argument("--setting", action="append", default=[], metavar="LABEL=SEEDER[:key=value[,value]]",
                    help="settings to run instead of the built-in list (repeatable)")
    ap.add_argument("--markdown", help="write the table here too")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--plot", help="PNG plot (matplotlib)")
    ap.add_argument("--replot", metavar="ROWS.json",
                    help="only draw --plot (and print the table) from saved --json rows")
    args = ap.parse_args(argv)
    if args.replot:
        with open(args.replot) as fh:
            rows = json.load(fh)
        print(markdown(rows))
        if args.plot:
            plot(rows, args.plot)
        return

    settings = [s for spec in args.setting for s in expand(spec)] if args.setting else SETTINGS
    os.makedirs(args.workdir, exist_ok=True)
    jobs = []
    for name in [d for d in args.datasets.split(",") if d]:
        if name not in DATASETS:
            ap.error(f"unknown data set {name!r} (known: {', '.join(DATASETS)})")
        jobs.append((name, *make_dataset(name, args.workdir, args.n, args.length, args.synth30)))
    for item in args.data:
        name, _, rest = item.partition("=")
        ref, reads, truth, e = rest.split(",")
        jobs.append((name, ref, reads, truth, int(e)))
    rows = []
    for name, ref, reads, truth, e in jobs:
        rows += evaluate_dataset(name, ref, reads, truth, e, settings, 0)
    table = markdown(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
