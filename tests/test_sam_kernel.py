"""The Numba SAM formatter (pymap.kernels.sam) against the SAM spec, checked through pysam: records
built by hand (CIGARs with soft clips, insertions, deletions, mismatches and N on both strands,
secondary and unmapped records, empty reads, reads without qualities)."""
import numpy as np
import pysam
import pytest

from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.kernels.sam import NO_XS, REASONS, format_sam

OPS = "MIDNSHP=X"
COMP = str.maketrans("ACGTN", "TGCAN")


def revcomp(s):
    return s.translate(COMP)[::-1]


def codes_of(s):
    return ASCII_TO_CODE[np.frombuffer(s.encode(), np.uint8)]


class Batch:
    """Reads, a reference and records in the arrays format_sam takes (as the pipeline makes them)."""

    def __init__(self, contigs, reads, quals=True):
        self.contigs = contigs                      # {name: sequence}
        self.reads = reads                          # [(name, sequence as read, qualities or None)]
        self.quals = quals
        self.records = []                           # dicts, see add

    def add(self, read, flag=0, strand=0, contig=None, pos=0, cigar=(), mapq=60, score=0, xs=None, reason=0):
        """A record of read (index); pos 0-based on contig, the first aligned base; cigar: [(op, n)]
        on the read as aligned (reverse-complemented when strand is 1). contig None: unmapped."""
        self.records.append(dict(read=read, flag=flag, strand=strand, contig=contig, pos=pos,
                                 cigar=list(cigar), mapq=mapq, score=score, xs=xs, reason=reason))

    def arrays(self, rg=b""):
        names = [n for n, _, _ in self.reads]
        seqs = [s for _, s, _ in self.reads]
        lens = np.array([len(s) for s in seqs], np.int64)
        offsets = np.zeros(len(seqs) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        codes = codes_of("".join(seqs)) if offsets[-1] else np.empty(0, np.uint8)
        rc_codes = codes_of("".join(revcomp(s) for s in seqs)) if offsets[-1] else np.empty(0, np.uint8)
        quals = (np.frombuffer("".join(q for _, _, q in self.reads).encode(), np.uint8).copy()
                 if self.quals else np.empty(0, np.uint8))
        name_offsets = np.zeros(len(names) + 1, np.int64)
        np.cumsum([len(n) for n in names], out=name_offsets[1:])
        ctg = list(self.contigs)
        ctg_offsets = np.zeros(len(ctg) + 1, np.int64)
        np.cumsum([len(self.contigs[c]) for c in ctg], out=ctg_offsets[1:])
        ctg_name_offsets = np.zeros(len(ctg) + 1, np.int64)
        np.cumsum([len(c) for c in ctg], out=ctg_name_offsets[1:])
        recs = self.records
        hit = np.full(len(recs), -1, np.int64)
        h_strand, h_start, h_score, cig, cig_off = [], [], [], [], [0]
        for i, r in enumerate(recs):
            if r["contig"] is not None:
                hit[i] = len(h_strand)
                h_strand.append(r["strand"])
                h_start.append(ctg_offsets[ctg.index(r["contig"])] + r["pos"])
                h_score.append(r["score"])
                cig += [n << 4 | OPS.index(op) for op, n in r["cigar"]]
            cig_off.append(len(cig))
        return (np.array([r["read"] for r in recs], np.int64), np.array([r["flag"] for r in recs], np.int64),
                hit, np.array([r["mapq"] for r in recs], np.int64), np.array([r["reason"] for r in recs], np.int64),
                np.array([NO_XS if r["xs"] is None else r["xs"] for r in recs], np.int64),
                np.array([r.get("sa", -1) for r in recs], np.int64), np.full(len(recs), -1, np.int64),
                np.zeros(len(recs), np.int64),
                np.frombuffer("".join(names).encode(), np.uint8).copy(), name_offsets, codes, rc_codes, offsets,
                quals, codes_of("".join(self.contigs.values())),
                np.frombuffer("".join(ctg).encode(), np.uint8).copy(), ctg_name_offsets, ctg_offsets,
                np.array(h_strand, np.int8), np.array(h_start, np.int64), np.array(h_score, np.int32),
                np.array(cig, np.uint32), np.array(cig_off, np.int64), np.frombuffer(rg, np.uint8).copy())

    def header(self):
        return pysam.AlignmentHeader.from_dict(
            {"HD": {"VN": "1.6"}, "SQ": [{"SN": c, "LN": len(s)} for c, s in self.contigs.items()]})

    def lines(self, rg=b""):
        text = b"".join(format_sam(*self.arrays(rg))).decode()
        assert text.endswith("\n") or not text
        return text.splitlines()


def apply_cigar(rng, ref, pos, cigar, p_mismatch=0.15, p_n=0.03):
    """A read (as aligned) with the given CIGAR at ref[pos:], mismatches and Ns made at random."""
    out = []
    q = pos
    for op, n in cigar:
        if op == "M":
            for t in range(n):
                b = ref[q + t]
                u = rng.random()
                if u < p_n:
                    b = "N"
                elif u < p_n + p_mismatch:
                    b = "ACGT"[("ACGTN".index(b) + int(rng.integers(1, 4))) % 4]
                out.append(b)
            q += n
        elif op in "IS":
            out.append("".join(rng.choice(list("ACGTN"), n)))
        elif op == "D":
            q += n
    return "".join(out), q - pos


def random_cigar(rng, length):
    """M/I/D ops over `length` read bases with soft clips at either end, M next to every clip."""
    ops = []
    left = int(rng.integers(0, 6)) if rng.random() < 0.5 else 0
    right = int(rng.integers(0, 6)) if rng.random() < 0.5 else 0
    if left:
        ops.append(("S", left))
    rest = length - left - right
    while rest > 0:
        m = min(rest, int(rng.integers(1, 30)))
        ops.append(("M", m))
        rest -= m
        if rest > 2 and rng.random() < 0.5:
            if rng.random() < 0.5:
                k = min(rest - 1, int(rng.integers(1, 4)))
                ops.append(("I", k))
                rest -= k
            else:
                ops.append(("D", int(rng.integers(1, 4))))
    if right:
        ops.append(("S", right))
    return ops


def expected_md_nm(ref, pos, read, cigar):
    """MD and NM by the SAM spec, for reads whose SEQ is '*' (secondaries)."""
    md, run, nm, q, j = [], 0, 0, pos, 0
    for op, n in cigar:
        if op == "M":
            for t in range(n):
                if ref[q + t] == read[j + t] and ref[q + t] != "N":
                    run += 1
                else:
                    md += [str(run), ref[q + t]]
                    run = 0
                    nm += 1
            q += n
            j += n
        elif op in "IS":
            j += n
            nm += n if op == "I" else 0
        elif op == "D":
            md += [str(run), "^", ref[q:q + n]]
            run = 0
            nm += n
            q += n
    return "".join(md) + str(run), nm


def check_alignment(seg, contigs, oriented, cigar, strand, qual):
    """seg (pysam) against the spec: POS, CIGAR, SEQ/QUAL oriented on the forward strand, and MD/NM
    through pysam's reading of MD (get_aligned_pairs with_seq): the reference it rebuilds is the true
    one, the mismatches it marks are those of the bases, NM = mismatches + I + D."""
    ref = contigs[seg.reference_name]
    assert seg.is_reverse == (strand == 1)
    assert seg.cigartuples == [(OPS.index(op), n) for op, n in cigar]
    assert seg.query_sequence == oriented
    if qual is None:
        assert seg.query_qualities is None
    else:
        assert pysam.qualities_to_qualitystring(seg.query_qualities) == (qual[::-1] if strand else qual)
    mismatches = 0
    for qp, rp, b in seg.get_aligned_pairs(with_seq=True):
        if rp is None:
            continue
        assert b.upper() == ref[rp], (seg.to_string(), rp)
        if qp is not None:
            is_mm = oriented[qp] != ref[rp] or ref[rp] == "N"
            assert b.islower() == is_mm, (seg.to_string(), qp, rp)
            mismatches += is_mm
    indels = sum(n for op, n in seg.cigartuples if op in (1, 2))
    assert seg.get_tag("NM") == mismatches + indels
    md, nm = expected_md_nm(ref, seg.reference_start, oriented, cigar)
    assert seg.get_tag("MD") == md and seg.get_tag("NM") == nm


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("with_quals", [True, False])
def test_random_alignments_with_soft_clips_checked_by_pysam(seed, with_quals):
    rng = np.random.default_rng(seed)
    contigs = {"chr1": "".join(rng.choice(list("ACGT"), 700)), "chr2": "".join(rng.choice(list("ACGT"), 400))}
    contigs["chr2"] = contigs["chr2"][:100] + "NNNNN" + contigs["chr2"][105:]     # reference Ns
    reads, plan = [], []
    for i in range(60):
        length = int(rng.integers(20, 120))
        cigar = random_cigar(rng, length)
        name = "chr2" if i % 3 == 0 else "chr1"
        span = sum(n for op, n in cigar if op in "MD")
        pos = int(rng.integers(0, len(contigs[name]) - span))
        if i % 3 == 0:
            pos = min(pos, 95)                      # over the Ns of chr2 now and then
        oriented, _ = apply_cigar(rng, contigs[name], pos, cigar)
        strand = int(rng.integers(0, 2))
        qual = "".join(chr(33 + int(x)) for x in rng.integers(2, 41, len(oriented)))
        reads.append((f"r{i}", revcomp(oriented) if strand else oriented, qual))
        plan.append((name, pos, cigar, strand, oriented, qual))
    b = Batch(contigs, reads, quals=with_quals)
    for i, (name, pos, cigar, strand, oriented, qual) in enumerate(plan):
        b.add(i, flag=16 * strand, strand=strand, contig=name, pos=pos, cigar=cigar, score=i % 7 - 3,
              xs=None if i % 5 == 0 else i % 5 - 2)
        if i % 4 == 0:                              # a secondary of the same alignment
            b.add(i, flag=16 * strand | 256, strand=strand, contig=name, pos=pos, cigar=cigar, mapq=0,
                  score=i % 7 - 3)
    header = b.header()
    lines = b.lines()
    assert len(lines) == len(b.records)
    for line, rec in zip(lines, b.records):
        seg = pysam.AlignedSegment.fromstring(line, header)
        name, pos, cigar, strand, oriented, qual = plan[rec["read"]]
        assert seg.query_name == f"r{rec['read']}" and seg.reference_name == name
        assert seg.reference_start == pos and seg.flag == rec["flag"]
        assert seg.get_tag("AS") == rec["score"]
        assert seg.has_tag("XS") == (rec["xs"] is not None)
        if rec["xs"] is not None:
            assert seg.get_tag("XS") == rec["xs"]
        fields = line.split("\t")
        assert fields[6:9] == ["*", "0", "0"]
        if rec["flag"] & 256:
            assert fields[9] == "*" and fields[10] == "*"
            md, nm = expected_md_nm(contigs[name], pos, oriented, cigar)
            assert seg.get_tag("MD") == md and seg.get_tag("NM") == nm
        else:
            check_alignment(seg, contigs, oriented, cigar, strand, qual if with_quals else None)
            assert (fields[10] == "*") == (not with_quals)


@pytest.mark.parametrize("seed", [4, 5])
def test_md_of_long_matches(seed):
    """MD and NM of reads of 100-300 bases with few mismatches (the formatter compares eight bases a
    step): mismatches at every place in a step and in the tail, Ns in the reference and the read
    (an N matched by an N is a mismatch), over an indel, on both strands."""
    rng = np.random.default_rng(seed)
    ref = "".join(rng.choice(list("ACGT"), 3000))
    ref = ref[:1000] + "N" * 3 + ref[1003:1500] + "N" + ref[1501:]
    contigs = {"c": ref}
    reads, plan = [], []
    for i in range(120):
        length = int(rng.integers(100, 301))
        cut = int(rng.integers(1, length - 1))
        cigar = [("M", length)] if i % 2 else [("M", cut), ("D" if i % 4 == 0 else "I", 2), ("M", length - cut - 2)]
        if i % 4 == 0:
            cigar[-1] = ("M", length - cut)
        span = sum(n for op, n in cigar if op in "MD")
        pos = int(rng.integers(0, len(ref) - span)) if i % 5 else int(rng.integers(max(0, 1001 - span), 1001))
        oriented, _ = apply_cigar(rng, ref, pos, cigar, p_mismatch=0.01 if i % 3 else 0.0, p_n=0.004)
        strand = i % 2
        reads.append((f"m{i}", revcomp(oriented) if strand else oriented, "I" * len(oriented)))
        plan.append((pos, cigar, strand, oriented))
    b = Batch(contigs, reads)
    for i, (pos, cigar, strand, _) in enumerate(plan):
        b.add(i, flag=16 * strand, strand=strand, contig="c", pos=pos, cigar=cigar)
    for line, (pos, cigar, strand, oriented) in zip(b.lines(), plan):
        check_alignment(pysam.AlignedSegment.fromstring(line, b.header()), contigs, oriented, cigar, strand,
                        "I" * len(oriented))


def test_soft_clips_by_hand():
    ref = "ACGTACGTAC" + "GGGGCCCCAA" + "TTTT"
    contigs = {"c": ref}
    # 3S 5M 1I 2M 2D 4M 2S at ref[4:]: ref[4:9] ACGTA, an inserted T, ref[9:11] CG, ref[11:13] GG
    # deleted, ref[13:17] GCCC read as GCTC (one mismatch)
    cigar = [("S", 3), ("M", 5), ("I", 1), ("M", 2), ("D", 2), ("M", 4), ("S", 2)]
    oriented = "NNN" + "ACGTA" + "T" + "CG" + "GCTC" + "AA"
    qual = "ABCDEFGHIJKLMNOPQ"
    b = Batch(contigs, [("fwd", oriented, qual), ("rev", revcomp(oriented), qual)])
    b.add(0, contig="c", pos=4, cigar=cigar, score=-3)
    b.add(1, flag=16, strand=1, contig="c", pos=4, cigar=cigar, score=-3)
    lines = b.lines()
    f = lines[0].split("\t")
    assert f[1:6] == ["0", "c", "5", "60", "3S5M1I2M2D4M2S"]
    assert f[9:11] == [oriented, qual]
    assert f[11:] == ["NM:i:4", "MD:Z:7^GG2C1", "AS:i:-3"]
    g = lines[1].split("\t")
    assert g[1:6] == ["16", "c", "5", "60", "3S5M1I2M2D4M2S"]
    assert g[9:] == [oriented, qual[::-1]] + f[11:]
    for line in lines:
        seg = pysam.AlignedSegment.fromstring(line, b.header())
        check_alignment(seg, contigs, oriented, cigar, int(seg.is_reverse), qual)


def test_md_at_the_edges():
    """MD starts and ends with a number (0 where a mismatch touches an end or a deletion)."""
    contigs = {"c": "AAAAACCCCCGGGGG"}
    # ref[0:9] AAAAACCCC read as TAAACCCCC, ref[9] C deleted, ref[10:14] GGGG read as GGGT
    cigar = [("S", 1), ("M", 9), ("D", 1), ("M", 4)]
    read = "G" + "TAAACCCCC" + "GGGT"
    b = Batch(contigs, [("e", read, "I" * 14)])
    b.add(0, contig="c", pos=0, cigar=cigar)
    line = b.lines()[0]
    assert line.split("\t")[11:13] == ["NM:i:4", "MD:Z:0A3A4^C3G0"]
    check_alignment(pysam.AlignedSegment.fromstring(line, b.header()), contigs, read, cigar, 0, "I" * 14)


def test_unmapped_empty_and_fasta_reads():
    contigs = {"c": "ACGT" * 10}
    reads = [("u1", "ACGTN", "ABCDE"), ("empty", "", ""), ("u3", "GGA", "!!#")]
    for with_quals in (True, False):
        b = Batch(contigs, reads, quals=with_quals)
        b.add(0, flag=4, reason=1)
        b.add(1, flag=4, reason=3)
        b.add(2, flag=4)
        lines = b.lines(rg=b"grp1")
        assert lines[0].split("\t") == (["u1", "4", "*", "0", "0", "*", "*", "0", "0", "ACGTN",
                                         "ABCDE" if with_quals else "*", "YU:Z:" + REASONS[1], "RG:Z:grp1"])
        assert lines[1].split("\t") == ["empty", "4", "*", "0", "0", "*", "*", "0", "0", "*", "*",
                                        "YU:Z:" + REASONS[3], "RG:Z:grp1"]
        assert lines[2].split("\t")[9:] == ["GGA", "!!#" if with_quals else "*", "RG:Z:grp1"]
        header = b.header()
        for line in lines:
            seg = pysam.AlignedSegment.fromstring(line, header)
            assert seg.is_unmapped and seg.reference_id == -1 and seg.reference_start == -1
            assert seg.cigartuples is None and seg.mapping_quality == 0
        assert pysam.AlignedSegment.fromstring(lines[1], header).query_sequence is None


def test_empty_mapped_read_and_through_a_sam_file(tmp_path):
    """A whole SAM file (header + records) reads back through pysam.AlignmentFile; an empty read that
    is reported as aligned (an extender may) still gets SEQ and QUAL '*'."""
    contigs = {"a": "ACGTTGCA" * 4, "b": "TTGGCCAA" * 4}
    b = Batch(contigs, [("r0", "GGCC", "IIII"), ("r1", "", "")])
    b.add(0, contig="b", pos=2, cigar=[("M", 4)])
    b.add(1, contig="a", pos=0, cigar=[])
    lines = b.lines()
    f1 = lines[1].split("\t")
    assert f1[3] == "1" and f1[5] == "*" and f1[9:11] == ["*", "*"]
    path = tmp_path / "t.sam"
    path.write_text(str(b.header()) + "\n".join(lines) + "\n")
    with pysam.AlignmentFile(str(path)) as sam:
        segs = list(sam)
    assert [s.reference_name for s in segs] == ["b", "a"]
    assert segs[0].reference_start == 2 and segs[0].get_tag("MD") == "4" and segs[0].get_tag("NM") == 0


def test_many_records_on_several_threads_equal_one_thread():
    """The threaded path (records split in tasks) writes exactly what one thread writes."""
    import numba

    import pymap.kernels.sam as S
    rng = np.random.default_rng(7)
    ref = "".join(rng.choice(list("ACGT"), 3000))
    contigs = {"x": ref[:1000], "y": ref[1000:]}
    reads, b = [], None
    plan = []
    for i in range(3 * S.GRAIN + 17):
        name = "x" if i % 2 else "y"
        cigar = random_cigar(rng, 40)
        span = sum(n for op, n in cigar if op in "MD")
        pos = int(rng.integers(0, len(contigs[name]) - span))
        oriented, _ = apply_cigar(rng, contigs[name], pos, cigar)
        reads.append((f"q{i}", oriented, "I" * len(oriented)))
        plan.append((name, pos, cigar))
    b = Batch(contigs, reads)
    for i, (name, pos, cigar) in enumerate(plan):
        if i % 11 == 0:
            b.add(i, flag=4, reason=2)
        else:
            b.add(i, contig=name, pos=pos, cigar=cigar)
    args = b.arrays()
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = b"".join(format_sam(*args))
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = b"".join(format_sam(*args))
    finally:
        numba.set_num_threads(old)
    assert one == many and one.count(b"\n") == len(b.records)


@pytest.mark.parametrize("guess", [-10 ** 6, -200, 0])
def test_records_that_outgrow_the_first_guess_are_written_again(monkeypatch, guess):
    """Each range is formatted in one pass into a buffer of a guessed size; a record that does not fit
    (its MD among them, written past NM before being moved back) is written again into a larger one:
    the text is the same whatever the guess."""
    import pymap.kernels.sam as S
    rng = np.random.default_rng(8)
    ref = "".join(rng.choice(list("ACGT"), 2000))
    contigs = {"c": ref}
    reads, plan = [], []
    for i in range(300):
        cigar = random_cigar(rng, 60)
        span = sum(n for op, n in cigar if op in "MD")
        pos = int(rng.integers(0, len(ref) - span))
        oriented, _ = apply_cigar(rng, ref, pos, cigar)
        reads.append((f"r{i}", oriented, "I" * len(oriented)))
        plan.append((pos, cigar))
    b = Batch(contigs, reads)
    for i, (pos, cigar) in enumerate(plan):
        b.add(i, contig="c", pos=pos, cigar=cigar, strand=i % 2, xs=3 if i % 3 else None)
    want = b"".join(format_sam(*b.arrays()))
    monkeypatch.setattr(S, "RECORD_GUESS", guess)
    assert b"".join(format_sam(*b.arrays())) == want and want.count(b"\n") == 300


def test_a_record_written_into_every_buffer_size():
    """A record (its MD written past room for NM, then moved back) written into a buffer of each size
    from 1 byte to more than it needs: the range kernel grows the buffer and writes the record again
    whenever any part of it did not fit."""
    import pymap.kernels.sam as S
    ref = "ACGTTGCAAGGCTTACGATCGATCGGATCCATGCATGCAAGT" * 3
    read = ref[5:20] + "T" + ref[21:40] + ref[44:70]            # a mismatch and a deletion of 4
    b = Batch({"c": ref}, [("r", read, "I" * len(read))])
    b.add(0, contig="c", pos=5, cigar=[("M", 35), ("D", 4), ("M", 26)], xs=7)
    captured = {}
    real = S._format_range

    def spy(r0, r1, size, *args):
        captured["args"] = args
        return real(r0, r1, size, *args)

    S._format_range = spy
    try:
        want = b"".join(format_sam(*b.arrays()))
    finally:
        S._format_range = real
    assert b"\tNM:i:5\tMD:Z:15G19^GTAC26\t" in want
    for size in range(1, len(want) + 64):
        assert bytes(real(0, 1, size, *captured["args"])) == want, size


def test_first_bad_comment_takes_sam_tags_only():
    """-C's check: blank-separated TAG:TYPE:VALUE (a Z value may hold spaces), the value as the SAM
    specification's type says, no tag that pymap writes itself; empty comments pass."""
    from pymap.kernels.sam import OWN_TAGS, first_bad_comment, tag_codes
    own = tag_codes(OWN_TAGS)

    def first_bad(*comments):
        data = [c.encode() for c in comments]
        offsets = np.zeros(len(data) + 1, np.int64)
        np.cumsum([len(c) for c in data], out=offsets[1:])
        return first_bad_comment(np.frombuffer(b"".join(data), np.uint8).copy(), offsets, own)

    good = ["", "BC:Z:ACGT", "BC:Z:ACGT\tRX:Z:GG  XN:i:-3 ", "X1:A:q", "ZZ:Z:", "XF:f:1.5e3", "XF:f:-.5",
            "XB:B:c,1,-128", "XB:B:f,1.5,2", "XB:B:I", "XH:H:1AE3", "XH:H:", "XI:i:+7", "XI:i:4294967295",
            "XI:i:-2147483648", "RG:Z:s1", "CO:Z:two  words XN:i:1", "CO:Z:a b\tRX:Z:c d ", "CO:Z:x 1:N:0"]
    assert first_bad(*good) == -1
    for bad in ["1:N:0:ATCACG", "1X:Z:a", "BC:Q:a", "XA:A:qq", "XA:A:", "XN:i:3.5", "XN:i:", "XN:i:-", "BC:Z",
                "BCZ:A:x", "XF:f:", "XF:f:abc", "XF:f:1e", "XH:H:ABC", "XH:H:ZZ", "XB:B:q,1,2", "XB:B:c,300",
                "XB:B:c,1,", "XI:i:99999999999999", "XI:i:4294967296", "NM:i:7", "AS:i:3", "XZ:Z:tab\x01", "XN:i:1 2",
                "XA:A:a b"]:
        assert first_bad("BC:Z:ok", bad) == 1, bad
    assert first_bad_comment(np.frombuffer(b"RG:Z:s1", np.uint8).copy(), np.array([0, 7]),
                             tag_codes(OWN_TAGS + (b"RG",))) == 0


def test_integers_written_as_python_writes_them():
    """The formatter's integers (positions, flags, scores, TLEN, MD runs): every length from 1 to 19
    digits, both signs, and a buffer too short (nothing written, the end still returned)."""
    from pymap.kernels.sam import _put_int
    values = [0, 9, 10, 99, 100, 101, 4639675, -1, -10, -150, 2 ** 63 - 1, -(2 ** 63 - 1)]
    values += [s * (10 ** k + d) for k in range(19) for d in (-1, 0, 1) for s in (1, -1) if 0 <= 10 ** k + d < 2 ** 63]
    buf = np.zeros(24, np.uint8)
    for v in values:
        end = _put_int(buf, np.int64(2), np.int64(v))
        assert bytes(buf[2:end]) == str(v).encode()
        short = np.zeros(end - 1, np.uint8)
        assert _put_int(short, np.int64(2), np.int64(v)) == end and not short[2:].any()
