#!/usr/bin/env python3
"""Synthetic genomes with a realistic repeat structure, for index/throughput/mapping tests.

Two modes.

--ecoli FILE (the original ~30 Mbp genome; output unchanged for a given seed):
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

--size SIZE (a human-like genome of any size, e.g. 5M, 1G, 3.1G; see docs/genomes.md):
24 chromosomes with GRCh38's relative lengths and centromere positions plus 8 small unplaced
contigs; isochore-like GC domains (41 % GC overall), CpG depletion, CpG islands, microsatellites and
low-complexity runs; Alu-like SINEs (~10 %, ~1 M copies per 3.1 Gbp), L1-like LINEs (~17 %), older
MIR/L2/DNA/LTR-like families (~17 %), segmental duplications (~5 %, 1-100 kb, 1-5 % diverged, some
between chromosomes), alpha-satellite higher-order-repeat arrays around centromeres, HSat/beta
satellites, telomere repeats, and N gaps (centromeres, telomeres, acrocentric short arms,
heterochromatin, scattered gaps; ~5 % N). Writes OUT, OUT.fai, a BED of every inserted element
(STEM.repeats.bed) and the consensus sequences (STEM.consensus.fa).

    python make_genome.py --size 1G --out /tmp/human1g.fa [--seed 1]
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


def ecoli_main(a):
    """The original 30 Mbp E. coli-based genome (unchanged; byte-identical output for a given seed)."""
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


# ----------------------------------------------------------------------------------------------
# Human-like mode.  Sequences are uint8 codes A=0 C=1 G=2 T=3 N=4 (complement = 3 - code).
# Everything per base is vectorised; Python loops run per contig, family, GC domain or batch.
# ----------------------------------------------------------------------------------------------

LUT = np.frombuffer(b"ACGTNacgtn", np.uint8)
BATCH = 4_000_000            # bases per mutation batch (bounds the temporaries to ~150 MB)

# GRCh38 primary chromosomes: name, length, centromere midpoint (Mbp), acrocentric,
# heterochromatin block in N (Mbp; 1q12, 9q12, 16q11.2 next to the centromere, Yq12 at the q end),
# alpha-satellite HOR group (chromosomes of one group share near-identical HORs, as D1Z7/D5Z2/D19Z3,
# D13Z1/D21Z1 and D14Z1/D22Z1 do).  CHR_GC: GC % of each chromosome (approximately GRCh38's),
# scaled so that the genome reaches --gc.
HUMAN = [
    ("chr1", 248956422, 123.4, False, 10, "D1"), ("chr2", 242193529, 93.9, False, 0, "D2"),
    ("chr3", 198295559, 90.9, False, 0, "D3"), ("chr4", 190214555, 50.0, False, 0, "D4"),
    ("chr5", 181538259, 48.8, False, 0, "D1"), ("chr6", 170805979, 59.8, False, 0, "D6"),
    ("chr7", 159345973, 60.1, False, 0, "D7"), ("chr8", 145138636, 45.2, False, 0, "D8"),
    ("chr9", 138394717, 43.0, False, 10, "D9"), ("chr10", 133797422, 39.8, False, 0, "D10"),
    ("chr11", 135086622, 53.4, False, 0, "D11"), ("chr12", 133275309, 35.5, False, 0, "D12"),
    ("chr13", 114364328, 17.7, True, 0, "D13"), ("chr14", 107043718, 17.2, True, 0, "D14"),
    ("chr15", 101991189, 19.0, True, 0, "D15"), ("chr16", 90338345, 36.8, False, 5, "D16"),
    ("chr17", 83257441, 25.1, False, 0, "D17"), ("chr18", 80373285, 18.5, False, 0, "D18"),
    ("chr19", 58617616, 26.2, False, 0, "D1"), ("chr20", 64444167, 28.1, False, 0, "D20"),
    ("chr21", 46709983, 12.0, True, 0, "D13"), ("chr22", 50818468, 15.0, True, 0, "D14"),
    ("chrX", 156040895, 60.6, False, 0, "DX"), ("chrY", 57227415, 10.4, False, 25, "DY"),
]
HUMAN_TOTAL = sum(h[1] for h in HUMAN)
CHR_GC = [41.7, 40.2, 39.7, 38.2, 39.5, 39.6, 40.7, 40.1, 41.3, 41.6, 41.6, 40.8, 38.5, 40.9, 42.2, 44.8,
          45.5, 39.8, 48.4, 44.1, 40.9, 48.0, 39.5, 39.9]
CHR_GC_MEAN = sum(g * h[1] for g, h in zip(CHR_GC, HUMAN)) / HUMAN_TOTAL
N_UNPLACED = 8
UNPLACED_SHARE = 0.0005      # of the total size, before the 2 kb floor per contig

CLASSES = ["SINE/Alu", "LINE/L1", "SINE/MIR", "LINE/L2", "DNA", "LTR", "Simple_repeat",
           "Low_complexity", "Satellite", "Segmental_dup", "CpG_island", "gap"]
CL = {c: i for i, c in enumerate(CLASSES)}
NOT_REPEAT = (CL["CpG_island"], CL["gap"])


class Names:
    """Registry of element names (subfamily, unit, gap kind) -> small integer ids."""

    def __init__(self):
        self.names, self.ids = [], {}

    def __call__(self, name):
        if name not in self.ids:
            self.ids[name] = len(self.names)
            self.names.append(name)
        return self.ids[name]


def ragged_arange(lens):
    """np.concatenate([np.arange(n) for n in lens]), vectorised."""
    lens = np.asarray(lens, np.int64)
    if lens.size == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(lens) - lens
    return np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(starts, lens)


def rand_comp(rng, n, p):
    """n i.i.d. bases with probabilities p = (A, C, G, T)."""
    t = np.cumsum(np.asarray(p, np.float64) / np.sum(p))[:-1].astype(np.float32)
    u = rng.random(int(n), dtype=np.float32)
    return ((u >= t[0]).view(np.uint8) + (u >= t[1]).view(np.uint8) + (u >= t[2]).view(np.uint8))


def rand_gc(rng, n, gc):
    return rand_comp(rng, n, ((1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2))


def deplete_cpg(rng, s, keep=0.2):
    """Turn all but a fraction `keep` of the CpGs into TpG or CpA (methyl-C deamination)."""
    i = np.flatnonzero((s[:-1] == 1) & (s[1:] == 2))
    i = i[rng.random(i.size, dtype=np.float32) >= keep]
    h = rng.random(i.size, dtype=np.float32) < 0.5
    s[i[h]] = 3
    s[i[~h] + 1] = 0
    return s


IND_EV = 0.08   # indel events per unit of divergence (about 1 indel per 11 substitutions)
IND_P = 0.6     # indel length ~ geometric(0.6), capped at 20: mean 1.65 bp


def mutate_batch(rng, seq, lens, div, indels=True, cpg=True):
    """Mutate concatenated copies `seq` (lengths `lens`) at per-copy divergence `div` (edits per
    base): substitutions (2/3 transitions) and, with `indels`, 1-20 bp insertions/deletions.  With
    `cpg`, CpG sites are left to a second step that turns every CpG then present (new ones too) into
    TpG/CpA with probability 1 - exp(-8 div) (methyl-CpG deamination, ~10x the other sites), the
    other sites' rate lowered so that the total stays near `div`.  Returns (new seq, new lens,
    edits per copy), where edits (substituted + deleted + inserted bases) bounds the edit distance
    to the source."""
    lens = np.asarray(lens, np.int64)
    k, n = lens.size, seq.size
    if n == 0:
        return seq.copy(), lens.copy(), np.zeros(k, np.int64)
    cid = np.repeat(np.arange(k, dtype=np.int32), lens)
    div = np.asarray(div, np.float32)
    pev = div * np.float32(IND_EV) if indels else np.zeros(k, np.float32)
    psub = np.maximum(div - pev / np.float32(IND_P), 0).astype(np.float32)
    if cpg:
        cg = (seq[:-1] == 1) & (seq[1:] == 2)
        c = np.zeros(n, bool)
        c[:-1] |= cg
        c[1:] |= cg
        fc = (np.bincount(cid[c], minlength=k) / lens).astype(np.float32)
        pc = (1 - np.exp(-8 * div)).astype(np.float32)
        other = np.maximum(0.5 * psub, (psub - fc / 2 * pc) / np.maximum(1 - fc, 0.1)).astype(np.float32)
        rate = other[cid]
        rate[c] = 0
        del c
    else:
        rate = psub[cid]
    u = rng.random(n, dtype=np.float32)
    sub = np.flatnonzero(u < rate)
    out = seq.copy()
    old = out[sub]
    ts = rng.random(sub.size, dtype=np.float32) < 0.67
    tv = np.where(rng.random(sub.size, dtype=np.float32) < 0.5, 1, 3).astype(np.uint8)
    out[sub] = np.where(ts, old ^ 2, old ^ tv)
    edits = np.bincount(cid[sub], minlength=k).astype(np.int64)
    if cpg:
        i = np.flatnonzero((out[:-1] == 1) & (out[1:] == 2) & (cid[:-1] == cid[1:]))
        i = i[rng.random(i.size, dtype=np.float32) < pc[cid[i]]]
        h = rng.random(i.size, dtype=np.float32) < 0.5
        out[i[h]] = 3
        out[i[~h] + 1] = 0
        edits += np.bincount(cid[i], minlength=k)
    if not indels:
        return out, lens.copy(), edits
    rate += pev[cid]
    ev = np.flatnonzero((u < rate) & (u >= rate - pev[cid]))
    del u, rate
    L = np.minimum(rng.geometric(IND_P, ev.size), 20).astype(np.int64)
    isdel = rng.random(ev.size) < 0.5
    starts = np.cumsum(lens) - lens
    dp, dl = ev[isdel], L[isdel]
    cst = starts[cid[dp]]
    ok = dp > cst                                   # never delete a copy's first base
    dp, dl, cst = dp[ok], dl[ok], cst[ok]
    dl = np.minimum(dl, cst + lens[cid[dp]] - dp)
    mark = np.zeros(n + 1, np.int32)
    np.add.at(mark, dp, 1)
    np.add.at(mark, dp + dl, -1)
    keep = np.cumsum(mark[:-1]) == 0
    del mark
    counts = keep.astype(np.int32)
    ip, il = ev[~isdel], L[~isdel]
    counts[ip] += il.astype(np.int32)
    res = np.repeat(out, counts)
    if ip.size:
        newpos = np.cumsum(counts, dtype=np.int64) - counts
        at = np.repeat(newpos[ip] + keep[ip], il) + ragged_arange(il)
        res[at] = rng.integers(0, 4, at.size, dtype=np.uint8)
    new_lens = np.bincount(cid, weights=counts, minlength=k).astype(np.int64)
    edits += np.bincount(cid[dp], weights=dl, minlength=k).astype(np.int64)
    edits += np.bincount(cid[ip], weights=il, minlength=k).astype(np.int64)
    return res, new_lens, edits


def subs(rng, s, d):
    return mutate_batch(rng, s, [s.size], [d], indels=False, cpg=False)[0]


def revcomp_segments(seq, lens, minus):
    """Reverse-complement, in place, the segments of `seq` (lengths `lens`) where `minus`."""
    sel = np.flatnonzero(minus)
    if sel.size == 0:
        return
    starts = (np.cumsum(lens) - lens)[sel]
    L = lens[sel]
    o = ragged_arange(L)
    idx = np.repeat(starts, L) + o
    ridx = np.repeat(starts + L - 1, L) - o
    seq[idx] = 3 - seq[ridx]


def tandem(rng, unit, length, div, indels=True):
    """A tandem array of `unit`, exactly `length` bp, diverged `div` (substitutions, indels)."""
    length = int(length)
    if length <= 0:
        return np.zeros(0, np.uint8), 0
    n = int(length * 1.06) + 2 * unit.size
    arr = np.tile(unit, n // unit.size + 1)[:n]
    m, _, e = mutate_batch(rng, arr, [n], [div], indels=indels, cpg=False)
    while m.size < length:       # practically never
        m = np.concatenate([m, m])
    return m[:length], int(round(int(e[0]) * length / n))


# ----------------------------------------------------------------------------------------------
# Repeat families
# ----------------------------------------------------------------------------------------------

class Fam:
    def __init__(self, name, cls, cons, share, dmin, dmax, **kw):
        self.name, self.cls, self.cons = name, cls, cons
        self.share, self.dmin, self.dmax = share, dmin, dmax
        self.__dict__.update(kw)


class ClassPlan:
    """One class of interspersed repeats: its families and how copies are cut from them."""

    def __init__(self, cls, fams, frac, pref, cut, names, mean_rng):
        self.cls, self.fams, self.frac, self.pref, self.cut = CL[cls], fams, frac, pref, cut
        self.name_id = np.array([names(f.name) for f in fams], np.int32)
        self.clen = np.array([f.cons.size for f in fams], np.int64)
        self.share = np.array([f.share for f in fams], np.float64)
        self.share /= self.share.sum()
        self.dmin = np.array([f.dmin for f in fams], np.float32)
        self.dmax = np.array([f.dmax for f in fams], np.float32)
        self.seq = np.concatenate([f.cons for f in fams])
        self.off = np.cumsum(self.clen) - self.clen
        f, cs, ce, tail = self.spec(mean_rng, 20000)
        self.mean_len = float(np.mean(ce - cs + tail))

    def spec(self, rng, n):
        """n copies: family index, consensus start/end, poly-A tail length."""
        fam = rng.choice(len(self.fams), n, p=self.share)
        cs, ce, tail = self.cut(rng, self, fam)
        return fam, cs, ce, tail


def _lognorm_len(rng, n, median, sigma, lo, hi):
    return np.clip(np.exp(rng.normal(np.log(median), sigma, n)), lo, hi).astype(np.int64)


def cut_alu(rng, p, fam):
    L = p.clen[fam]
    keep = np.where(rng.random(fam.size) < 0.8, L, rng.integers(40, L))
    return L - keep, L, rng.integers(8, 36, fam.size)


def cut_l1(rng, p, fam):
    L = p.clen[fam]
    pfull = np.array([f.pfull for f in p.fams])[fam]
    keep = np.minimum(_lognorm_len(rng, fam.size, 700, 1.0, 80, 10 ** 9), L)
    keep = np.where(rng.random(fam.size) < pfull, L, keep)
    return L - keep, L, rng.integers(5, 31, fam.size)


def cut_l2(rng, p, fam):
    L = p.clen[fam]
    keep = np.minimum(_lognorm_len(rng, fam.size, 350, 0.8, 60, 10 ** 9), L)
    return L - keep, L, np.zeros(fam.size, np.int64)


def cut_frag(rng, p, fam):
    """A random internal fragment (MIR, DNA): full-length with probability f.pfull."""
    L = p.clen[fam]
    pfull = np.array([f.pfull for f in p.fams])[fam]
    keep = (np.minimum(60, L) + rng.random(fam.size) * (L - np.minimum(60, L) + 1)).astype(np.int64)
    keep = np.where(rng.random(fam.size) < pfull, L, np.minimum(keep, L))
    cs = (rng.random(fam.size) * (L - keep + 1)).astype(np.int64)
    return cs, cs + keep, np.zeros(fam.size, np.int64)


def cut_ltr(rng, p, fam):
    """Solo LTRs (88 %, a fifth of them fragments) or full proviruses LTR-internal-LTR."""
    L = p.clen[fam]
    ltr = np.array([f.ltr for f in p.fams])[fam]
    full = rng.random(fam.size) < 0.12
    cs = np.zeros(fam.size, np.int64)
    ce = np.where(full, L, ltr)
    frag = ~full & (rng.random(fam.size) < 0.2)
    fl = (ltr * rng.uniform(0.3, 0.9, fam.size)).astype(np.int64)
    cs = np.where(frag, (rng.random(fam.size) * (ltr - fl)).astype(np.int64), cs)
    ce = np.where(frag, cs + fl, ce)
    return cs, ce, np.zeros(fam.size, np.int64)


def build_families(rng, names, a, mean_rng):
    """Consensus sequences of every family, and the plans of the interspersed classes."""
    plans, cons = [], []
    # Alu-like: a 7SL-derived dimer (left arm, A-rich linker, right arm with a 31 bp insertion),
    # GC-rich, CpG-rich; subfamilies form a tree J -> S -> Y with a few % between consensi.
    left = rand_gc(rng, 118, 0.63)
    right = subs(rng, left, 0.2)
    right = np.concatenate([right[:60], rand_gc(rng, 31, 0.63), right[60:]])
    root = np.concatenate([left, rand_comp(rng, 19, (0.7, 0.1, 0.1, 0.1)), right])
    tree = [("AluJo", None, 0.015, 0.12, 0.15, 0.20), ("AluJb", "AluJo", 0.02, 0.10, 0.15, 0.20),
            ("AluSx", "AluJo", 0.04, 0.26, 0.10, 0.16), ("AluSz", "AluSx", 0.015, 0.20, 0.10, 0.15),
            ("AluSp", "AluSx", 0.02, 0.20, 0.10, 0.14), ("AluY", "AluSx", 0.025, 0.12, 0.04, 0.10)]
    alus = {}
    for name, parent, d, share, lo, hi in tree:
        alus[name] = Fam(name, "SINE/Alu", subs(rng, alus[parent].cons if parent else root, d),
                         share, lo, hi)
    plans.append(ClassPlan("SINE/Alu", list(alus.values()), a.alu, 25.0, cut_alu, names, mean_rng))
    # L1-like: 5'UTR, ORF1, ORF2 (A-rich sense strand), 3'UTR ~ 6 kb; subfamilies from old (L1ME,
    # 21-25 % diverged copies) to young (L1HS-like, 3-4.5 %), 5'UTR replaced twice along the way.

    def utr5():
        return rand_gc(rng, int(rng.integers(880, 940)), 0.56)
    body = np.concatenate([rand_comp(rng, 1017, (0.32, 0.20, 0.25, 0.23)), rand_gc(rng, 63, 0.4),
                           rand_comp(rng, 3828, (0.36, 0.18, 0.21, 0.25)),
                           rand_comp(rng, 205, (0.35, 0.15, 0.20, 0.30))])
    body = deplete_cpg(rng, body, 0.3)
    l1tree = [("L1ME", 0.00, False, 0.18, 0.21, 0.25, 0.01), ("L1MB", 0.06, False, 0.22, 0.17, 0.23, 0.02),
              ("L1MA", 0.05, False, 0.24, 0.13, 0.19, 0.03), ("L1PB", 0.04, True, 0.12, 0.10, 0.15, 0.04),
              ("L1PA7", 0.03, False, 0.14, 0.07, 0.12, 0.06), ("L1PA3", 0.025, True, 0.08, 0.04, 0.08, 0.12),
              ("L1HS", 0.015, False, 0.02, 0.03, 0.045, 0.25)]
    l1s, u5 = [], utr5()
    for name, d, new5, share, lo, hi, pfull in l1tree:
        body = subs(rng, body, d) if d else body
        u5 = utr5() if new5 else (subs(rng, u5, d) if d else u5)
        l1s.append(Fam(name, "LINE/L1", np.concatenate([u5, body]), share, lo, hi, pfull=pfull))
    plans.append(ClassPlan("LINE/L1", l1s, a.l1, -25.0, cut_l1, names, mean_rng))
    # Older families (share of --other-te: MIR 15 %, L2 19 %, DNA 18 %, LTR 48 %, as in human).
    o = a.other_te

    def poor(s):
        return deplete_cpg(rng, s, 0.3)
    mir = [Fam("MIR", "SINE/MIR", poor(rand_gc(rng, 262, 0.50)), 1.0, 0.24, 0.34, pfull=0.1)]
    plans.append(ClassPlan("SINE/MIR", mir, 0.15 * o, 5.0, cut_frag, names, mean_rng))
    l2 = [Fam(n, "LINE/L2", poor(rand_gc(rng, 3300, 0.45)), 1.0, 0.24, 0.34) for n in ("L2a", "L2b")]
    plans.append(ClassPlan("LINE/L2", l2, 0.19 * o, 0.0, cut_l2, names, mean_rng))
    dna = []
    for i in range(40):
        c = float(rng.uniform(0.14, 0.28))
        n = int(np.exp(rng.uniform(np.log(180), np.log(2600))))
        dna.append(Fam(f"DNA{i + 1}", "DNA", poor(rand_gc(rng, n, 0.40)), 1.0 / (i + 2), c - 0.03, c + 0.03,
                       pfull=0.4))
    plans.append(ClassPlan("DNA", dna, 0.18 * o, 0.0, cut_frag, names, mean_rng))
    ltr = []
    for i in range(60):
        c = float(rng.uniform(0.06, 0.24))
        lt = poor(rand_gc(rng, int(rng.integers(300, 1001)), 0.45))
        internal = poor(rand_gc(rng, int(rng.integers(4500, 7501)), 0.42))
        ltr.append(Fam(f"ERV{i + 1}", "LTR", np.concatenate([lt, internal, lt]), 1.0 / (i + 2), c - 0.03,
                       c + 0.03, ltr=lt.size))
    plans.append(ClassPlan("LTR", ltr, 0.48 * o, -10.0, cut_ltr, names, mean_rng))
    for p in plans:
        cons += [(f.name, f.cons) for f in p.fams]
    # Satellites: an ancestral 171 bp alpha monomer; per HOR group an n-mer of monomers 18-30 %
    # apart; HSat2/3, beta satellite, telomere units.
    sat = {"alpha": deplete_cpg(rng, rand_comp(rng, 171, (0.33, 0.18, 0.20, 0.29)), 0.3)}
    for g in sorted({h[5] for h in HUMAN}):
        n = int(rng.integers(4, 17))
        mons = mutate_batch(rng, np.tile(sat["alpha"], n), np.full(n, 171), rng.uniform(0.18, 0.30, n),
                            indels=False, cpg=False)[0]
        sat["HOR_" + g] = mons
    sat["HSATII"] = subs(rng, np.tile(np.frombuffer(b"\x00\x03\x03\x01\x01", np.uint8), 5)[:23], 0.2)
    sat["HSATIII"] = np.array([0, 3, 3, 1, 1], np.uint8)          # (ATTCC)n
    sat["BSR"] = rand_gc(rng, 68, 0.5)
    sat["TEL"] = np.array([3, 3, 0, 2, 2, 2], np.uint8)            # (TTAGGG)n
    cons += [(k, v) for k, v in sat.items() if k != "TEL"]
    return plans, sat, cons


# ----------------------------------------------------------------------------------------------
# Per-contig construction
# ----------------------------------------------------------------------------------------------

class Recs:
    """Annotation records (column lists of arrays); coordinates relative to some origin."""
    F = ("start", "end", "name", "cls", "strand", "div", "cs", "ce", "tail")

    def __init__(self):
        self.cols = {f: [] for f in self.F}
        self.n = 0

    T = dict(start=np.int64, end=np.int64, name=np.int32, cls=np.int8, strand=np.int8,
             div=np.float32, cs=np.int64, ce=np.int64, tail=np.int32)

    def add(self, start, end, name, cls, strand=0, div=0.0, cs=-1, ce=-1, tail=0):
        start = np.atleast_1d(np.asarray(start, np.int64))
        m = start.size
        vals = dict(start=start, end=end, name=name, cls=cls, strand=strand, div=div, cs=cs, ce=ce, tail=tail)
        for f in self.F:
            self.cols[f].append(np.broadcast_to(np.asarray(vals[f], self.T[f]), (m,)).copy())
        self.n += m

    def arrays(self):
        return {f: (np.concatenate(v) if v else np.zeros(0, self.T[f])) for f, v in self.cols.items()}


class Block:
    """A run of satellites, telomere repeats and N gaps inserted as one unit."""

    def __init__(self):
        self.parts, self.recs, self.len = [], Recs(), 0

    def add(self, seq, name, cls, strand=0, div=0.0):
        if seq.size == 0:
            return
        self.recs.add(self.len, self.len + seq.size, name, cls, strand, div)
        self.parts.append(seq)
        self.len += seq.size

    def gap(self, n, names, kind):
        if n > 0:
            self.add(np.full(int(n), 4, np.uint8), names(kind), CL["gap"])

    def seq(self):
        return np.concatenate(self.parts) if self.parts else np.zeros(0, np.uint8)


def gen_copies(rng, plan, budget):
    """Copies of one interspersed class totalling about `budget` bp: list of piece batches."""
    if budget <= 0:
        return []
    n = int(budget / plan.mean_len * 1.15) + 8
    fam, cs, ce, tail = plan.spec(rng, n)
    keep = np.flatnonzero(np.cumsum(ce - cs + tail) <= budget)
    fam, cs, ce, tail = fam[keep], cs[keep], ce[keep], tail[keep]
    out = []
    csum = np.cumsum(ce - cs + tail)
    cuts = np.searchsorted(csum, np.arange(BATCH, csum[-1] if csum.size else 0, BATCH))
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, fam.size]):
        if hi <= lo:
            continue
        f, s, e, t = fam[lo:hi], cs[lo:hi], ce[lo:hi], tail[lo:hi]
        body, lens = e - s, e - s + t
        o = ragged_arange(lens)
        bl = np.repeat(body, lens)
        src = plan.seq[np.minimum(np.repeat(plan.off[f] + s, lens) + o, plan.seq.size - 1)]
        src[o >= bl] = 0                                            # poly-A tail
        div = rng.uniform(plan.dmin[f], plan.dmax[f]).astype(np.float32)
        seq, nl, ed = mutate_batch(rng, src, lens, div)
        strand = np.where(rng.random(f.size) < 0.5, 1, -1).astype(np.int8)
        revcomp_segments(seq, nl, strand < 0)
        out.append((seq, nl, dict(name=plan.name_id[f], cls=np.full(f.size, plan.cls, np.int8), strand=strand,
                                  div=(ed / lens).astype(np.float32), cs=s, ce=e, tail=t.astype(np.int32),
                                  pref=np.full(f.size, plan.pref, np.float32))))
    return out


DI = np.array([[1, 0], [3, 0], [2, 0], [1, 2]], np.uint8)       # CA, TA, GA, CG


def piece_meta(name, cls, strand, div, pref=0.0):
    """Annotation of pieces without a consensus (simple repeats, low complexity, CpG islands)."""
    n = len(name)
    return dict(name=np.asarray(name, np.int32), cls=np.full(n, cls, np.int8),
                strand=np.asarray(strand, np.int8), div=np.asarray(div, np.float32), cs=np.full(n, -1),
                ce=np.full(n, -1), tail=np.zeros(n, np.int32), pref=np.full(n, pref, np.float32))


def gen_simple(rng, names, budget):
    """Microsatellites (unit 1-6 bp; poly-A, (CA)n ... common) and low-complexity runs."""
    out = []
    n = int(budget / 45) + 4
    ul = rng.choice(np.arange(1, 7), n, p=[0.32, 0.28, 0.08, 0.20, 0.08, 0.04])
    units = rng.integers(0, 4, (n, 6), dtype=np.uint8)
    units[ul == 1, 0] = 0                                            # (A)n / (T)n by strand
    di = ul == 2
    units[di, :2] = DI[rng.choice(4, int(di.sum()), p=[0.55, 0.25, 0.17, 0.03])]
    lens = np.clip(12 + rng.geometric(1 / 28, n), 12, 300)
    lng = rng.random(n) < 0.06
    lens[lng] = rng.integers(100, 600, int(lng.sum()))
    keep = np.cumsum(lens) <= budget * 0.85
    ul, units, lens = ul[keep], units[keep], lens[keep]
    if lens.size:
        o = ragged_arange(lens)
        src = units[np.repeat(np.arange(lens.size), lens), o % np.repeat(ul, lens)]
        seq, nl, ed = mutate_batch(rng, src, lens, rng.uniform(0, 0.10, lens.size), cpg=False)
        strand = np.where(rng.random(lens.size) < 0.5, 1, -1).astype(np.int8)
        revcomp_segments(seq, nl, strand < 0)
        packed = (units.astype(np.int64) << (2 * np.arange(6))).sum(1) & ((1 << (2 * ul)) - 1)
        key = (ul.astype(np.int64) << 16) | packed
        uk, inv = np.unique(key, return_inverse=True)
        ids = np.array([names("(" + "".join("ACGT"[(int(k) >> (2 * j)) & 3] for j in range(int(k) >> 16))
                              + ")n") for k in uk], np.int32)
        out.append((seq, nl, piece_meta(ids[inv], CL["Simple_repeat"], strand, ed / lens)))
    # low complexity: purine-rich, AT-rich, A-rich runs of 30-300 bp
    m = int(budget * 0.15 / 110) + 1
    kinds = [("GA-rich", (0.45, 0.04, 0.47, 0.04)), ("AT_rich", (0.47, 0.03, 0.03, 0.47)),
             ("A-rich", (0.80, 0.06, 0.08, 0.06))]
    k = rng.integers(0, 3, m)
    lens = rng.integers(30, 301, m)
    keep = np.cumsum(lens) <= budget * 0.15
    k, lens = k[keep], lens[keep]
    if lens.size:
        seq = _lowc_vec(rng, k, lens, kinds)
        strand = np.where(rng.random(lens.size) < 0.5, 1, -1).astype(np.int8)
        revcomp_segments(seq, lens, strand < 0)
        ids = np.array([names(n) for n, _ in kinds], np.int32)
        out.append((seq, lens.astype(np.int64), piece_meta(ids[k], CL["Low_complexity"], strand,
                                                           np.zeros(lens.size))))
    return out


def _lowc_vec(rng, k, lens, kinds):
    t = np.array([np.cumsum(p)[:-1] for _, p in kinds], np.float32)[np.repeat(k, lens)]
    u = rng.random(int(lens.sum()), dtype=np.float32)
    return ((u >= t[:, 0]).view(np.uint8) + (u >= t[:, 1]).view(np.uint8) + (u >= t[:, 2]).view(np.uint8))


def gen_cpg_islands(rng, names, L):
    n = rng.poisson(L / 100_000)
    lens = _lognorm_len(rng, n, 800, 0.5, 300, 4000)
    if n == 0:
        return []
    seq = rand_gc(rng, int(lens.sum()), 0.65)
    return [(seq, lens, piece_meta(np.full(n, names("CpG"), np.int32), CL["CpG_island"], np.zeros(n, np.int8),
                                   np.zeros(n), pref=40.0))]


def isochore_background(rng, n, gc_mean):
    """Isochore-like background: domains of 50-500 kb (100 kb-1 Mb once repeats are inserted) with
    GC following an AR(1) walk around gc_mean (sd ~6 %, neighbours correlated 0.7 so that runs of
    domains form multi-Mb isochores), then CpG depletion (obs/exp ~0.25)."""
    if n <= 0:
        return np.zeros(0, np.uint8), np.zeros(1, np.int64), np.ones(1, np.int64), np.full(1, gc_mean)
    lens = []
    tot = 0
    while tot < n:
        d = np.exp(rng.uniform(np.log(50_000), np.log(500_000), 64)).astype(np.int64)
        lens.append(d)
        tot += int(d.sum())
    lens = np.concatenate(lens)
    lens = lens[:np.searchsorted(np.cumsum(lens), n) + 1]
    lens[-1] -= int(lens.sum()) - n
    lens = lens[lens > 0]
    dev = np.zeros(lens.size)
    e = rng.normal(0, 0.06 * np.sqrt(1 - 0.7 ** 2), lens.size)
    for i in range(lens.size):
        dev[i] = (0.7 * dev[i - 1] if i else rng.normal(0, 0.06)) + e[i]
    gc = np.clip(gc_mean + dev - np.average(dev, weights=lens), 0.28, 0.64)
    seq = np.empty(n, np.uint8)
    pos = 0
    for n_d, g in zip(lens, gc):
        g2 = g + 0.75 * (g / 2) ** 2          # what CpG depletion will take away
        seq[pos:pos + n_d] = rand_gc(rng, n_d, g2)
        pos += n_d
    deplete_cpg(rng, seq)
    return seq, np.cumsum(lens) - lens, lens, gc


def build_arm_seq(rng, names, plans, L, scale, gc_target):
    """Layer A: background with interspersed repeats, simple repeats and CpG islands pasted in.
    Returns seq, piece mask, Recs."""
    pieces = []
    for p in plans:
        pieces += gen_copies(rng, p, p.frac * L * scale)
    pieces += gen_simple(rng, names, 0.02 * L * scale)
    pieces += gen_cpg_islands(rng, names, L * scale)
    if pieces:
        flat = np.concatenate([p[0] for p in pieces])
        lens = np.concatenate([p[1] for p in pieces])
        meta = {k: np.concatenate([p[2][k] for p in pieces]) for k in pieces[0][2]}
    else:
        flat, lens, meta = np.zeros(0, np.uint8), np.zeros(0, np.int64), None
    del pieces
    # tiny contigs: drop pieces that cannot fit
    if lens.size and (lens.sum() > 0.7 * L or lens.max() > 0.3 * L):
        perm = rng.permutation(lens.size)
        ok = np.zeros(lens.size, bool)
        pl = np.where(lens[perm] > 0.3 * L, 0, lens[perm])
        ok[perm[(np.cumsum(pl) <= 0.7 * L) & (pl > 0)]] = True
        offs = np.cumsum(lens) - lens
        flat = flat[np.repeat(offs[ok], lens[ok]) + ragged_arange(lens[ok])]
        lens = lens[ok]
        meta = {k: v[ok] for k, v in meta.items()}
    Lp = int(lens.sum())
    Lb = L - Lp
    gc_pieces = int(np.count_nonzero((flat == 1) | (flat == 2)))
    need = float(np.clip((gc_target * L - gc_pieces) / max(Lb, 1), 0.30, 0.56))
    bg, dstart, dlen, dgc = isochore_background(rng, Lb, need)
    seq = np.empty(L, np.uint8)
    recs = Recs()
    if lens.size == 0:
        seq[:] = bg
        return seq, np.zeros(L, bool), recs
    # cut points in background coordinates, by GC domain with a per-class preference
    cut = np.empty(lens.size, np.int64)
    pref = meta["pref"]
    for k in np.unique(pref):
        sel = np.flatnonzero(pref == k)
        w = dlen * np.exp(k * (dgc - np.average(dgc, weights=dlen)))
        d = rng.choice(dlen.size, sel.size, p=w / w.sum())
        cut[sel] = dstart[d] + (rng.random(sel.size) * dlen[d]).astype(np.int64)
    order = np.lexsort((rng.random(lens.size), cut))
    lo = lens[order]
    pstart = cut[order] + np.cumsum(lo) - lo
    mark = np.zeros(L + 1, np.int8)
    np.add.at(mark, pstart, 1)
    np.add.at(mark, pstart + lo, -1)
    isp = np.cumsum(mark[:-1], dtype=np.int8).view(bool)
    del mark
    seq[~isp] = bg
    del bg
    offs = np.cumsum(lens) - lens
    cl = np.cumsum(lo)
    bounds = np.searchsorted(cl, np.arange(BATCH, cl[-1], BATCH))
    for i, j in zip(np.r_[0, bounds], np.r_[bounds, lo.size]):
        oi = order[i:j]
        r = ragged_arange(lens[oi])
        seq[np.repeat(pstart[i:j], lens[oi]) + r] = flat[np.repeat(offs[oi], lens[oi]) + r]
    m = {k: v[order] for k, v in meta.items()}
    recs.add(pstart, pstart + lo, m["name"], m["cls"], m["strand"], m["div"], m["cs"], m["ce"], m["tail"])
    return seq, isp, recs


def sat_block_alpha(rng, names, sat, group, length):
    """Alpha satellite: HOR array (copies 1-3 % apart) with monomeric flanks (monomers 12-25 %
    from the ancestral monomer), `length` bp in all, as a Block: flank first, then the HOR array."""
    b = Block()
    hor = sat["HOR_" + group]
    flank = int(length * 0.1) // 171
    if flank:
        mons, nl, ed = mutate_batch(rng, np.tile(sat["alpha"], flank), np.full(flank, 171),
                                    rng.uniform(0.12, 0.25, flank), cpg=False)
        mons = mons[:int(length)]
        b.add(mons, names("ALR/Alpha_monomeric"), CL["Satellite"], 1, float(ed.sum() / (171 * flank)))
    n_hor = int(length) - b.len
    d = float(rng.uniform(0.01, 0.03))
    arr, e = tandem(rng, hor, n_hor, d)
    b.add(arr, names("ALR/Alpha_HOR_" + group), CL["Satellite"], 1, e / max(n_hor, 1))
    return b


def plan_contigs(rng, size, a):
    """Lengths and fixed blocks (sizes only) of every contig; returns list of dicts."""
    f = size / HUMAN_TOTAL
    un = np.maximum(2000, (size * UNPLACED_SHARE * rng.dirichlet(np.ones(N_UNPLACED) * 2))).astype(np.int64)
    chrom_total = size - int(un.sum())
    lens = np.floor(np.array([h[1] for h in HUMAN], np.float64) * chrom_total / HUMAN_TOTAL).astype(np.int64)
    lens[0] += chrom_total - int(lens.sum())
    gaps = 0 if a.no_gaps else 1
    plans = []
    for (name, hl, cen, acro, het, grp), L, gc in zip(HUMAN, lens, CHR_GC):
        L = int(L)
        p = dict(name=name, L=L, cen=cen * 1e6 / hl, acro=acro, group=grp, placed=True,
                 gc=a.gc * gc / CHR_GC_MEAN)
        p["tel_gap"] = gaps * int(min(10_000, 0.002 * L))
        p["tel_rep"] = int(min(rng.uniform(2000, 6000), 0.003 * L))
        p["cen_gap"] = gaps * int(rng.uniform(0.5e6, 3e6) * f)
        p["alpha"] = [int(rng.uniform(0.3e6, 1.5e6) * f) for _ in range(2)]
        p["het_gap"] = gaps * int(het * 1e6 * f)
        p["het_sat"] = int(rng.uniform(0.5e6, 1e6) * f) if het else 0
        parm = int(cen * 1e6 * f) if acro else 0
        p["parm_gap"] = gaps * int(0.8 * parm)
        p["parm_sat"] = [int(0.1 * parm), int(0.1 * parm)]
        fixed = (2 * (p["tel_gap"] + p["tel_rep"]) + p["cen_gap"] + sum(p["alpha"]) + p["het_gap"]
                 + p["het_sat"] + p["parm_gap"] + sum(p["parm_sat"]))
        if fixed > 0.5 * L:                  # tiny genomes: shrink the fixed blocks
            s = 0.5 * L / fixed
            for k in ("tel_gap", "tel_rep", "cen_gap", "het_gap", "het_sat", "parm_gap"):
                p[k] = int(p[k] * s)
            p["alpha"] = [int(x * s) for x in p["alpha"]]
            p["parm_sat"] = [int(x * s) for x in p["parm_sat"]]
            fixed = (2 * (p["tel_gap"] + p["tel_rep"]) + p["cen_gap"] + sum(p["alpha"]) + p["het_gap"]
                     + p["het_sat"] + p["parm_gap"] + sum(p["parm_sat"]))
        p["eu"] = L - fixed
        plans.append(p)
    sd_scale = size / sum(p["eu"] for p in plans)
    for p in plans:
        eu = p["eu"]
        # scattered gaps, 0.3 % of the euchromatin in runs of 100 bp - 100 kb
        g = np.exp(rng.uniform(np.log(100), np.log(max(101, min(100_000, eu // 50))), 64)).astype(np.int64)
        g = g[np.cumsum(g) <= 0.003 * eu * gaps]
        p["gaps"] = g
        # segmental duplications: 1-100 kb (log-uniform; at most 5 % of the chromosome each),
        # in all `a.sd` of the genome
        hi = max(1000, min(100_000, eu // 20))
        budget = a.sd * eu * sd_scale
        sd, tot = [], 0
        draws = np.exp(rng.uniform(np.log(min(1000, hi)), np.log(hi), int(budget / 1000) + 20))
        draws = draws.astype(np.int64)
        for x in draws:
            if tot + x <= budget:          # fill the budget (skip lengths that overshoot)
                sd.append(x)
                tot += int(x)
        p["sd"] = np.array(sd, np.int64)
        p["LA"] = eu - int(g.sum()) - int(p["sd"].sum())
    for i, L in enumerate(un):
        L = int(L)
        s = int(L * rng.uniform(0.3, 0.7))
        plans.append(dict(name=f"chrUn_{i + 1}", L=L, placed=False, sat=s, LA=L - s, gc=a.gc,
                          sat_kind=["alpha", "HSATII"][i % 2], group=HUMAN[i % 24][5]))
    return plans


def build_contig(rng, names, plans, sat, p, scale, a, donors):
    """Final sequence (codes) and annotation arrays of one contig."""
    LA = p["LA"]
    seq, isp, recs = build_arm_seq(rng, names, plans, LA, scale, p["gc"])
    blocks = []       # (point in layer A, priority, Block, sd source or None)
    if not p["placed"]:
        b = Block()
        if p["sat_kind"] == "alpha":
            b = sat_block_alpha(rng, names, sat, p["group"], p["sat"])
        else:
            arr, e = tandem(rng, sat["HSATII"], p["sat"], 0.12)
            b.add(arr, names("HSATII"), CL["Satellite"], 1, e / max(p["sat"], 1))
        blocks.append((0, -1, b, None))
    else:
        def points(m, near=None):
            """m insertion points in layer A, each before a background base (never inside a piece)."""
            out = np.zeros(m, np.int64)
            todo = np.arange(m)
            for _ in range(200):
                if todo.size == 0 or LA == 0:
                    break
                x = rng.integers(0, LA, todo.size)
                if near is not None:           # half near the centromere / ends (SD hotspots)
                    h = rng.random(todo.size) < 0.5
                    w = max(20_000, int(0.03 * LA))
                    c = np.array(near)[rng.integers(0, len(near), todo.size)]
                    x = np.where(h, np.clip(c + rng.integers(-w, w + 1, todo.size), 0, LA - 1), x)
                ok = ~isp[x]
                out[todo[ok]] = x[ok]
                todo = todo[~ok]
            return out
        # p arm end (+ short arm of an acrocentric), centromere (+ heterochromatin), q arm end
        names_tel = names("(CCCTAA)n"), names("(TTAGGG)n")
        pb = Block()
        pb.gap(p["tel_gap"], names, "telomere")
        arr, e = tandem(rng, 3 - sat["TEL"][::-1], p["tel_rep"], 0.01)
        pb.add(arr, names_tel[0], CL["Simple_repeat"], 1, e / max(arr.size, 1))
        cb = Block()
        if p["acro"]:
            cb.gap(p["parm_gap"], names, "short_arm")
            arr, e = tandem(rng, sat["HSATIII"], p["parm_sat"][0], 0.12)
            cb.add(arr, names("HSATIII"), CL["Satellite"], 1, e / max(arr.size, 1))
            arr, e = tandem(rng, sat["BSR"], p["parm_sat"][1], 0.10)
            cb.add(arr, names("BSR/Beta"), CL["Satellite"], 1, e / max(arr.size, 1))
        a1 = sat_block_alpha(rng, names, sat, p["group"], p["alpha"][0])
        a2 = sat_block_alpha(rng, names, sat, p["group"], p["alpha"][1])
        for blk, rev in ((a1, False), (None, None), (a2, True)):
            if blk is None:
                cb.gap(p["cen_gap"], names, "centromere")
                continue
            r = blk.recs.arrays()
            parts = list(zip(blk.parts, r["name"], r["div"]))
            for part, nm, dv in (parts[::-1] if rev else parts):
                cb.add(part, int(nm), CL["Satellite"], 1, float(dv))
        if p["het_gap"] or p["het_sat"]:
            kind = "HSATIII" if p["name"] == "chrY" else "HSATII"
            arr, e = tandem(rng, sat[kind], p["het_sat"] // 2, 0.12)
            hb = cb if p["name"] != "chrY" else Block()
            hb.add(arr, names(kind), CL["Satellite"], 1, e / max(arr.size, 1))
            hb.gap(p["het_gap"], names, "heterochromatin")
            arr, e = tandem(rng, sat[kind], p["het_sat"] - p["het_sat"] // 2, 0.12)
            hb.add(arr, names(kind), CL["Satellite"], 1, e / max(arr.size, 1))
            if p["name"] == "chrY":
                blocks.append((LA, 0, hb, None))
        # segmental duplications: 40 % from an earlier chromosome (when one has a long enough
        # window), else from this one; diverged uniformly within --sd-div (1-5 %), either orientation
        sdl = p["sd"]
        if sdl.size:
            srcs, meta = [], []
            for L in sdl:
                L = int(L)
                cand = [d for d in donors if d[2].size >= L] if rng.random() < 0.4 else []
                if cand:
                    dn, dstart, dseq = cand[int(rng.integers(0, len(cand)))]
                    o = int(rng.integers(0, dseq.size - L + 1))
                    srcs.append(dseq[o:o + L])
                    meta.append((dn, dstart + o, dstart + o + L, None))
                else:
                    o = int(rng.integers(0, max(1, LA - L + 1)))
                    srcs.append(seq[o:o + L])
                    meta.append((None, o, o + L, None))
                    isp[o + 1:o + L] = True        # no insertion inside a source
            slen = np.array([s.size for s in srcs], np.int64)
            div = rng.uniform(a.sd_div[0], a.sd_div[1], slen.size).astype(np.float32)
            mseq, nl, ed = mutate_batch(rng, np.concatenate(srcs), slen, div)
            strand = np.where(rng.random(slen.size) < 0.5, 1, -1).astype(np.int8)
            revcomp_segments(mseq, nl, strand < 0)
            offs = np.cumsum(nl) - nl
        cpt = 0
        if not p["acro"] and LA:
            t = min(int(p["cen"] * LA), LA - 1)
            f = np.flatnonzero(~isp[t:t + 1_000_000])
            cpt = t + int(f[0]) if f.size else t
        blocks.append((0, -2, pb, None))
        blocks.append((cpt, -1 if p["acro"] else 0, cb, None))
        # scattered gaps
        for x, g in zip(points(p["gaps"].size), p["gaps"]):
            b = Block()
            b.gap(g, names, "contig_gap")
            blocks.append((int(x), 0, b, None))
        if sdl.size:
            pts = points(slen.size, near=[0, LA, cpt])
            for k in range(slen.size):
                b = Block()
                b.add(mseq[offs[k]:offs[k] + nl[k]], names("SD"), CL["Segmental_dup"], int(strand[k]),
                      float(ed[k] / max(slen[k], 1)))
                blocks.append((int(pts[k]), 0, b, meta[k]))
        # q arm end, its N gap absorbing the length change of the SD indels
        qb = Block()
        arr, e = tandem(rng, sat["TEL"], p["tel_rep"], 0.01)
        qb.add(arr, names_tel[1], CL["Simple_repeat"], 1, e / max(arr.size, 1))
        total = LA + sum(b[2].len for b in blocks) + qb.len
        if a.no_gaps:
            qb.parts.append(rand_gc(rng, max(0, p["L"] - total), a.gc))
            qb.len += qb.parts[-1].size
        else:
            qb.gap(max(0, p["L"] - total), names, "telomere")
        blocks.append((LA, 1, qb, None))
    blocks.sort(key=lambda t: (t[0], t[1]))
    pts = np.array([b[0] for b in blocks], np.int64)
    bl = np.array([b[2].len for b in blocks], np.int64)
    shift = np.cumsum(bl)

    def remap(x, side):
        i = np.searchsorted(pts, x, side=side)
        return x + np.where(i > 0, shift[np.maximum(i - 1, 0)], 0)
    parts, last = [], 0
    for (pt, _, b, _), l in zip(blocks, bl):
        parts.append(seq[last:pt])
        parts.append(b.seq())
        last = pt
    parts.append(seq[last:])
    out = np.concatenate(parts)
    del parts, seq
    r = recs.arrays()
    if recs.n:
        r["start"], r["end"] = remap(r["start"], "right"), remap(r["end"], "left")
    allr = [r]
    src = {}
    n0 = recs.n
    bstart = pts + shift - bl
    for (pt, _, b, m), s in zip(blocks, bstart):
        br = b.recs.arrays()
        if b.recs.n == 0:
            continue
        br["start"] = br["start"] + s
        br["end"] = br["end"] + s
        if m is not None:
            dn, a0, a1, _ = m
            if dn is None:
                dn = p["name"]
                a0 = int(remap(np.array([a0]), "right")[0])
                a1 = int(remap(np.array([a1]), "left")[0])
            src[n0] = f"{dn}:{a0}-{a1}"
        n0 += b.recs.n
        allr.append(br)
    r = {k: np.concatenate([x[k] for x in allr]) for k in allr[0]}
    if out.size > p["L"]:                      # only if the q-end gap could not absorb it
        out = out[:p["L"]]
        keep = r["start"] < out.size
        r = {k: v[keep] for k, v in r.items()}
        r["end"] = np.minimum(r["end"], out.size)
        newidx = np.cumsum(keep) - 1
        src = {int(newidx[i]): v for i, v in src.items() if keep[i]}
    return out, r, src


# ----------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------

def write_fasta(fh, name, codes, width, lower=None):
    """Write one record straight from the code array; returns the .fai line."""
    fh.write(f">{name}\n".encode())
    off = fh.tell()
    rows = 1 << 18
    step = width * rows
    for s in range(0, codes.size, step):
        c = codes[s:s + step]
        asc = LUT[c + 5 * lower[s:s + step]] if lower is not None else LUT[c]
        full = asc.size // width
        m = np.empty((full, width + 1), np.uint8)
        m[:, :width] = asc[:full * width].reshape(full, width)
        m[:, width] = 10
        fh.write(m.tobytes())
        if asc.size > full * width:
            fh.write(asc[full * width:].tobytes() + b"\n")
    return f"{name}\t{codes.size}\t{off}\t{width}\t{width + 1}\n"


def write_bed(fh, name, r, src, names):
    order = np.argsort(r["start"], kind="stable")
    nm = names.names
    st = {1: "+", -1: "-", 0: "."}
    cols = [r[k][order].tolist()
            for k in ("start", "end", "name", "cls", "strand", "div", "cs", "ce", "tail")]
    lines = []
    for j, (s, e, n, c, sd, d, cs, ce, t) in enumerate(zip(*cols)):
        lines.append(f"{name}\t{s}\t{e}\t{nm[n]}\t{min(1000, int(d * 1000))}\t{st[sd]}\t{CLASSES[c]}\t"
                     f"{d:.4f}\t{cs}\t{ce}\t{t}\t{src.get(int(order[j]), '.')}\n")
    fh.write("".join(lines))


def parse_size(s):
    s = s.strip().upper().rstrip("B").rstrip("P")
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}
    if s and s[-1] in mult:
        return int(round(float(s[:-1]) * mult[s[-1]]))
    return int(float(s))


def human_main(a):
    import sys
    import time
    t0 = time.time()
    size = parse_size(a.size)
    if size < 1_000_000:
        sys.exit("--size: at least 1M")
    stem = a.out[:-len(a.out.split(".")[-1]) - 1] if a.out.split(".")[-1] in ("fa", "fasta", "fna") else a.out
    bed_path = a.bed or stem + ".repeats.bed"
    cons_path = a.consensus or stem + ".consensus.fa"
    ss = np.random.SeedSequence(a.seed)
    s_fam, s_plan, s_mean, *s_contigs = ss.spawn(3 + len(HUMAN) + N_UNPLACED)
    names = Names()
    plans, sat, cons = build_families(np.random.default_rng(s_fam), names, a, np.random.default_rng(s_mean))
    cplans = plan_contigs(np.random.default_rng(s_plan), size, a)
    # interspersed-repeat budgets are set per bp of layer A so that genome-wide they reach the
    # requested share of the whole genome (N and satellites included)
    scale = size / sum(p["LA"] for p in cplans)
    donors = []
    stats = np.zeros(5, np.int64)
    cls_bp = np.zeros(len(CLASSES), np.int64)
    cpg = 0
    fai = []
    with open(a.out, "wb") as fa, open(bed_path, "w") as bed:
        cols = ["chrom", "start", "end", "name", "score", "strand", "class", "div", "cons_start", "cons_end",
                "polyA", "source"]
        bed.write("#" + "\t".join(cols) + "\n")
        for p, sc in zip(cplans, s_contigs):
            rng = np.random.default_rng(sc)
            seq, r, src = build_contig(rng, names, plans, sat, p, scale, a, donors)
            lower = None
            if a.softmask:
                rep = ~np.isin(r["cls"], NOT_REPEAT)
                mark = np.zeros(seq.size + 1, np.int8)
                np.add.at(mark, r["start"][rep], 1)
                np.add.at(mark, r["end"][rep], -1)
                lower = (np.cumsum(mark[:-1], dtype=np.int8) > 0).view(np.uint8)
                del mark
            fai.append(write_fasta(fa, p["name"], seq, a.width, lower))
            write_bed(bed, p["name"], r, src, names)
            c = np.bincount(seq, minlength=5)
            stats += c
            cpg += int(np.count_nonzero((seq[:-1] == 1) & (seq[1:] == 2)))
            cls_bp += np.bincount(r["cls"], weights=r["end"] - r["start"],
                                  minlength=len(CLASSES)).astype(np.int64)
            if p["placed"] and p["name"] != "chrY":      # windows for later interchromosomal SDs
                w = int(min(100_000, p["L"] // 20))
                for _ in range(30):
                    o = int(rng.integers(0, seq.size - w))
                    if not (seq[o:o + w] == 4).any():
                        donors.append((p["name"], o, seq[o:o + w].copy()))
            if not a.quiet:
                acgt = c[:4].sum()
                rep = (r["end"] - r["start"])[~np.isin(r["cls"], NOT_REPEAT)].sum()
                print(f"{p['name']}: {seq.size:,} bp, GC {(c[1] + c[2]) / max(acgt, 1):.1%}, "
                      f"N {c[4] / seq.size:.1%}, "
                      f"repeats {rep / seq.size:.1%}, {r['start'].size:,} records ({time.time() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
            del seq, r, lower
    with open(a.out + ".fai", "w") as fh:
        fh.write("".join(fai))
    with open(cons_path, "w") as fh:
        for n, s in cons:
            t = LUT[s].tobytes().decode()
            fh.write(f">{n}\n" + "\n".join(t[i:i + 60] for i in range(0, len(t), 60)) + "\n")
    tot = int(stats.sum())
    acgt = int(stats[:4].sum())
    gcf = (stats[1] + stats[2]) / acgt
    exp_cg = stats[1] / acgt * stats[2] / acgt * acgt
    print(f"{tot:,} bp in {len(cplans)} contigs -> {a.out} ({time.time() - t0:.0f} s)")
    print(f"GC {gcf:.2%} (of ACGT), N {stats[4] / tot:.2%}, CpG obs/exp {cpg / exp_cg:.2f}")
    rep = sum(int(cls_bp[i]) for i in range(len(CLASSES)) if i not in NOT_REPEAT)
    print(f"repeats {rep / tot:.1%}: " + ", ".join(f"{CLASSES[i]} {cls_bp[i] / tot:.2%}"
                                                   for i in range(len(CLASSES)) if cls_bp[i]))
    print(f"annotation -> {bed_path}, consensus sequences -> {cons_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Human-like mode: see docs/genomes.md for what is modelled.")
    ap.add_argument("--out", required=True, help="output FASTA")
    ap.add_argument("--seed", type=int, default=1)
    g = ap.add_argument_group("E. coli-based 30 Mbp genome (the original mode)")
    g.add_argument("--ecoli", help="E. coli FASTA(.gz); selects this mode")
    g.add_argument("--contigs", type=int, default=6)
    g.add_argument("--contig-len", type=int, default=4_300_000)
    h = ap.add_argument_group("human-like genome")
    h.add_argument("--size", help="total length: 50M, 1G, 3.1G, 5000000 ... (selects this mode)")
    h.add_argument("--bed", help="annotation BED (default: OUT without .fa + .repeats.bed)")
    h.add_argument("--consensus", help="consensus FASTA (default: OUT without .fa + .consensus.fa)")
    h.add_argument("--gc", type=float, default=0.41, help="GC of the non-N sequence (0.41)")
    h.add_argument("--alu", type=float, default=0.10, help="Alu-like share of the genome (0.10)")
    h.add_argument("--l1", type=float, default=0.17, help="L1-like share (0.17)")
    h.add_argument("--other-te", type=float, default=0.166,
                   help="MIR/L2/DNA/LTR-like share (0.166)")
    h.add_argument("--sd", type=float, default=0.05, help="segmental-duplication share (0.05)")
    h.add_argument("--sd-div", default="0.01,0.05", metavar="LO,HI",
                   help="divergence range of segmental duplications (0.01,0.05)")
    h.add_argument("--no-gaps", action="store_true", help="no N at all (gaps become sequence)")
    h.add_argument("--softmask", action="store_true", help="repeats in lower case")
    h.add_argument("--width", type=int, default=60, help="FASTA line width (60)")
    h.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    a.sd_div = tuple(float(x) for x in a.sd_div.split(","))
    if len(a.sd_div) != 2 or not 0 <= a.sd_div[0] <= a.sd_div[1] < 0.5:
        ap.error("--sd-div: LO,HI with 0 <= LO <= HI < 0.5")
    if a.ecoli and a.size:
        ap.error("--ecoli and --size are two different modes")
    if a.ecoli:
        ecoli_main(a)
    elif a.size:
        human_main(a)
    else:
        ap.error("give --ecoli FILE (30 Mbp E. coli-based genome) or --size SIZE (human-like genome)")


if __name__ == "__main__":
    main()
