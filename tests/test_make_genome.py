"""scripts/make_genome.py: the human-like synthetic genome (--size) and the original E. coli mode.

A 5 Mbp genome is generated once (about a second) and checked for sizes, contigs, composition, N
gaps and an annotation that agrees with the sequence (copies within their stated divergence of the
consensus, measured with edlib); same seed -> identical files, other seed -> other sequence.
"""
import collections
import hashlib
import importlib.util
import os
import subprocess
import sys

import edlib
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "make_genome.py")
ECOLI = os.path.join(ROOT, "..", "shared", "data", "ecoli_MG1655.fa.gz")
SIZE = 5_000_000
COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")


def _load():
    spec = importlib.util.spec_from_file_location("make_genome", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mg = _load()


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], check=True, capture_output=True, text=True)


def read_fasta(path):
    seqs, name, buf = {}, None, []
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if name is not None:
                    seqs[name] = "".join(buf)
                name, buf = line[1:].strip(), []
            else:
                buf.append(line.rstrip("\n"))
    seqs[name] = "".join(buf)
    return seqs


def read_bed(path):
    rows = []
    with open(path) as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            f = line.rstrip("\n").split("\t")
            rows.append(dict(chrom=f[0], start=int(f[1]), end=int(f[2]), name=f[3], strand=f[5], cls=f[6],
                             div=float(f[7]), cs=int(f[8]), ce=int(f[9]), tail=int(f[10]), src=f[11]))
    return rows


