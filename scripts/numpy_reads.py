#!/usr/bin/env python
"""Simulate single-end reads, or FR pairs (`--pairs R2.fq`), with NumPy only, for machines without
Mason or dwgsim (the lent GPU machines): uniform start positions on every contig, either strand,
per-base substitution and insertion/deletion rates; pairs from fragments of normal insert size. The
truth goes into the read name, `r{i}_{contig}_{pos1}_{strand}_{edits}` (pos1 = 1-based leftmost
reference base, strand + or -), so `--check SAM` can score a pymap run:

    python scripts/numpy_reads.py REF.fa.gz -n 2000000 -L 100 --seed 1 -o reads.fq
    python scripts/numpy_reads.py --check out.sam       # correct = contig, strand, start within 10 bp
    python scripts/numpy_reads.py REF.fa -n 500000 -L 150 -o r1.fq --pairs r2.fq --insert 400,50

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


def _layout(seqs):
    """(genome: the contigs concatenated, contig offsets, N count before each position), made once."""
    genome = np.concatenate(seqs)
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    nprefix = np.zeros(genome.size + 1, np.int64)
    np.cumsum(genome == ord("N"), out=nprefix[1:])
    return genome, offsets, nprefix


def _windows(layout, m, span, rng):
    """(contig of each window, genome start of each window): m windows of span bases without N,
    uniform over the contigs long enough."""
    _, offsets, nprefix = layout
    weights = np.maximum(np.diff(offsets) - span, 0).astype(float)
    ctg = rng.choice(len(weights), m, p=weights / weights.sum())
    start = np.zeros(m, np.int64)
    todo = np.arange(m)
    while todo.size:                       # redraw windows that touch an N
        lo = offsets[ctg[todo]]
        start[todo] = lo + (rng.random(todo.size) * (weights[ctg[todo]])).astype(np.int64)
        todo = todo[nprefix[start[todo] + span] != nprefix[start[todo]]]
    return ctg, start


def _sequence(genome, start, length, sub, indel, rng):
    """(reads (m, length) uint8, edits per read): the forward bases from genome[start] on, with
    substitutions and indels (a read reads at most length + 8 reference bases)."""
    m = start.size
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
    src = np.clip(np.arange(length)[None, :] + np.cumsum(delta, axis=1), 0, length + 7)
    reads = genome[start[:, None] + src]
    subs = (rng.random((m, length)) < sub) | inserted
    code = np.searchsorted(BASES, reads[subs])
    reads[subs] = BASES[(code + rng.integers(1, 4, code.size)) % 4]
    return reads, subs.sum(axis=1) - inserted.sum(axis=1) + nindel


def _revcomp(reads):
    return COMP[np.searchsorted(BASES, reads)][:, ::-1]


def _fastq(name, read, qual):
    return b"@%s\n%s\n+\n%s\n" % (name.encode(), read.tobytes(), qual)


def simulate(names, seqs, n, length, sub, indel, rng, chunk=200000):
    """FASTQ records (bytes), made chunk by chunk with array operations only."""
    out = []
    qual = b"I" * length
    layout = _layout(seqs)
    genome, offsets, _ = layout
    for c0 in range(0, n, chunk):
        m = min(chunk, n - c0)
        ctg, start = _windows(layout, m, length + 8, rng)
        reads, edits = _sequence(genome, start, length, sub, indel, rng)
        rev = rng.random(m) < 0.5
        reads[rev] = _revcomp(reads[rev])
        pos1 = start - offsets[ctg] + 1
        for i in range(m):
            name = f"r{c0 + i}_{names[ctg[i]]}_{pos1[i]}_{'-' if rev[i] else '+'}_{edits[i]}"
            out.append(_fastq(name, reads[i], qual))
    return out


def simulate_pairs(names, seqs, n, length, sub, indel, rng, insert=(400, 50), chunk=200000):
    """(read 1 records, read 2 records) of n FR pairs: fragments of normal insert size (at least
    length, at most mean + 4 sd) from either strand, read 1 from one end, read 2 the reverse
    complement of the other. Both mates are named r{i}_{contig}_{fragment pos1}_{strand}_{edits of
    both} (strand: the fragment's, + when read 1 is forward)."""
    mean, sd = insert
    longest = int(mean + 4 * sd)
    out1, out2 = [], []
    qual = b"I" * length
    layout = _layout(seqs)
    genome, offsets, _ = layout
    for c0 in range(0, n, chunk):
        m = min(chunk, n - c0)
        ctg, start = _windows(layout, m, longest + 8, rng)
        size = np.clip(np.rint(rng.normal(mean, sd, m)).astype(np.int64), length, longest)
        left, e1 = _sequence(genome, start, length, sub, indel, rng)
        right, e2 = _sequence(genome, start + size - length, length, sub, indel, rng)
        right = _revcomp(right)
        rev = rng.random(m) < 0.5            # the fragment's other strand: read 1 from its right end
        r1 = np.where(rev[:, None], right, left)
        r2 = np.where(rev[:, None], left, right)
        pos1 = start - offsets[ctg] + 1
        for i in range(m):
            name = f"r{c0 + i}_{names[ctg[i]]}_{pos1[i]}_{'-' if rev[i] else '+'}_{e1[i] + e2[i]}"
            out1.append(_fastq(name, r1[i], qual))
            out2.append(_fastq(name, r2[i], qual))
    return out1, out2


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
    ap.add_argument("--pairs", metavar="OUT2", help="simulate n FR pairs: read 1 to --out, read 2 here")
    ap.add_argument("--insert", default="400,50", help="pairs' insert size mean,sd (default 400,50)")
    ap.add_argument("--check", metavar="SAM")
    a = ap.parse_args(argv)
    if a.check:
        return check(a.check)
    names, seqs = read_fasta(a.ref)
    rng = np.random.default_rng(a.seed)
    if a.pairs:
        if a.out == "-":
            ap.error("--pairs needs -o for read 1")
        mean, sd = (float(x) for x in a.insert.split(","))
        for path, recs in zip((a.out, a.pairs), simulate_pairs(names, seqs, a.n, a.L, a.sub, a.indel, rng,
                                                               (mean, sd))):
            with open(path, "wb") as fh:
                fh.write(b"".join(recs))
        return
    recs = simulate(names, seqs, a.n, a.L, a.sub, a.indel, rng)
    fh = sys.stdout.buffer if a.out == "-" else open(a.out, "wb")
    fh.write(b"".join(recs))
    if fh is not sys.stdout.buffer:
        fh.close()


if __name__ == "__main__":
    main()
