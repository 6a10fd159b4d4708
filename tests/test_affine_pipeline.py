"""The default (scoring) path end to end: clipping, contig ends, one op per indel, supplementary
alignments with SA tags, bwa's scoring letters on the command line."""
import os
import re

import numpy as np
import pysam
import pytest

from pymap import api, cli
from pymap.options import AlignOptions

from conftest import revcomp

ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCAC"


def rand_seq(rng, n):
    return "".join(rng.choice(list("ACGT"), n))


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """Two random contigs of 30 kb and 20 kb (no repeats: every placement is unique)."""
    rng = np.random.default_rng(3)
    contigs = {"chrA": rand_seq(rng, 30000), "chrB": rand_seq(rng, 20000)}
    d = tmp_path_factory.mktemp("affine")
    path = d / "ref.fa"
    with open(path, "w") as fh:
        for name, s in contigs.items():
            fh.write(f">{name}\n{s}\n")
    return path, contigs


def align(tmp_path, ref, reads, **kw):
    fq = tmp_path / "reads.fq"
    with open(fq, "w") as fh:
        for name, s in reads:
            fh.write(f"@{name}\n{s}\n+\n{'I' * len(s)}\n")
    out = tmp_path / "out.sam"
    kw.setdefault("progress", False)
    st = api.align(str(ref), str(fq), out=str(out), options=AlignOptions(**kw), summary=False)
    with pysam.AlignmentFile(str(out)) as sam:
        recs = list(sam)
    return st, recs


def by_name(recs):
    out = {}
    for r in recs:
        out.setdefault(r.query_name, []).append(r)
    return out


def test_adapter_tail_and_contig_end_are_soft_clipped(tmp_path, genome):
    ref, ctg = genome
    a, b = ctg["chrA"], ctg["chrB"]
    reads = [("adapter", a[5000:5090] + ADAPTER + "GATTACAGATTACAGATTAC"[:26]),    # 90 bp insert
             ("adapter_rev", revcomp(b[7000:7100]) + ADAPTER[:30] + "ACGTACGTACGTACGTACGT"),
             ("overhang_start", "TTGCAGGCATTACCGGA" + a[:120]),                       # 17 bp before chrA
             ("overhang_end", b[-110:] + "GGCTAAGTCGATCGTAGCTAGCAGTCGACTGACGTAGCAA"),   # 40 bp past chrB
             ("junction", a[-70:] + b[:80])]                                           # chrA end + chrB start
    _, recs = align(tmp_path, ref, reads)
    r = by_name(recs)
    ad = r["adapter"][0]
    assert (ad.reference_name, ad.reference_start, ad.cigarstring) == ("chrA", 5000, "90M54S")
    adr = r["adapter_rev"][0]
    assert adr.is_reverse and adr.reference_start == 7000 and adr.cigarstring == "50S100M"
    os_ = r["overhang_start"][0]
    assert (os_.reference_name, os_.reference_start, os_.cigarstring) == ("chrA", 0, "17S120M")
    oe = r["overhang_end"][0]
    assert (oe.reference_name, oe.reference_start, oe.cigarstring) == ("chrB", len(b) - 110, "110M40S")
    # a read across two contigs: the longer part primary, the other supplementary, SA on both
    j = r["junction"]
    prim = [x for x in j if not x.is_supplementary]
    supp = [x for x in j if x.is_supplementary]
    assert len(prim) == 1 and len(supp) == 1
    assert (prim[0].reference_name, prim[0].cigarstring) == ("chrB", "70S80M")
    assert (supp[0].reference_name, supp[0].reference_start, supp[0].cigarstring) == ("chrA", len(a) - 70, "70M80S")
    assert prim[0].get_tag("SA") == f"chrA,{len(a) - 69},+,70M80S,{supp[0].mapping_quality},0;"
    assert supp[0].get_tag("SA") == f"chrB,1,+,70S80M,{prim[0].mapping_quality},0;"
    for x in recs:
        for op, n in x.cigartuples or []:
            assert op in (0, 1, 2, 4)
        assert x.get_tag("NM") >= 0 and x.get_tag("AS") >= 30


