#!/usr/bin/env python3
"""Simulate single-end Illumina reads with a known truth, for mapper evaluation.

Two simulators, both Debian packages:

* ``mason``  -- SeqAn's ``mason_simulator`` (package seqan-apps, /usr/lib/seqan/bin). Its ``-oa`` SAM
  gives the true alignment of every read.
* ``dwgsim`` -- writes the truth into the read names
  (``CONTIG_POS1_POS2_STRAND1_STRAND2_RAND1_RAND2_ERR1_ERR2_NUM/1``).

Profiles: ``low`` is the simulator's default error model, ``high`` raises it (Mason:
``--illumina-prob-mismatch-scale 3.0 --illumina-prob-insert 0.001 --illumina-prob-deletion 0.001``).
``--inject-n F`` turns a run of 1..``--n-run-max`` bases into N (quality '#') in a fraction F of the
reads, as Illumina N calls.

Output, in ``--out-dir``: ``reads.fq``, ``truth.tsv`` (``name contig pos strand nm``, pos 1-based
leftmost reference base of the true alignment, strand + or -, nm the true edit distance; with
``--inject-n`` nm is raised by the number of injected Ns, an upper bound), ``ref.fa`` (the reference
re-wrapped to 70 columns, which Mason needs), the simulator's own truth (Mason: ``truth.sam``) and
``simulate.json`` with the parameters.

    python scripts/simulate.py --ref /work/shared/data/ecoli_MG1655.fa.gz --length 150 \\
        --profile high --n-reads 200000 --seed 7 --out-dir /tmp/eval/sim/h150
"""
import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time

SEQAN_BIN = "/usr/lib/seqan/bin"

MASON_PROFILES = {
    "low": [],
    "high": ["--illumina-prob-mismatch-scale", "3.0", "--illumina-prob-insert", "0.001",
             "--illumina-prob-deletion", "0.001"],
}
# dwgsim: -e is the per-base sequencing error rate (substitutions), a range rising along the read;
# -r the rate of mutations of the sampled genome and -R the fraction of them that are indels.
DWGSIM_PROFILES = {
    "low": ["-e", "0.001-0.01", "-r", "0.001", "-R", "0.1"],
    "high": ["-e", "0.005-0.04", "-r", "0.002", "-R", "0.2"],
}
TRUTH_HEADER = "#name\tcontig\tpos\tstrand\tnm\n"


def tool(name):
    """Path of an external tool: PATH first, then SeqAn's bin directory."""
    path = shutil.which(name)
    if path:
        return path
    cand = os.path.join(SEQAN_BIN, name)
    if os.access(cand, os.X_OK):
        return cand
    raise SystemExit(f"simulate: {name} not found (PATH or {SEQAN_BIN})")