def md5(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    d = tmp_path_factory.mktemp("genome")
    out = str(d / "g.fa")
    res = run("--size", "5M", "--seed", "3", "--out", out, "--quiet")
    return dict(fa=out, bed=str(d / "g.repeats.bed"), cons=str(d / "g.consensus.fa"), log=res.stdout,
                seqs=read_fasta(out), rows=read_bed(str(d / "g.repeats.bed")),
                consensus=read_fasta(str(d / "g.consensus.fa")), dir=d)


def test_parse_size():
    assert mg.parse_size("3.1G") == 3_100_000_000
    assert mg.parse_size("50M") == 50_000_000
    assert mg.parse_size("1g") == 1_000_000_000
    assert mg.parse_size("500k") == 500_000
    assert mg.parse_size("5000000") == 5_000_000


def test_sizes_and_contigs(genome):
    seqs = genome["seqs"]
    assert sum(len(s) for s in seqs.values()) == SIZE
    names = list(seqs)
    assert names[:24] == [f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"]
    assert len(names) == 32 and all(n.startswith("chrUn_") for n in names[24:])
    # human-like relative lengths: chr1 / chr21 as in GRCh38 (248.96 / 46.71 Mbp)
    assert len(seqs["chr1"]) / len(seqs["chr21"]) == pytest.approx(248956422 / 46709983, rel=0.01)
    assert sum(len(seqs[n]) for n in names[24:]) < 0.01 * SIZE
    # FASTA: 60 columns, and the .fai written alongside points at every sequence
    with open(genome["fa"], "rb") as fh:
        data = fh.read()
    assert max(len(line) for line in data.split(b"\n")) == 60
    for line in open(genome["fa"] + ".fai"):
        name, length, off, lb, lw = line.split()
        assert int(length) == len(seqs[name]) and (lb, lw) == ("60", "61")
        assert data[int(off):int(off) + 60].decode() == seqs[name][:60]


def test_composition(genome):
    s = "".join(genome["seqs"].values())
    c = collections.Counter(s)
    acgt = c["A"] + c["C"] + c["G"] + c["T"]
    assert acgt + c["N"] == len(s)                       # upper case, nothing else
    assert (c["G"] + c["C"]) / acgt == pytest.approx(0.41, abs=0.015)
    assert 0.02 < c["N"] / len(s) < 0.10
    cpg_oe = s.count("CG") * acgt / (c["C"] * c["G"])
    assert cpg_oe < 0.5                                  # CpG depleted (human ~0.2-0.25)
    # chromosomes differ in GC as in human (chr19 and chr22 GC-rich, chr4 and chr13 AT-rich)
    gc = {n: (x.count("G") + x.count("C")) / (len(x) - x.count("N")) for n, x in genome["seqs"].items()}
    assert min(gc["chr19"], gc["chr22"]) > max(gc["chr4"], gc["chr13"]) + 0.04
    # low-complexity runs and poly-A exist
    assert s.count("A" * 25) + s.count("T" * 25) > 20


def test_isochores():
    """Background GC in domains of 50-500 kb (100 kb-1 Mb after insertions), CpG-depleted."""
    rng = np.random.default_rng(1)
    seq, dstart, dlen, dgc = mg.isochore_background(rng, 4_000_000, 0.39)
    assert seq.size == 4_000_000 and dlen.sum() == seq.size
    assert 50_000 <= np.median(dlen) <= 500_000 and np.std(dgc) > 0.03
    w = seq[:3_900_000].reshape(-1, 100_000)
    gc = ((w == 1) | (w == 2)).mean(1)
    assert np.std(gc) > 0.02 and abs(gc.mean() - 0.39) < 0.02      # i.i.d.: sd 0.0015
    cg = np.count_nonzero((seq[:-1] == 1) & (seq[1:] == 2))
    assert cg / seq.size / (np.mean(seq == 1) * np.mean(seq == 2)) < 0.35


def test_repeat_shares(genome):
    rows = genome["rows"]
    bp = collections.Counter()
    for r in rows:
        bp[r["cls"]] += r["end"] - r["start"]
    share = {k: v / SIZE for k, v in bp.items()}
    assert share["SINE/Alu"] == pytest.approx(0.10, abs=0.015)
    assert share["LINE/L1"] == pytest.approx(0.17, abs=0.03)
    assert share["Segmental_dup"] == pytest.approx(0.05, abs=0.015)
    assert share["Satellite"] > 0.005 and share["Simple_repeat"] > 0.005
    old = share["LTR"] + share["DNA"] + share["SINE/MIR"] + share["LINE/L2"]
    assert old == pytest.approx(0.166, abs=0.03)
    rep = sum(v for k, v in share.items() if k not in ("gap", "CpG_island"))
    assert 0.45 < rep < 0.60
    n_alu = sum(r["cls"] == "SINE/Alu" for r in rows)
    assert n_alu == pytest.approx(1e6 * SIZE / 3.1e9, rel=0.25)          # ~1 M per 3.1 Gbp
    assert "SINE/Alu" in genome["log"] and "GC" in genome["log"]


def test_annotation_layout(genome):
    seqs, rows = genome["seqs"], genome["rows"]
    by = collections.defaultdict(list)
    for r in rows:
        assert 0 <= r["start"] < r["end"] <= len(seqs[r["chrom"]])
        by[r["chrom"]].append(r)
    for chrom, rs in by.items():
        for a, b in zip(rs, rs[1:]):
            assert a["start"] <= b["start"] and a["end"] <= b["start"], (chrom, a, b)   # sorted, disjoint
    # N exactly where gaps are annotated
    n_gap = sum(r["end"] - r["start"] for r in rows if r["cls"] == "gap")
    assert n_gap == sum(s.count("N") for s in seqs.values())
    for r in rows:
        if r["cls"] == "gap":
            assert set(seqs[r["chrom"]][r["start"]:r["end"]]) == {"N"}
    kinds = {r["name"] for r in rows if r["cls"] == "gap"}
    assert {"telomere", "centromere", "short_arm", "contig_gap"} <= kinds
    # alpha satellite near the centromere gap of chr1
    cen = [r for r in by["chr1"] if r["name"] == "centromere"][0]
    near = [r for r in by["chr1"]
            if r["cls"] == "Satellite" and abs(r["start"] - cen["start"]) < 0.05 * len(seqs["chr1"])]
    assert any(r["name"].startswith("ALR/Alpha_HOR") for r in near)


def _copy(seqs, r):
    s = seqs[r["chrom"]][r["start"]:r["end"]]
    return s.translate(COMP)[::-1] if r["strand"] == "-" else s


@pytest.mark.parametrize("cls,lo,hi", [("SINE/Alu", 0.02, 0.23), ("LINE/L1", 0.02, 0.28),
                                       ("LTR", 0.02, 0.30), ("SINE/MIR", 0.15, 0.42)])
def test_copies_match_consensus(genome, cls, lo, hi):
    """Every sampled copy is within its stated divergence of the consensus (edlib, global)."""
    seqs, cons = genome["seqs"], genome["consensus"]
    rows = [r for r in genome["rows"] if r["cls"] == cls and r["ce"] - r["cs"] < 3000]
    rng = np.random.default_rng(0)
    pick = [rows[i] for i in rng.choice(len(rows), min(150, len(rows)), replace=False)]
    dists = []
    for r in pick:
        ref = cons[r["name"]][r["cs"]:r["ce"]] + "A" * r["tail"]
        d = edlib.align(_copy(seqs, r), ref, task="distance")["editDistance"]
        assert d <= round(r["div"] * len(ref)) + 1, r                # the recorded edits bound it
        dists.append(d / len(ref))
        if len(ref) >= 200:                                          # short copies: sampling noise
            assert lo - 0.01 <= d / len(ref) <= hi + 0.04, r
    assert lo < np.mean(dists) < hi
    if cls == "SINE/Alu":
        # most Alu copies 10-20 % diverged (plus a young AluY-like subfamily at 4-10 %)
        non_y = [d for d, r in zip(dists, pick) if r["name"] != "AluY"]
        assert 0.09 < np.mean(non_y) < 0.18
        assert sum(r["tail"] > 0 for r in pick) == len(pick)


def test_segmental_duplications(genome):
    seqs = genome["seqs"]
    sds = [r for r in genome["rows"] if r["cls"] == "Segmental_dup"]
    assert len(sds) > 20
    lens = [r["end"] - r["start"] for r in sds]
    assert min(lens) > 900 and max(lens) < 110_000
    inter = [r for r in sds if r["src"].split(":")[0] != r["chrom"]]
    assert inter and len(inter) < len(sds)
    for r in sorted(sds, key=lambda r: r["end"] - r["start"])[:25]:
        chrom, rg = r["src"].rsplit(":", 1)
        a, b = map(int, rg.split("-"))
        src = seqs[chrom][a:b]
        d = edlib.align(_copy(seqs, r), src, task="distance")["editDistance"]
        assert d <= r["div"] * len(src) + 2 and 0.005 < r["div"] < 0.06, r


def test_mutate_batch_bounds():
    rng = np.random.default_rng(5)
    cons = mg.rand_gc(rng, 300, 0.55)
    n = 300
    seq, lens, edits = mg.mutate_batch(rng, np.tile(cons, n), np.full(n, 300), np.full(n, 0.15))
    assert lens.sum() == seq.size
    offs = np.cumsum(lens) - lens
    s = mg.LUT[seq].tobytes().decode()
    c = mg.LUT[cons].tobytes().decode()
    for i in range(0, n, 10):
        d = edlib.align(s[offs[i]:offs[i] + lens[i]], c, task="distance")["editDistance"]
        assert d <= edits[i]
    assert edits.mean() / 300 == pytest.approx(0.15, rel=0.15)


def test_same_seed_same_genome_other_seed_other(genome, tmp_path):
    a, b = str(tmp_path / "a.fa"), str(tmp_path / "b.fa")
    run("--size", "5M", "--seed", "3", "--out", a, "--quiet")
    assert md5(a) == md5(genome["fa"])
    assert md5(str(tmp_path / "a.repeats.bed")) == md5(genome["bed"])
    run("--size", "5M", "--seed", "4", "--out", b, "--quiet")
    assert md5(b) != md5(a)
    other = read_fasta(b)
    assert [len(s) for s in other.values()][:24] == [len(s) for s in genome["seqs"].values()][:24]
    x = np.frombuffer(other["chr2"].encode(), np.uint8)
    y = np.frombuffer(genome["seqs"]["chr2"].encode(), np.uint8)
    assert np.mean(x != y) > 0.5


def test_options(tmp_path):
    out = str(tmp_path / "s.fa")
    run("--size", "2M", "--out", out, "--softmask", "--no-gaps", "--width", "80", "--quiet",
        "--bed", str(tmp_path / "x.bed"), "--sd-div", "0.001,0.01")
    seqs = read_fasta(out)
    s = "".join(seqs.values())
    assert len(s) == 2_000_000 and "N" not in s.upper()
    low = sum(ch.islower() for ch in s) / len(s)
    rows = read_bed(str(tmp_path / "x.bed"))
    rep = sum(r["end"] - r["start"] for r in rows if r["cls"] not in ("gap", "CpG_island")) / len(s)
    assert low == pytest.approx(rep, abs=0.002) and 0.4 < low < 0.65
    assert max(len(line) for line in open(out)) == 81
    sd = [r["div"] for r in rows if r["cls"] == "Segmental_dup"]
    assert sd and max(sd) < 0.02


@pytest.mark.skipif(not os.path.exists(ECOLI), reason="no E. coli genome in ../shared/data")
def test_ecoli_mode_still_works(tmp_path):
    out = str(tmp_path / "e.fa")
    res = run("--ecoli", ECOLI, "--out", out, "--contigs", "1", "--contig-len", "200000")
    seqs = read_fasta(out)
    assert list(seqs) == ["ecoli_MG1655", "synth1"] and len(seqs["ecoli_MG1655"]) == 4_639_675
    assert "family copies" in res.stdout
