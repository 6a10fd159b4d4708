"""The input catalogue of real-world reads and references, through the API and the CLI.

Complements tests/test_io.py (parser level) and tests/test_cli.py (errors): here every input is
mapped end to end and the SAM is checked with test_properties.check_sam (every read exactly once as
primary or unmapped, CIGAR/NM/MD/AS/SEQ/QUAL consistent with the reference, NM <= e), so the
invariant "input reads == primary + unmapped records" holds for every test.
"""
import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from pymap import api
from pymap import index as idxfile
from pymap.options import AlignOptions
from pymap.seeders.neighborhood import NeighborhoodSeeder

from test_properties import check_sam as check_sam_of
from test_properties import (body, default_filter_available, mutate, norm, parse_sam, rand_seq,
                             revcomp, sq_lines)

# the default filter when installed, else `none` (the stage under test here is I/O, not filtering)


def check_sam(*args, **kw):
    """test_properties.check_sam for the default extender ("banded" under report_all)."""
    return check_sam_of(*args, extender="banded" if kw.get("report_all") else "affine", **kw)


FILTER = AlignOptions().filter if default_filter_available() else "none"
CLI_FILTER = [] if FILTER == AlignOptions().filter else ["--filter", FILTER]
E = AlignOptions().max_edits


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "pymap.cli", *map(str, args)], capture_output=True,
                          timeout=timeout)


def cli_align(ref, reads, *args):
    res = cli("align", ref, reads, "--no-progress", "-t", "2", *CLI_FILTER, *args)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 0, err
    assert "Traceback" not in err
    return res.stdout.decode(), err


def api_align(tmp_path, ref, reads, name="out.sam", **kw):
    kw.setdefault("progress", False)
    kw.setdefault("filter", FILTER)
    kw.setdefault("threads", 2)
    out = tmp_path / name
    stats = api.align(str(ref), str(reads), out=str(out), options=AlignOptions(**kw), summary=False)
    text = out.read_text()
    return text, stats


def assert_one_error(res, code, *words):
    err = res.stderr.decode(errors="replace")
    lines = [l for l in err.splitlines() if not l.startswith("[pymap]")]
    assert res.returncode == code, err
    assert len(lines) == 1 and lines[0].startswith("pymap: error:"), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], err


def write_fasta(path, contigs, width=60, eol="\n"):
    with open(path, "w", newline="") as fh:
        for n, s in contigs.items():
            fh.write(f">{n}{eol}" + "".join(s[i:i + width] + eol for i in range(0, len(s), width)))
    return path


def write_fastq(path, reads, eol="\n"):
    with open(path, "w", newline="") as fh:
        for n, s, q in reads:
            fh.write(f"@{n}{eol}{s}{eol}+{eol}{q}{eol}")
    return path


def primaries(text):
    return [r for r in parse_sam(text)[1] if not r["flag"] & 256]


def count_invariant(text, n_reads, stats=None):
    """The number of input reads equals the number of primary plus unmapped records."""
    prim = primaries(text)
    assert len(prim) == n_reads
    if stats is not None:
        assert stats.reads == n_reads
        assert stats.mapped == sum(not r["flag"] & 4 for r in prim)
    return prim


@pytest.fixture(scope="module")
def genome():
    rng = np.random.default_rng(11)
    return {"chr1": rand_seq(rng, 20000), "chr2": rand_seq(rng, 8000)}


def sample_reads(genome, rng, n=40, length=100, edits=2):
    reads = []
    names = list(genome)
    for i in range(n):
        c = names[i % len(names)]
        p = int(rng.integers(0, len(genome[c]) - length))
        s = mutate(rng, genome[c][p:p + length], int(rng.integers(0, edits + 1)))
        if i % 2:
            s = revcomp(s)
        reads.append((f"read{i}", s, "".join(chr(int(x)) for x in rng.integers(33, 75, len(s)))))
    return reads


