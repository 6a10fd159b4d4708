"""The bad cases of a review: each ends in correct output or one clear `pymap: error:` line, and a
failed run leaves no output file behind."""
import gzip
import os

import numpy as np
import pysam
import pytest

from pymap import cli
from pymap.batch import Alignments
from pymap.extenders.affine import AffineExtender

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "examples", "lambda.fa")
READS = os.path.join(ROOT, "examples", "reads.fq.gz")


def _ref_seq():
    return "".join(open(REF).read().split("\n")[1:])


def _fastq(path, records):
    with open(path, "w") as fh:
        for name, seq in records:
            fh.write(f"@{name}\n{seq}\n+\n{'I' * len(seq)}\n")


def _run(capsys, *args):
    rc = cli.main([str(a) for a in args])
    err = capsys.readouterr().err
    return rc, err


def _leftovers(directory):
    return [f for f in os.listdir(directory) if f.endswith(".part")]


def test_long_read_name_is_one_clear_error_and_no_bam(tmp_path, capsys):
    seq = _ref_seq()
    _fastq(tmp_path / "r.fq", [("ok", seq[1000:1100]), ("x" * 300, seq[2000:2100])])
    out = tmp_path / "out.bam"
    rc, err = _run(capsys, "align", REF, tmp_path / "r.fq", "-o", out)
    assert rc == 1
    lines = [l for l in err.splitlines() if l.startswith("pymap:")]
    assert len(lines) == 1 and "read name of 300 characters" in lines[0] and "254" in lines[0]
    assert not out.exists() and not _leftovers(tmp_path)


def test_megabase_read_is_unmapped_too_long_and_the_run_goes_on(tmp_path, capsys):
    seq = _ref_seq()
    rng = np.random.default_rng(3)
    huge = "".join(rng.choice(list("ACGT"), 1_100_000))
    _fastq(tmp_path / "r.fq", [("a", seq[1000:1100]), ("huge", huge), ("b", seq[3000:3150])])
    out = tmp_path / "out.sam"
    rc, err = _run(capsys, "align", REF, tmp_path / "r.fq", "-o", out)
    assert rc == 0, err
    recs = {r.query_name: r for r in pysam.AlignmentFile(str(out))}
    assert set(recs) == {"a", "huge", "b"}
    assert recs["huge"].is_unmapped and recs["huge"].get_tag("YU") == "too_long"
    assert not recs["a"].is_unmapped and recs["a"].reference_start == 1000
    assert not recs["b"].is_unmapped and recs["b"].reference_start == 3000


def test_sam_gz_is_bgzf_and_unknown_extension_is_an_error(tmp_path, capsys):
    out = tmp_path / "out.sam.gz"
    rc, err = _run(capsys, "align", REF, READS, "-o", out)
    assert rc == 0, err
    assert open(out, "rb").read(4)[:2] == b"\x1f\x8b"
    text = gzip.open(out, "rt").read()
    assert text.startswith("@HD") and sum(1 for _ in pysam.AlignmentFile(str(out))) == 2000
    rc, err = _run(capsys, "align", REF, READS, "-o", tmp_path / "out.txt")
    assert rc == 2 and "unknown output format" in err
    assert not (tmp_path / "out.txt").exists()


def test_failed_run_leaves_no_output(tmp_path, capsys):
    seq = _ref_seq()
    good = [(f"r{i}", seq[100 * i:100 * i + 100]) for i in range(50)]
    _fastq(tmp_path / "r.fq", good)
    with open(tmp_path / "r.fq", "a") as fh:
        fh.write("@bad\nACGT\n+\nII\n")          # quality shorter than the sequence
    for name in ("out.sam", "out.bam", "out.sam.gz"):
        out = tmp_path / name
        rc, err = _run(capsys, "align", REF, tmp_path / "r.fq", "-o", out, "--batch-size", "10")
        assert rc == 1 and "sequence and quality lengths differ" in err
        assert not out.exists() and not _leftovers(tmp_path)


def test_internal_error_is_not_a_usage_error(tmp_path, capsys, monkeypatch):
    def broken(self, cands, traceback=False):
        raise ValueError("something inside went wrong")
    monkeypatch.setattr(AffineExtender, "extend", broken)
    out = tmp_path / "out.sam"
    rc, err = _run(capsys, "align", REF, READS, "-o", out)
    assert rc == 3 and "internal error" in err and "ValueError" in err and "usage" not in err
    assert not out.exists()


def test_extender_breaking_the_contract_is_reported(tmp_path, capsys, monkeypatch):
    real = AffineExtender.extend

    def short_cigars(self, cands, traceback=False):
        aln = real(self, cands, traceback)
        if traceback and len(cands):
            aln.cigar = aln.cigar.copy()
            aln.cigar[0] = np.uint32(((aln.cigar[0] >> 4) - 1) << 4 | (aln.cigar[0] & 15))
        return aln
    monkeypatch.setattr(AffineExtender, "extend", short_cigars)
    rc, err = _run(capsys, "align", REF, READS, "-o", tmp_path / "out.sam")
    assert rc == 3 and "extender 'affine'" in err and "read bases" in err


