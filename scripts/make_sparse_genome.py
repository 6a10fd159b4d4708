#!/usr/bin/env python
"""A 4.5 Gbp genome that is mostly N, for checking positions beyond 2^32 on a small machine: three
contigs (2.1, 2.1 and 0.3 Gbp; the last one's bases lie past 2^32 in the concatenated reference) with
5 Mbp of random sequence each, and 3,000 reads of 150 bp from them with two substitutions each (names
carry contig:1-based position:strand). Writes g45.fa and reads.fq in the current folder.

    python3 scripts/make_sparse_genome.py && pymap index --seeder minimizer g45.fa && pymap align g45.fa reads.fq -o out.sam
"""
import numpy as np
rng = np.random.default_rng(45)
A = np.frombuffer(b"ACGT", np.uint8)
contigs = [("chr1", 2_100_000_000, 1_000_000), ("chr2", 2_100_000_000, 1_500_000_000),
           ("chr3", 300_000_000, 200_000_000)]
seqs = {}
with open("g45.fa", "wb") as fh:
    for name, length, at in contigs:
        fh.write(f">{name}\n".encode())
        rand = A[rng.integers(0, 4, 5_000_000)]
        seqs[name] = (at, rand)
        block = 1 << 26
        pos = 0
        while pos < length:
            end = min(length, pos + block)
            chunk = np.full(end - pos, ord("N"), np.uint8)
            lo, hi = max(pos, at), min(end, at + rand.size)
            if lo < hi:
                chunk[lo - pos:hi - pos] = rand[lo - at:hi - at]
            fh.write(chunk.tobytes())
            fh.write(b"\n")
            pos = end
comp = np.zeros(256, np.uint8)
for a, b in zip(b"ACGT", b"TGCA"):
    comp[a] = b
with open("reads.fq", "w") as fq:
    for i in range(3000):
        name = ["chr1", "chr2", "chr3"][i % 3]
        at, rand = seqs[name]
        p = int(rng.integers(0, rand.size - 150))
        r = rand[p:p + 150].copy()
        for k in rng.integers(0, 150, 2):
            r[k] = A[(np.flatnonzero(A == r[k])[0] + 1) % 4]
        strand = "+"
        if i % 2:
            r = comp[r[::-1]]
            strand = "-"
        fq.write(f"@r{i}:{name}:{at + p + 1}:{strand}\n{r.tobytes().decode()}\n+\n{'I' * 150}\n")