@pytest.fixture(scope="module")
def ref_path(genome, tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    return write_fasta(d / "ref.fa", genome)


# ---- reads ------------------------------------------------------------------------------------

def test_fastq_windows_line_endings(tmp_path, genome, ref_path):
    reads = sample_reads(genome, np.random.default_rng(1))
    lf = write_fastq(tmp_path / "lf.fq", reads)
    crlf = write_fastq(tmp_path / "crlf.fq", reads, eol="\r\n")
    assert b"\r\n" in crlf.read_bytes()
    text_crlf, _ = cli_align(ref_path, crlf)
    text_lf, _ = cli_align(ref_path, lf)
    assert body(text_crlf) == body(text_lf)
    assert "\r" not in text_crlf
    check_sam(text_crlf, reads, genome, E)
    prim = count_invariant(text_crlf, len(reads))
    assert sum(not r["flag"] & 4 for r in prim) >= 0.9 * len(reads)


def test_lowercase_reads_map_like_uppercase(tmp_path, genome, ref_path):
    reads = sample_reads(genome, np.random.default_rng(2))
    upper, _ = api_align(tmp_path, ref_path, write_fastq(tmp_path / "u.fq", reads), "u.sam")
    lower_reads = [(n, s.lower(), q) for n, s, q in reads]
    lower, st = api_align(tmp_path, ref_path, write_fastq(tmp_path / "l.fq", lower_reads), "l.sam")
    assert body(upper) == body(lower)
    check_sam(lower, lower_reads, genome, E)
    count_invariant(lower, len(reads), st)


def test_iupac_codes_and_n_runs_in_reads(tmp_path, genome, ref_path):
    src = genome["chr1"]
    reads = [
        ("iupac", src[1000:1050] + "R" + src[1051:1080] + "y" + src[1081:1100], "I" * 100),   # 2 edits
        ("nrun3", src[2000:2040] + "NNN" + src[2043:2100], "I" * 100),                       # 3 edits
        ("nrun5_rc", revcomp(src[3000:3020] + "NNNNN" + src[3025:3100]), "I" * 100),         # 5 edits
        ("nrun20", src[4000:4040] + "N" * 20 + src[4060:4100], "I" * 100),                   # > e: too_many_n
        ("all_iupac", "RYKMSWBDHV" * 10, "I" * 100),
        ("dots", src[5000:5030] + "." * 3 + src[5033:5100], "I" * 100),
    ]
    text, st = api_align(tmp_path, ref_path, write_fastq(tmp_path / "r.fq", reads))
    groups = check_sam(text, reads, genome, E)
    count_invariant(text, len(reads), st)
    rec = {reads[i][0]: g[0] for i, g in groups.items()}
    for name, pos, nm in [("iupac", 1000, 2), ("nrun3", 2000, 3), ("nrun5_rc", 3000, 5), ("dots", 5000, 3)]:
        r = rec[name]
        assert not r["flag"] & 4 and r["rname"] == "chr1" and r["pos"] == pos + 1, r["line"]
        assert r["tags"]["NM"] == nm, r["line"]
    assert rec["nrun5_rc"]["flag"] & 16
    assert "R" not in rec["iupac"]["seq"] and rec["iupac"]["seq"].count("N") == 2
    assert rec["nrun20"]["tags"]["YU"] == "too_many_n"
    assert rec["all_iupac"]["tags"]["YU"] == "too_many_n" and rec["all_iupac"]["seq"] == "N" * 100


def test_reads_shorter_than_the_seed_span(tmp_path, genome, ref_path):
    params = NeighborhoodSeeder().build_params(sum(len(s) for s in genome.values()))
    span = params["seed_len"] + params["nb_len"]
    src = genome["chr1"]
    reads = [(f"len{L}", src[7000:7000 + L], "I" * L) for L in range(0, span + 3)]
    reads += [("normal", src[9000:9100], "I" * 100)]
    fq = write_fastq(tmp_path / "short.fq", reads)
    text, st = api_align(tmp_path, ref_path, fq)  # default --min-length
    groups = check_sam(text, reads, genome, E)
    count_invariant(text, len(reads), st)
    min_len = AlignOptions().min_length
    for i, (name, s, _) in enumerate(reads[:-1]):
        if len(s) < min_len:
            assert groups[i][0]["tags"]["YU"] == "too_short"
    assert not groups[len(reads) - 1][0]["flag"] & 4
    # with --min-length 1 the short reads reach the seeder: shorter than one pattern, no seed hit
    text, st = api_align(tmp_path, ref_path, fq, "m1.sam", min_length=1)
    groups = check_sam(text, reads, genome, E, min_length=1)
    count_invariant(text, len(reads), st)
    for i, (name, s, _) in enumerate(reads[:-1]):
        if 0 < len(s) < span:
            assert groups[i][0]["flag"] & 4, f"{name}: mapped although shorter than a seed pattern"
    assert groups[0][0]["tags"]["YU"] == "too_short"  # the empty read


def test_very_long_read(tmp_path):
    """10 kbp: above the default --max-length, unmapped too_long; mapped when the limit allows it.
    Through the CLI: a crash in a kernel (e.g. a seeding buffer overrun on long reads) fails the
    test instead of killing pytest."""
    rng = np.random.default_rng(5)
    genome = {"big": rand_seq(rng, 30000)}
    ref = write_fasta(tmp_path / "big.fa", genome)
    long_read = mutate(rng, genome["big"][8000:18000], 30)
    reads = [("long", long_read, "I" * len(long_read)), ("short", genome["big"][100:200], "I" * 100),
             ("long_rc", revcomp(long_read), "5" * len(long_read))]
    fq = write_fastq(tmp_path / "long.fq", reads)
    assert AlignOptions().max_length < len(long_read)
    text, _ = cli_align(ref, fq)
    groups = check_sam(text, reads, genome, E)
    count_invariant(text, len(reads))
    assert groups[0][0]["tags"]["YU"] == "too_long" and groups[2][0]["tags"]["YU"] == "too_long"
    assert not groups[1][0]["flag"] & 4
    text, _ = cli_align(ref, fq, "--max-length", "20000", "-e", "0.01")
    groups = check_sam(text, reads, genome, 0.01, max_length=20000)
    count_invariant(text, len(reads))
    for i in (0, 2):
        r = groups[i][0]
        assert not r["flag"] & 4 and r["pos"] == 8001 and r["tags"]["NM"] <= 30, r["line"]


def test_duplicate_read_names_are_kept_in_order(tmp_path, genome, ref_path):
    src = genome["chr2"]
    reads = [("dup", src[100:200], "I" * 100), ("dup", src[500:600], "#" * 100),
             ("other", src[900:1000], "I" * 100), ("dup", revcomp(src[1500:1600]), "5" * 100)]
    text, st = api_align(tmp_path, ref_path, write_fastq(tmp_path / "dup.fq", reads))
    groups = check_sam(text, reads, genome, E)
    prim = count_invariant(text, len(reads), st)
    assert [r["qname"] for r in prim] == ["dup", "dup", "other", "dup"]
    assert [r["pos"] for r in prim] == [101, 501, 901, 1501]
    assert [r["qual"][0] for r in prim] == ["I", "#", "I", "5"]


def test_fasta_file_as_reads(tmp_path, genome, ref_path):
    reads = sample_reads(genome, np.random.default_rng(3), n=20)
    fa = tmp_path / "reads.fa"
    with open(fa, "w") as fh:
        for n, s, _ in reads:
            fh.write(f">{n} some description\n{s[:50]}\n{s[50:]}\n")
    text, _ = cli_align(ref_path, fa)
    check_sam(text, [(n, s, None) for n, s, _ in reads], genome, E)
    prim = count_invariant(text, len(reads))
    assert all(r["qual"] == "*" for r in prim)
    assert sum(not r["flag"] & 4 for r in prim) >= 0.9 * len(reads)


@pytest.mark.parametrize("header", ["@", "@ comment"])
def test_fastq_record_without_a_name(tmp_path, genome, ref_path, header):
    src = genome["chr1"]
    fq = tmp_path / "noname.fq"
    fq.write_text(f"@named\n{src[:100]}\n+\n{'I' * 100}\n{header}\n{src[200:300]}\n+\n{'I' * 100}\n")
    res = cli("align", ref_path, fq, "--no-progress", *CLI_FILTER)
    assert_one_error(res, 1, "record 2", "no name")     # an empty QNAME would be invalid SAM


# ---- references -------------------------------------------------------------------------------

def test_reference_with_n_runs_and_iupac(tmp_path):
    rng = np.random.default_rng(6)
    s = list(rand_seq(rng, 12000))
    s[3000:3500] = "N" * 500
    s[6000:6010] = "n" * 10
    for p, c in [(8050, "R"), (8060, "Y"), (8070, "k")]:
        s[p] = c
    genome = {"gapped": "".join(s), "clean": rand_seq(rng, 3000)}
    ref = write_fasta(tmp_path / "gapped.fa", genome)
    g = genome["gapped"]
    reads = [("left_of_gap", g[2800:2900]), ("right_of_gap", g[3500:3600]),
             ("into_gap", g[2950:3050]), ("small_gap", g[5950:6050]), ("iupac", g[8000:8100]),
             ("far", g[10000:10100]), ("clean", revcomp(genome["clean"][10:110]))]
    reads = [(n, x, "I" * len(x)) for n, x in reads]
    text, st = api_align(tmp_path, ref, write_fastq(tmp_path / "r.fq", reads))
    groups = check_sam(text, reads, genome, E)
    count_invariant(text, len(reads), st)
    rec = {reads[i][0]: grp[0] for i, grp in groups.items()}
    for name, pos in [("left_of_gap", 2800), ("right_of_gap", 3500), ("far", 10000), ("iupac", 8000)]:
        assert not rec[name]["flag"] & 4 and rec[name]["pos"] == pos + 1, rec[name]["line"]
    assert rec["iupac"]["tags"]["NM"] == 3 and "R" not in rec["iupac"]["tags"]["MD"]
    assert rec["into_gap"]["flag"] & 4  # 50 N of the reference are 50 mismatches
    assert not rec["clean"]["flag"] & 4 and rec["clean"]["flag"] & 16


def test_soft_masked_reference_maps_like_uppercase(tmp_path, genome):
    rng = np.random.default_rng(7)
    masked = {}
    for n, s in genome.items():
        t = list(s)
        for _ in range(30):
            p = int(rng.integers(0, len(t)))
            t[p:p + 300] = [c.lower() for c in t[p:p + 300]]
        masked[n] = "".join(t)
    up = write_fasta(tmp_path / "upper.fa", genome)
    low = write_fasta(tmp_path / "masked.fa", masked)
    reads = sample_reads(genome, np.random.default_rng(8), n=60)
    fq = write_fastq(tmp_path / "r.fq", reads)
    a, _ = api_align(tmp_path, up, fq, "a.sam")
    b, st = api_align(tmp_path, low, fq, "b.sam")
    assert body(a) == body(b)
    check_sam(b, reads, masked, E)
    count_invariant(b, len(reads), st)


def test_empty_contigs_are_skipped(tmp_path, genome):
    ref = tmp_path / "empty.fa"
    ref.write_text(">first_empty\n>chr1\n" + genome["chr1"] + "\n>middle_empty desc\n\n\n>chr2\n"
                   + genome["chr2"] + "\n>last_empty\n")
    reads = sample_reads(genome, np.random.default_rng(9), n=30)
    text, err = cli_align(ref, write_fastq(tmp_path / "r.fq", reads))
    assert sq_lines(parse_sam(text)[0]) == [("chr1", 20000), ("chr2", 8000)]
    assert "contig(s) without bases left out of the header: first_empty, middle_empty, last_empty" in err
    check_sam(text, reads, genome, E)
    prim = count_invariant(text, len(reads))
    assert sum(not r["flag"] & 4 for r in prim) >= 0.9 * len(reads)


def test_duplicate_contig_names_are_a_clear_error(tmp_path, genome):
    ref = tmp_path / "dup.fa"
    ref.write_text(">chr1 first\n" + genome["chr1"][:5000] + "\n>chr2\nACGT\n>chr1 second\n"
                   + genome["chr1"][5000:9000] + "\n")
    fq = write_fastq(tmp_path / "r.fq", sample_reads({"chr1": genome["chr1"][:5000]}, np.random.default_rng(1), 3))
    out = tmp_path / "out.sam"
    assert_one_error(cli("align", ref, fq, "-o", out, *CLI_FILTER), 1, "duplicate", "chr1")
    assert not out.exists()
    assert not (tmp_path / "dup.fa.pymap.idx").exists()


def test_contig_names_with_spaces_use_the_first_word(tmp_path, genome):
    named = {"chr1 Homo sapiens chromosome 1, GRCh38": genome["chr1"], "chr2\tsecond contig": genome["chr2"]}
    ref = write_fasta(tmp_path / "spaces.fa", named)
    reads = sample_reads(genome, np.random.default_rng(10), n=20)
    text, st = api_align(tmp_path, ref, write_fastq(tmp_path / "r.fq", reads))
    assert sq_lines(parse_sam(text)[0]) == [("chr1", 20000), ("chr2", 8000)]
    check_sam(text, reads, genome, E)
    prim = count_invariant(text, len(reads), st)
    assert {r["rname"] for r in prim if not r["flag"] & 4} == {"chr1", "chr2"}


def test_contig_names_sam_does_not_allow_get_a_note(tmp_path, genome):
    """Names outside the SAM specification's RNAME pattern are written as they are (bwa mem does the
    same), with one note naming them; allowed ones (HLA-A*01:01, chrUn_x.1) get none."""
    named = {"HLA-A*01:01": genome["chr1"], "chr2,alt": genome["chr2"][:4000], "*x": genome["chr2"][4000:]}
    ref = write_fasta(tmp_path / "odd.fa", named)
    reads = sample_reads({"HLA-A*01:01": genome["chr1"]}, np.random.default_rng(11), n=10)
    text, err = cli_align(ref, write_fastq(tmp_path / "r.fq", reads))
    assert [n for n, _ in sq_lines(parse_sam(text)[0])] == list(named)
    notes = [line for line in err.splitlines() if "SAM specification does not allow" in line]
    assert len(notes) == 1 and "'chr2,alt', '*x'" in notes[0] and "HLA" not in notes[0]
    fine = write_fasta(tmp_path / "fine.fa", {"chrUn_KI270302v1.1": genome["chr1"]})
    assert "does not allow" not in cli_align(fine, write_fastq(tmp_path / "s.fq", reads[:2]))[1]


def test_three_thousand_small_contigs(tmp_path):
    rng = np.random.default_rng(12)
    contigs = {f"contig_{i:04d}": rand_seq(rng, int(rng.integers(120, 400))) for i in range(3000)}
    ref = write_fasta(tmp_path / "many.fa", contigs)
    names = list(contigs)
    reads = []
    for i in range(300):
        n = names[int(rng.integers(0, len(names)))]
        L = min(100, len(contigs[n]))
        p = int(rng.integers(0, len(contigs[n]) - L + 1))
        s = contigs[n][p:p + L]
        reads.append((f"q{i}_{n}_{p}", revcomp(s) if i % 2 else s, "I" * L))
    text, _ = cli_align(ref, write_fastq(tmp_path / "r.fq", reads))
    assert sq_lines(parse_sam(text)[0]) == [(n, len(s)) for n, s in contigs.items()]
    check_sam(text, reads, contigs, E)
    prim = count_invariant(text, len(reads))
    ok = sum(not r["flag"] & 4 and r["qname"].split("_", 1)[1] == f"{r['rname']}_{r['pos'] - 1}" for r in prim)
    assert ok >= 0.95 * len(reads)


def test_contig_shorter_than_a_read(tmp_path, genome):
    rng = np.random.default_rng(13)
    tiny = rand_seq(rng, 40)
    contigs = {"tiny": tiny, "chr2": genome["chr2"], "tiny2": rand_seq(rng, 70)}
    ref = write_fasta(tmp_path / "tiny.fa", contigs)
    c2 = genome["chr2"]
    reads = [("tiny_itself", tiny, "I" * 40),
             ("tiny_in_flanks", rand_seq(rng, 30) + tiny + rand_seq(rng, 30), "I" * 100),
             ("tiny2_plus", contigs["tiny2"] + c2[:30], "I" * 100),
             ("chr2_start", c2[:100], "I" * 100), ("chr2_end", revcomp(c2[-100:]), "I" * 100),
             ("chr2_overhang", c2[-60:] + rand_seq(rng, 40), "I" * 100)]
    text, st = api_align(tmp_path, ref, write_fastq(tmp_path / "r.fq", reads), report_all=True, max_edits=6)
    groups = check_sam(text, reads, contigs, 6, report_all=True)  # includes: no alignment leaves its contig
    count_invariant(text, len(reads), st)
    rec = {reads[i][0]: g[0] for i, g in groups.items()}
    assert rec["tiny_itself"]["rname"] == "tiny" and rec["tiny_itself"]["cigar"] == "40M"
    assert rec["tiny_in_flanks"]["flag"] & 4
    assert rec["chr2_start"]["pos"] == 1 and rec["chr2_end"]["pos"] == len(c2) - 99
    assert rec["chr2_overhang"]["flag"] & 4


# ---- index ------------------------------------------------------------------------------------

def test_index_of_another_format_version(tmp_path, genome):
    ref = write_fasta(tmp_path / "ref.fa", genome)
    reads = sample_reads(genome, np.random.default_rng(14), n=20)
    fq = write_fastq(tmp_path / "r.fq", reads)
    idx = tmp_path / "v.idx"
    assert cli("index", ref, "-o", idx).returncode == 0
    data = bytearray(idx.read_bytes())
    (version,) = struct.unpack_from("<I", data, 8)
    assert version == idxfile.FORMAT_VERSION
    struct.pack_into("<I", data, 8, version + 1)
    idx.write_bytes(bytes(data))
    res = cli("align", ref, fq, "--index", idx, "--no-progress", *CLI_FILTER)
    assert_one_error(res, 1, "pymap index", "version")
    assert res.stdout == b""
    # the same file as the default index next to the reference: rebuilt, with a message
    (tmp_path / "ref.fa.pymap.idx").write_bytes(bytes(data))
    text, err = cli_align(ref, fq)
    assert "rebuilding" in err and "version" in err
    check_sam(text, reads, genome, E)
    count_invariant(text, len(reads))
    with open(tmp_path / "ref.fa.pymap.idx", "rb") as fh:
        assert struct.unpack_from("<I", fh.read(12), 8)[0] == idxfile.FORMAT_VERSION