def test_traceback_disagreeing_with_scores_is_reported(tmp_path, capsys, monkeypatch):
    real = AffineExtender.extend

    def shifted(self, cands, traceback=False):
        aln = real(self, cands, traceback)
        if traceback:
            aln = Alignments(aln.found, aln.score, aln.edits + 1, aln.start, aln.cigar, aln.cigar_offsets)
        return aln
    monkeypatch.setattr(AffineExtender, "extend", shifted)
    rc, err = _run(capsys, "align", REF, READS, "-o", tmp_path / "out.sam")
    assert rc == 3 and "disagrees" in err


def test_seeder_breaking_the_contract_is_reported(tmp_path, capsys, monkeypatch):
    from pymap.seeders.neighborhood import NeighborhoodSeeder
    real = NeighborhoodSeeder.candidates

    def unsorted(self, index, batch, max_edits):
        c = real(self, index, batch, max_edits)
        return c.take(np.arange(len(c))[::-1])
    monkeypatch.setattr(NeighborhoodSeeder, "candidates", unsorted)
    rc, err = _run(capsys, "align", REF, READS, "-o", tmp_path / "out.sam")
    assert rc == 3 and "seeder 'neighborhood'" in err and "sorted" in err
    assert not (tmp_path / "out.sam").exists()


def test_seeder_mapq_cap_of_the_wrong_shape_is_reported(tmp_path, capsys, monkeypatch):
    from pymap.seeders.neighborhood import NeighborhoodSeeder
    real = NeighborhoodSeeder.candidates

    def capped(self, index, batch, max_edits):
        c = real(self, index, batch, max_edits)
        c.mapq_cap = np.zeros(len(batch) + 1, np.int64)
        return c
    monkeypatch.setattr(NeighborhoodSeeder, "candidates", capped)
    rc, err = _run(capsys, "align", REF, READS, "-o", tmp_path / "out.sam")
    assert rc == 3 and "mapq_cap" in err
    assert not (tmp_path / "out.sam").exists()


def test_chain_options_reach_only_the_stages_that_take_them(tmp_path, capsys):
    out = tmp_path / "out.sam"
    rc, err = _run(capsys, "align", REF, READS, "--filter", "gatekeeper-gpu,sneakysnake", "--device", "cpu",
                   "-o", out)
    assert rc == 0, err
    assert "filter accepts gatekeeper-gpu" in err
    rc, err = _run(capsys, "align", REF, READS, "--filter", "gatekeeper-gpu,sneakysnake",
                   "--filter-opt", "sneakysnake.undefined=compare", "--filter-opt", "ends=full", "-o", out)
    assert rc == 0, err
    rc, err = _run(capsys, "align", REF, READS, "--filter", "gatekeeper-gpu,sneakysnake",
                   "--filter-opt", "bogus=1", "-o", out)
    assert rc == 2 and "bogus" in err
    rc, err = _run(capsys, "align", REF, READS, "--filter", "none", "--filter-opt", "q=3", "-o", out)
    assert rc == 2 and "has no option 'q'" in err


@pytest.mark.parametrize("filt", ["none", "edlib", "gatekeeper-gpu", "shouji", "sneakysnake"])
def test_measured_filter_threshold_loses_no_read(tmp_path, filt):
    """Reads with indels near e map the same with any filter as with none (the threshold the
    mapper measures keeps them)."""
    from pymap import api
    from pymap.options import AlignOptions
    seq = _ref_seq()
    rng = np.random.default_rng(11)
    recs = []
    for i in range(300):
        p = int(rng.integers(0, len(seq) - 200))
        s = list(seq[p:p + 130])
        for _ in range(int(rng.integers(1, 4))):          # 1..3 indels of 1..3 bases
            k, at = int(rng.integers(1, 4)), int(rng.integers(0, 100))
            if rng.random() < 0.5:
                del s[at:at + k]
            else:
                s[at:at] = list(rng.choice(list("ACGT"), k))
        recs.append((f"q{i}", "".join(s[:100])))
    _fastq(tmp_path / "r.fq", recs)
    mapped = {}
    for f in ("none", filt):
        st = api.align(REF, str(tmp_path / "r.fq"), out=str(tmp_path / f"{f}.sam"),
                       options=AlignOptions(max_edits=8, filter=f, threads=1), summary=False)
        mapped[f] = {(r.query_name, r.reference_start, r.get_tag("NM"))
                     for r in pysam.AlignmentFile(str(tmp_path / f"{f}.sam")) if not r.is_unmapped}
    assert mapped[filt] == mapped["none"]