def test_chimera_supplementary_and_bwa_minus_M(tmp_path, genome):
    ref, ctg = genome
    a, b = ctg["chrA"], ctg["chrB"]
    # the pieces' ends chosen so that neither extends by chance into the other's sequence
    x, y = 12000, 3000
    while a[x + 100] == revcomp(b[y:y + 50])[0] or b[y + 50] == revcomp(a[x + 99]):
        x += 1
    reads = [("chimera", a[x:x + 100] + revcomp(b[y:y + 50]))]
    st, recs = align(tmp_path, ref, reads)
    assert [(r.flag, r.reference_name, r.cigarstring) for r in recs] == [
        (0, "chrA", "100M50S"), (2048 | 16, "chrB", "50M100S")]
    assert (st.secondary, st.supplementary) == (0, 1)
    # each part unique: neither is the other's rival (bwa-mem gives both 60 and no XS)
    assert [r.mapping_quality for r in recs] == [60, 60] and not recs[0].has_tag("XS")
    assert recs[0].get_tag("SA").startswith(f"chrB,{y + 1},-,50M100S,")
    assert recs[1].get_tag("SA").startswith(f"chrA,{x + 1},+,100M50S,")
    assert recs[1].query_sequence == revcomp(recs[0].query_sequence)
    st, recs = align(tmp_path, ref, reads, split_as_secondary=True)
    assert [x.flag for x in recs] == [0, 256 | 16] and [r.mapping_quality for r in recs] == [60, 60]
    assert (st.secondary, st.supplementary) == (1, 0)       # the summary counts the records as flagged


def test_single_indel_is_one_left_aligned_op(tmp_path, genome):
    ref, ctg = genome
    a = ctg["chrA"]
    rng = np.random.default_rng(8)
    reads, want = [], {}
    for i in range(60):
        p = 1000 + 400 * i
        k = 1 + i % 10
        cut = p + 40 + int(rng.integers(0, 60))
        if i % 2:       # deletion of k bases: the leftmost equivalent position is where a shift stops
            s = a[p:cut] + a[cut + k:p + 150 + k]
            left = cut
            while left > p and a[left - 1] == a[left - 1 + k]:
                left -= 1
            want[f"d{i}"] = (p, f"{left - p}M{k}D{150 - (left - p)}M")
            reads.append((f"d{i}", s))
        else:           # insertion of k random bases
            ins = rand_seq(rng, k)
            s = a[p:cut] + ins + a[cut:p + 150 - k]
            left = cut
            while left > p and s[left - p - 1] == s[left - p - 1 + k]:
                left -= 1
            want[f"i{i}"] = (p, f"{left - p}M{k}I{150 - k - (left - p)}M")
            reads.append((f"i{i}", s))
    _, recs = align(tmp_path, ref, reads)
    got = {x.query_name: (x.reference_start, x.cigarstring) for x in recs}
    assert got == want


def test_scoring_letters_reach_the_extender(tmp_path, genome, capsys):
    ref, ctg = genome
    a = ctg["chrA"]
    fq = tmp_path / "r.fq"
    read = a[2000:2100] + ADAPTER[:20]
    fq.write_text(f"@r\n{read}\n+\n{'I' * len(read)}\n")
    out = tmp_path / "o.sam"

    def run(*extra):
        assert cli.main(["align", str(ref), str(fq), "-o", str(out), "--no-progress", *extra]) == 0
        with pysam.AlignmentFile(str(out)) as sam:
            return next(iter(sam))
    r = run()
    assert r.cigarstring.endswith("S") and r.get_tag("AS") >= 100
    assert run("-A", "2").get_tag("AS") > r.get_tag("AS") + 90
    r = run("-L", "100")                     # clipping costs more than the mismatches: end to end
    assert "S" not in r.cigarstring and r.get_tag("AS") < 100
    r = run("-T", "200")
    assert r.is_unmapped and r.get_tag("YU") == "below_min_score"
    assert cli.main(["align", str(ref), str(fq), "-o", str(out), "-L", "x"]) == 2
    assert "option 'clip'" in capsys.readouterr().err
    r = run("--all", "-e", "3")              # --all: the edit-distance model (banded)
    assert r.is_unmapped and r.get_tag("YU") == "over_max_edits"
    assert os.path.exists(out)