def open_text(path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt")
    return open(path, "rt")


def prepare_reference(src, dst, width=70):
    """Write ``src`` (FASTA, plain or gzip) to ``dst`` with names cut at the first blank, constant
    line width and no empty lines: Mason's FAI reader and razers3 need that. Returns
    ``[(name, length), ...]``. Skips the work when ``dst`` is newer than ``src``."""
    if os.path.exists(dst) and os.path.getmtime(dst) >= os.path.getmtime(src) and os.path.getsize(dst):
        return read_lengths(dst)
    tmp = dst + ".tmp"
    contigs = []
    with open_text(src) as fin, open(tmp, "w") as fout:
        name, chunks = None, []

        def flush():
            if name is None:
                return
            seq = "".join(chunks)
            fout.write(f">{name}\n")
            for i in range(0, len(seq), width):
                fout.write(seq[i:i + width] + "\n")
            contigs.append((name, len(seq)))

        for line in fin:
            line = line.strip()
            if not line:
                continue
            if line.startswith(">"):
                flush()
                name, chunks = line[1:].split()[0], []
            else:
                chunks.append(line)
        flush()
    if not contigs:
        raise SystemExit(f"simulate: no FASTA records in {src}")
    os.replace(tmp, dst)
    for ext in (".fai",):
        if os.path.exists(dst + ext):
            os.remove(dst + ext)
    return contigs


def read_lengths(fasta):
    out, name, n = [], None, 0
    with open_text(fasta) as fh:
        for line in fh:
            if line.startswith(">"):
                if name is not None:
                    out.append((name, n))
                name, n = line[1:].split()[0], 0
            else:
                n += len(line.strip())
    if name is not None:
        out.append((name, n))
    return out


def fastq_records(path):
    with open_text(path) as fh:
        while True:
            h = fh.readline()
            if not h:
                return
            s = fh.readline().rstrip("\n")
            fh.readline()
            q = fh.readline().rstrip("\n")
            yield h[1:].rstrip("\n"), s, q


def strip_mate(name):
    name = name.split()[0]
    if len(name) > 2 and name[-2] == "/" and name[-1] in "12":
        return name[:-2]
    return name


def mason_truth(sam_path):
    """{name: (contig, pos, strand, nm)} from Mason's -oa SAM, without pysam (plain text)."""
    truth = {}
    with open_text(sam_path) as fh:
        for line in fh:
            if line.startswith("@"):
                continue
            f = line.rstrip("\n").split("\t")
            flag = int(f[1])
            if flag & 0x900:
                continue
            nm = -1
            for tag in f[11:]:
                if tag.startswith("NM:i:"):
                    nm = int(tag[5:])
                    break
            if flag & 4:
                truth[strip_mate(f[0])] = ("*", 0, "*", nm)
            else:
                truth[strip_mate(f[0])] = (f[2], int(f[3]), "-" if flag & 16 else "+", nm)
    return truth


def parse_dwgsim_name(name):
    """(clean name, contig, pos, strand, nm) from a dwgsim read name. The contig may contain '_',
    so fields are split from the right. Random reads (RAND1=1) get contig '*'."""
    base = strip_mate(name)
    parts = base.rsplit("_", 9)
    if len(parts) != 10:
        raise ValueError(f"not a dwgsim read name: {name!r}")
    contig, pos1, _pos2, str1, _str2, rand1, _rand2, err1, _err2, _num = parts
    n_err, n_sub, n_indel = (int(x) for x in err1.split(":"))
    if rand1 != "0":
        return base, "*", 0, "*", -1
    return base, contig, int(pos1), "-" if str1 == "1" else "+", n_err + n_sub + n_indel


def inject_n(seq, qual, rng, max_run):
    run = rng.randint(1, max(1, min(max_run, len(seq))))
    start = rng.randint(0, len(seq) - run)
    seq = seq[:start] + "N" * run + seq[start + run:]
    qual = qual[:start] + "#" * run + qual[start + run:]
    return seq, qual, run


def run_cmd(cmd, log):
    with open(log, "w") as fh:
        fh.write(" ".join(cmd) + "\n")
        fh.flush()
        r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        with open(log) as fh:
            tail = fh.read()[-2000:]
        raise SystemExit(f"simulate: {cmd[0]} failed (exit {r.returncode}); log {log}:\n{tail}")


def simulate(ref, out_dir, length=100, profile="low", n_reads=100000, seed=7, simulator="mason",
             inject_n_frac=0.0, n_run_max=5, threads=1, extra=None):
    """Simulate; returns a dict with the paths (reads, truth, ref, ...) and parameters."""
    if profile not in MASON_PROFILES:
        raise SystemExit(f"simulate: profile must be low or high, got {profile!r}")
    os.makedirs(out_dir, exist_ok=True)
    ref_fa = os.path.join(out_dir, "ref.fa")
    prepare_reference(ref, ref_fa)
    reads = os.path.join(out_dir, "reads.fq")
    truth_tsv = os.path.join(out_dir, "truth.tsv")
    t0 = time.time()
    if simulator == "mason":
        raw_fq = os.path.join(out_dir, "mason.fq")
        truth_sam = os.path.join(out_dir, "truth.sam")
        cmd = [tool("mason_simulator"), "-ir", ref_fa, "-n", str(n_reads), "--illumina-read-length",
               str(length), "--seed", str(seed), "--num-threads", str(threads), "-o", raw_fq,
               "-oa", truth_sam] + MASON_PROFILES[profile] + list(extra or [])
        if length > 200 and "--fragment-mean-size" not in cmd:
            # Mason's default fragments (mean 300, sd 30) are too short for long reads: it aborts
            # with "Illumina read is too long, increase fragment length"
            cmd += ["--fragment-mean-size", str(2 * length)]
        run_cmd(cmd, os.path.join(out_dir, "mason.log"))
        truth = mason_truth(truth_sam)
        records = ((strip_mate(h), s, q) for h, s, q in fastq_records(raw_fq))
    elif simulator == "dwgsim":
        prefix = os.path.join(out_dir, "dwgsim")
        cmd = [tool("dwgsim"), "-1", str(length), "-2", "0", "-N", str(n_reads), "-y", "0", "-H",
               "-z", str(seed), "-o", "1"] + DWGSIM_PROFILES[profile] + list(extra or []) + [ref_fa, prefix]
        run_cmd(cmd, os.path.join(out_dir, "dwgsim.log"))
        raw_fq = prefix + ".bwa.read1.fastq.gz"
        if not os.path.exists(raw_fq):
            raw_fq = prefix + ".bwa.read1.fastq"
        truth = {}

        def gen():
            for h, s, q in fastq_records(raw_fq):
                name, contig, pos, strand, nm = parse_dwgsim_name(h)
                truth[name] = (contig, pos, strand, nm)
                yield name, s, q
        records = gen()
        truth_sam = None
    else:
        raise SystemExit(f"simulate: unknown simulator {simulator!r} (mason, dwgsim)")

    rng = random.Random(seed * 1000003 + 17)
    n_out = n_injected = 0
    names = []
    with open(reads + ".tmp", "w") as fq:
        for name, s, q in records:
            if inject_n_frac > 0 and rng.random() < inject_n_frac:
                s, q, run = inject_n(s, q, rng, n_run_max)
                c, p, st, nm = truth[name]
                truth[name] = (c, p, st, nm + run if nm >= 0 else nm)
                n_injected += 1
            fq.write(f"@{name}\n{s}\n+\n{q}\n")
            names.append(name)
            n_out += 1
    os.replace(reads + ".tmp", reads)
    write_truth(truth_tsv, ((n, *truth[n]) for n in names))
    if simulator == "dwgsim":
        for suffix in (".bwa.read2.fastq.gz", ".bfast.fastq.gz"):
            if os.path.exists(prefix + suffix):
                os.remove(prefix + suffix)
    else:
        os.remove(raw_fq)
    info = dict(simulator=simulator, ref=os.path.abspath(ref), ref_fa=ref_fa, reads=reads, truth=truth_tsv,
                simulator_truth=truth_sam, length=length, profile=profile, n_reads=n_out, seed=seed,
                inject_n=inject_n_frac, n_run_max=n_run_max, reads_with_n=n_injected,
                command=" ".join(cmd), seconds=round(time.time() - t0, 2))
    with open(os.path.join(out_dir, "simulate.json"), "w") as fh:
        json.dump(info, fh, indent=2)
    return info


def write_truth(path, rows):
    with open(path, "w") as fh:
        fh.write(TRUTH_HEADER)
        for name, contig, pos, strand, nm in rows:
            fh.write(f"{name}\t{contig}\t{pos}\t{strand}\t{nm}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="reference FASTA, plain or gzip")
    ap.add_argument("--out-dir", "-o", required=True)
    ap.add_argument("--simulator", choices=["mason", "dwgsim"], default="mason")
    ap.add_argument("--length", "-L", type=int, default=100, help="read length (100, 150, 250, ...)")
    ap.add_argument("--profile", choices=["low", "high"], default="low")
    ap.add_argument("--n-reads", "-n", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--inject-n", type=float, default=0.0, metavar="FRAC",
                    help="fraction of reads given a run of N calls (default 0)")
    ap.add_argument("--n-run-max", type=int, default=5, help="longest injected N run (default 5)")
    ap.add_argument("--threads", "-t", type=int, default=1, help="Mason threads")
    ap.add_argument("--extra", default="", help="extra simulator arguments, one string")
    a = ap.parse_args(argv)
    info = simulate(a.ref, a.out_dir, a.length, a.profile, a.n_reads, a.seed, a.simulator, a.inject_n,
                    a.n_run_max, a.threads, a.extra.split())
    print(json.dumps(info, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
