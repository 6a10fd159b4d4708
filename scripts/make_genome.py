#!/usr/bin/env python3
"""A ~30 Mbp synthetic genome with a realistic repeat structure, for index/throughput tests.

Contigs: E. coli MG1655 itself (real sequence, 4.64 Mbp) plus 6 synthetic contigs of 4.3 Mbp.
Each synthetic contig is an i.i.d. background (GC 42 %) into which are pasted, at random places:
  * interspersed repeat families (transposon-like): 40 families, element 300..3000 bp, 10..250
    copies each (spread over the contigs), every copy diverged 0..20 % from the family consensus
    (substitutions, plus 1/10 as many 1..3 bp indels), copies truncated at random on the 5' side;
  * segmental duplications: 60 segments of 2..30 kbp copied from anywhere in the genome built
    so far (E. coli included), diverged 0..3 %;
  * microsatellites: 3000 runs of a 1..6 bp unit, 20..300 bp long, 0..5 % diverged.
Repeats then cover 34-39 % of the synthetic contigs (printed per contig); 30.44 Mbp in all.

    python make_genome.py --ecoli /work/shared/data/ecoli_MG1655.fa.gz --out synth30.fa [--seed 1]
"""
import argparse
import gzip

import numpy as np

B = np.frombuffer(b"ACGT", np.uint8)


def read_fa(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as fh:
        seq = "".join(l.strip() for l in fh if not l.startswith(">"))
    return np.frombuffer(seq.upper().encode(), np.uint8).copy()


def mutate(rng, s, d):
    """Substitutions at rate d, indels (1..3 bp) at rate d/10."""
    s = s.copy()
    if d <= 0:
        return s
    m = rng.random(s.size) < d
    s[m] = B[(np.searchsorted(B, s[m]) + rng.integers(1, 4, m.sum())) % 4]
    n_indel = rng.binomial(s.size, d / 10)
    if n_indel:
        pos = np.sort(rng.integers(0, s.size, n_indel))
        parts, last = [], 0
        for p in pos:
            parts.append(s[last:p])
            k = int(rng.integers(1, 4))
            if rng.random() < 0.5:
                parts.append(B[rng.integers(0, 4, k)])   # insertion
                last = p
            else:
                last = min(s.size, p + k)                # deletion
        parts.append(s[last:])
        s = np.concatenate(parts)
    return s


def background(rng, n, gc=0.42):
    p = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return B[rng.choice(4, n, p=p)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ecoli", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--contigs", type=int, default=6)
    ap.add_argument("--contig-len", type=int, default=4_300_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    ecoli = read_fa(a.ecoli)
    fams = [(background(rng, int(rng.integers(300, 3001))), int(rng.integers(10, 251)))
            for _ in range(40)]
    total_copies = sum(c for _, c in fams)
    contigs = [("ecoli_MG1655", ecoli)]
    for ci in range(a.contigs):
        L = a.contig_len
        pieces = []   # (position, sequence) insertions into the background
        share = 1.0 / a.contigs
        for cons, copies in fams:
            for _ in range(rng.binomial(copies, share)):
                el = cons[int(rng.integers(0, cons.size // 2)) if rng.random() < 0.5 else 0:]
                pieces.append(mutate(rng, el, rng.uniform(0, 0.20)))
        pool = np.concatenate([c for _, c in contigs])
        for _ in range(60 // a.contigs):
            n = int(rng.integers(2000, 30001))
            p = int(rng.integers(0, pool.size - n))
            pieces.append(mutate(rng, pool[p:p + n], rng.uniform(0, 0.03)))
        for _ in range(3000 // a.contigs):
            unit = B[rng.integers(0, 4, int(rng.integers(1, 7)))]
            n = int(rng.integers(20, 301))
            pieces.append(mutate(rng, np.tile(unit, n // unit.size + 1)[:n], rng.uniform(0, 0.05)))
        rep = sum(p.size for p in pieces)
        bg = background(rng, max(L - rep, L // 4))
        cuts = np.sort(rng.integers(0, bg.size, len(pieces)))
        order = rng.permutation(len(pieces))
        out, last = [], 0
        for c, k in zip(cuts, order):
            out.append(bg[last:c])
            out.append(pieces[k])
            last = c
        out.append(bg[last:])
        seq = np.concatenate(out)
        contigs.append((f"synth{ci + 1}", seq))
        print(f"synth{ci + 1}: {seq.size} bp, repeats {rep / seq.size:.1%}")
    with open(a.out, "w") as fh:
        for name, seq in contigs:
            fh.write(f">{name}\n")
            s = seq.tobytes().decode()
            for i in range(0, len(s), 70):
                fh.write(s[i:i + 70] + "\n")
    print(f"{sum(s.size for _, s in contigs)} bp in {len(contigs)} contigs, {total_copies} family copies")


if __name__ == "__main__":
    main()