def test_mapq_of_clipped_parts(tmp_path):
    """MAPQ of a read aligned in part: a unique part is as unique as a whole read of its length (the
    floor and length_cap of the part, not of the read: bwa mem gives these 60 and 51); a poly-A part
    that the read's own A's could also align shifted (bwa: XS = AS) gets 0, its XS its AS."""
    rng = np.random.default_rng(11)
    a = rand_seq(rng, 6000) + "A" * 40 + rand_seq(rng, 6000)
    ref = tmp_path / "ref.fa"
    ref.write_text(f">chrP\n{a}\n")
    tail = rand_seq(np.random.default_rng(12), 120)
    reads = [("part50", a[3000:3050] + ADAPTER + tail[:66]),
             ("part36", a[9000:9036] + ADAPTER + tail[:80]),
             ("polyA", "A" * 150)]
    _, recs = align(tmp_path, ref, reads)
    r = {x.query_name: x for x in recs if not x.is_supplementary}
    assert (r["part50"].reference_start, r["part50"].cigarstring, r["part50"].mapping_quality) == (3000, "50M100S", 60)
    p36 = r["part36"]           # 36 bases, or 37 where the adapter's first base matches by chance: below 60
    part, score = p36.query_alignment_length, p36.get_tag("AS")
    assert p36.reference_start == 9000 and part in (36, 37) and p36.cigarstring == f"{part}M{150 - part}S"
    assert p36.mapping_quality == int(30 * (1 - 19 / score) * np.log(part) + 0.499) in (51, 53)
    pa = r["polyA"]
    assert pa.reference_start == 6000 and pa.get_tag("AS") >= 40 and pa.mapping_quality == 0
    assert pa.get_tag("XS") == pa.get_tag("AS")


def test_mapq_of_a_margin_of_whole_edits():
    """A single read's MAPQ from its margin to the runner-up: 13 phred an edit less READ_OFFSET, 20
    from two edits up (such reads were never or 0.22 % wrong on three repeat-rich genomes: bwa mem
    gives them 21-32), 0 for a tie, 60 at most; in score units (an edit: 5 for the affine scores, 1
    for the edit-distance extenders)."""
    from pymap.kernels.select import READ_OFFSET, mapq_from_scores
    assert READ_OFFSET == 6
    for unit in (5, 1):
        q = [mapq_from_scores(150 * unit, 1, (150 - k) * unit, True, 0, unit) for k in range(6)]
        assert q == [0, 7, 20, 33, 46, 59]
    assert mapq_from_scores(150, 2, 150, True, 0, 5) == 0 and mapq_from_scores(150, 1, 0, True, 0, 5) == 60


def test_periodic_part_as_defined():
    """A part is periodic when a clip next to it continues its period (d <= 4) for d bases."""
    from pymap.kernels.select import periodic_part
    reads = ["CAGT" * 3 + "A" * 22 + "GTCA" * 3,       # 20 of 22 A's; from 2 bases before them, no period
             "GCTAGG" + "CA" * 13 + "TTGA",            # a CA repeat whose clip on the right goes on
             "GCTAGG" + "CA" * 12 + "TTGACC",          # unclipped
             "ACGTTGCAAGGCTTAACCGGTATCGA"]             # no period
    codes = np.frombuffer("".join(reads).encode(), np.uint8).copy()
    for i, base in enumerate(b"ACGT"):
        codes[codes == base] = i
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in reads])]).astype(np.int64)
    h_read = [0, 0, 1, 2, 3]
    qbeg = [12, 10, 6, 0, 4]
    qend = [32, 32, 30, 36, 20]
    got = [periodic_part(codes, offsets[r], offsets[r + 1] - offsets[r], b, e) for r, b, e in zip(h_read, qbeg, qend)]
    assert got == [True, False, True, False, False]


def test_length_cap_in_integers_is_the_float_formula():
    """length_cap in fixed point gives int(30 (1 - 19 match / best) ln(part) + 0.499), the formula in
    floating point, for every part and score of reads up to 300 bases."""
    from pymap.kernels.select import CHANCE_MATCH, length_cap, ln_table
    ln_q = ln_table(301)
    for match in (1, 2):
        for part in range(2, 301):
            for best in range(CHANCE_MATCH * match + 1, part * match + 1):
                want = int(30.0 * (1.0 - CHANCE_MATCH * match / best) * np.log(part) + 0.499)
                assert length_cap(best, part, match, ln_q) == want, (match, part, best)
    assert length_cap(19, 36, 1, ln_q) == 0 and length_cap(36, 36, 1, ln_q) == 51
    assert length_cap(100, 150, 1, ln_q) == 122


