#!/usr/bin/env python
"""Simulate single-end reads with NumPy only, for machines without Mason or dwgsim (the lent GPU
machines): uniform start positions on every contig, either strand, per-base substitution and
insertion/deletion rates. The truth goes into the read name, `r{i}_{contig}_{pos1}_{strand}_{edits}`
(pos1 = 1-based leftmost reference base, strand + or -), so `--check SAM` can score a pymap run:

    python scripts/numpy_reads.py REF.fa.gz -n 2000000 -L 100 --seed 1 -o reads.fq
    python scripts/numpy_reads.py --check out.sam       # correct = contig, strand, start within 10 bp

Reads are drawn from windows without N. This is not an Illumina error model; scripts/simulate.py
(Mason, dwgsim) is the evaluation suite's simulator.
"""
import argparse
import gzip
import sys

import numpy as np

COMP = np.frombuffer(b"TGCA", np.uint8)
BASES = np.frombuffer(b"ACGT", np.uint8)


def read_fasta(path):
    opener = gzip.open if path.endswith(".gz") else open
    names, seqs, cur = [], [], []
    with opener(path, "rb") as fh:
        for line in fh:
            if line.startswith(b">"):
                if names:
                    seqs.append(b"".join(cur))
                names.append(line[1:].split()[0].decode())
                cur = []
            else:
                cur.append(line.strip().upper())
    if names:
        seqs.append(b"".join(cur))
    return names, [np.frombuffer(s, np.uint8) for s in seqs]


def simulate(names, seqs, n, length, sub, indel, rng, chunk=200000):
    """FASTQ records (bytes), made chunk by chunk with array operations only."""
    genome = np.concatenate(seqs)
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    span = length + 8
    nprefix = np.zeros(genome.size + 1, np.int64)
    np.cumsum(genome == ord("N"), out=nprefix[1:])
    weights = np.maximum(np.diff(offsets) - span, 0).astype(float)
    out = []
    for c0 in range(0, n, chunk):
        m = min(chunk, n - c0)
        ctg = rng.choice(len(seqs), m, p=weights / weights.sum())
        start = np.zeros(m, np.int64)
        todo = np.arange(m)
        while todo.size:                       # redraw windows that touch an N
            lo = offsets[ctg[todo]]
            start[todo] = lo + (rng.random(todo.size) * (weights[ctg[todo]])).astype(np.int64)
            todo = todo[nprefix[start[todo] + span] != nprefix[start[todo]]]
        delta = np.zeros((m, length), np.int16)
        inserted = np.zeros((m, length), np.bool_)
        nindel = rng.binomial(length, indel, m)
        for k in range(int(nindel.max(initial=0))):
            rows = np.flatnonzero(nindel > k)
            pos = rng.integers(1, length, rows.size)
            dele = rng.random(rows.size) < 0.5
            np.add.at(delta, (rows[dele], pos[dele]), 1)
            np.add.at(delta, (rows[~dele], pos[~dele]), -1)
            inserted[rows[~dele], pos[~dele]] = True
        src = np.clip(np.arange(length)[None, :] + np.cumsum(delta, axis=1), 0, span - 1)
        reads = genome[start[:, None] + src]
        subs = (rng.random((m, length)) < sub) | inserted
        code = np.searchsorted(BASES, reads[subs])
        reads[subs] = BASES[(code + rng.integers(1, 4, code.size)) % 4]
        edits = subs.sum(axis=1) - inserted.sum(axis=1) + nindel
        rev = rng.random(m) < 0.5
        reads[rev] = COMP[np.searchsorted(BASES, reads[rev])][:, ::-1]
        ctg_names = np.array(names, dtype=object)[ctg]
        pos1 = start - offsets[ctg] + 1
        qual = b"I" * length
        for i in range(m):
            name = f"r{c0 + i}_{ctg_names[i]}_{pos1[i]}_{'-' if rev[i] else '+'}_{edits[i]}"
            out.append(b"@%s\n%s\n+\n%s\n" % (name.encode(), reads[i].tobytes(), qual))
    return out


def check(sam, tolerance=10):
    import pysam
    n = correct = unmapped = 0
    with pysam.AlignmentFile(sam, "r", check_sq=False) as fh:
        for rec in fh:
            if rec.is_secondary or rec.is_supplementary:
                continue
            n += 1
            if rec.is_unmapped:
                unmapped += 1
                continue
            _, rest = rec.query_name.split("_", 1)
            contig, pos, strand, _ = rest.rsplit("_", 3)
            if (rec.reference_name == contig and ("-" if rec.is_reverse else "+") == strand
                    and abs(rec.reference_start + 1 - int(pos)) <= tolerance):
                correct += 1
    print(f"reads {n}  correct {correct} ({correct / max(n, 1):.4%})  unmapped {unmapped}  "
          f"wrong {n - correct - unmapped}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref", nargs="?")
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("-L", type=int, default=100)
    ap.add_argument("--sub", type=float, default=0.004)
    ap.add_argument("--indel", type=float, default=0.0005)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--out", default="-")
    ap.add_argument("--check", metavar="SAM")
    a = ap.parse_args(argv)
    if a.check:
        return check(a.check)
    names, seqs = read_fasta(a.ref)
    recs = simulate(names, seqs, a.n, a.L, a.sub, a.indel, np.random.default_rng(a.seed))
    fh = sys.stdout.buffer if a.out == "-" else open(a.out, "wb")
    fh.write(b"".join(recs))
    if fh is not sys.stdout.buffer:
        fh.close()


if __name__ == "__main__":
    main()