def test_indels_longer_than_the_band(tmp_path, genome):
    """A read holding a 20- or 40-base indel (wider than the band of max(e, 16)) first aligns in two
    pieces; its second candidate's diagonal sends it through the extender again with a wider band:
    one alignment with the indel, as bwa mem's band of 100 gives, no supplementary record."""
    ref, ctg = genome
    a = ctg["chrA"]
    ins = rand_seq(np.random.default_rng(5), 20)
    reads = [("del20", a[5000:5100] + a[5120:5170]),
             ("del40", a[6000:6070] + a[6110:6190]),
             ("ins20", a[8000:8090] + ins + a[8090:8130]),
             ("del20_rev", revcomp(a[11000:11060] + a[11080:11170])),
             # 94M25I31M has the AS of 94M56S (94): it wins by the clip penalty, as in bwa mem
             ("ins25_tie", a[14000:14094] + rand_seq(np.random.default_rng(6), 25) + a[14094:14125])]
    st, recs = align(tmp_path, ref, reads)
    got = {r.query_name: (r.reference_start, re.sub(r"\d+M", "M", r.cigarstring), r.is_reverse) for r in recs}
    assert got == {"del20": (5000, "M20DM", False), "del40": (6000, "M40DM", False),
                   "ins20": (8000, "M20IM", False), "del20_rev": (11000, "M20DM", True),
                   "ins25_tie": (14000, "M25IM", False)}
    nm = {"del40": 40, "ins25_tie": 25}
    assert st.supplementary == 0 and all(r.get_tag("NM") == nm.get(r.query_name, 20) for r in recs)
    # with the band given (an extender option) no wider band is tried: the read stays in pieces
    st, recs = align(tmp_path, ref, reads[:1], extender_opts={"band": 16})
    assert [r.is_supplementary for r in recs] == [False, True] and st.supplementary == 1
    assert all("D" not in r.cigarstring for r in recs)


def test_reads_of_telomere_arrays_are_placed_at_mapq_0(tmp_path):
    """Reads made of TTAGGG repeat, whose every pattern is over max_occ, are placed in an array at
    MAPQ 0 (as bwa mem places them) and counted in the summary; a unique read keeps MAPQ 60."""
    rng = np.random.default_rng(8)
    tel = "TTAGGG" * 1000                          # 2,000 copies of each pattern: over max_occ
    contigs = {"chr1": revcomp(tel) + rand_seq(rng, 20000) + tel, "chr2": revcomp(tel) + rand_seq(rng, 15000) + tel}
    ref = tmp_path / "tel.fa"
    ref.write_text("".join(f">{k}\n{v}\n" for k, v in contigs.items()))
    unique = contigs["chr1"][9000:9150]
    reads = [("tel", ("TTAGGG" * 26)[2:152]), ("tel_rc", ("CCCTAA" * 26)[:150]), ("unique", unique)]
    st, recs = align(tmp_path, ref, reads)
    got = {r.query_name: r for r in recs if not r.is_secondary and not r.is_supplementary}
    assert got["unique"].mapping_quality == 60 and got["unique"].reference_start == 9000
    for name in ("tel", "tel_rc"):
        r = got[name]
        assert not r.is_unmapped and r.mapping_quality == 0 and r.cigarstring == "150M"
        assert r.get_tag("NM") == 0
        assert contigs[r.reference_name][r.reference_start:r.reference_end] == r.query_sequence
    st, recs = align(tmp_path, ref, reads, seeder_opts={"sample_occ": 0})
    assert sum(r.is_unmapped for r in recs) == 2
    # a pair whose read 1 lies in the array next to its unique mate: placed by it, at MAPQ 0
    c1 = contigs["chr1"]
    for i, seq in ((1, c1[5800:5950]), (2, revcomp(c1[6050:6200]))):
        (tmp_path / f"m{i}.fq").write_text(f"@p\n{seq}\n+\n{'I' * 150}\n")
    api.align(str(ref), str(tmp_path / "m1.fq"), mates_path=str(tmp_path / "m2.fq"), out=str(tmp_path / "p.sam"),
              options=AlignOptions(progress=False), summary=False)
    with pysam.AlignmentFile(str(tmp_path / "p.sam")) as sam:
        r1, r2 = [r for r in sam if not r.is_supplementary]
    assert (r2.reference_start, r2.mapping_quality) == (6050, 60)
    assert r1.is_proper_pair and r1.mapping_quality == 0
