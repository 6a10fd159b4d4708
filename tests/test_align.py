"""End to end: reads simulated with truth, mapped through the default pipeline, SAM checked."""
import shutil
import subprocess
import sys

import edlib
import numpy as np
import pysam
import pytest

from pymap import api
from pymap.errors import UsageError
from pymap.options import AlignOptions

from conftest import revcomp


def _run(ref, reads, out, **kw):
    kw.setdefault("progress", False)
    return api.align(str(ref), str(reads), out=str(out), options=AlignOptions(**kw), summary=False)


def _body(path):
    return [l for l in open(path).read().splitlines() if not l.startswith("@PG")]


def _apply(ref_seq, start, cigar, read):
    """Reference bases covered and the edit count implied by a CIGAR (M/I/D)."""
    q = start
    j = 0
    edits = 0
    for op, n in cigar:
        if op == 0:
            edits += sum(1 for k in range(n) if ref_seq[q + k] != read[j + k] or read[j + k] == "N")
            q += n
            j += n
        elif op == 1:
            edits += n
            j += n
        elif op == 2:
            edits += n
            q += n
        elif op == 4:
            j += n
    return j, ref_seq[start:q], edits


def _affine_score(ref_seq, start, cigar, read):
    """bwa-mem's AS of an alignment (match 1, mismatch -4, N -1, a gap of k -(6 + k))."""
    q, j, score = start, 0, 0
    for op, n in cigar:
        if op == 0:
            score += sum(-1 if "N" in (ref_seq[q + k], read[j + k]) else (1 if ref_seq[q + k] == read[j + k] else -4)
                         for k in range(n))
            q, j = q + n, j + n
        elif op in (1, 2):
            score -= 6 + n
            q, j = (q, j + n) if op == 1 else (q + n, j)
        elif op == 4:
            j += n
    return score


def _md(ref_seq, start, cigar, read):
    out, run, q, j = [], 0, start, 0
    for op, n in cigar:
        if op == 0:
            for k in range(n):
                if ref_seq[q + k] == read[j + k] and read[j + k] != "N":
                    run += 1
                else:
                    out.append(f"{run}{ref_seq[q + k]}")
                    run = 0
            q += n
            j += n
        elif op in (1, 4):
            j += n
        elif op == 2:
            out.append(f"{run}^{ref_seq[q:q + n]}")
            run = 0
            q += n
    return "".join(out) + str(run)


@pytest.mark.parametrize("extender", ["affine", "banded"])
def test_sim_reads_placed_and_sam_consistent(sim_data, tmp_path, extender):
    ref, reads, truth, contigs = sim_data
    out = tmp_path / "out.sam"
    st = _run(ref, reads, out, max_edits=0.06, threads=2, extender=extender)
    seen = {}
    correct = confident = 0
    with pysam.AlignmentFile(str(out)) as sam:
        assert [s["SN"] for s in sam.header.to_dict()["SQ"]] == ["chrA", "chrB", "chrC"]
        for rec in sam:
            assert not rec.is_secondary
            seen[rec.query_name] = seen.get(rec.query_name, 0) + 1
            if rec.is_unmapped:
                assert rec.has_tag("YU")
                continue
            c, pos, strand, edits = truth[rec.query_name]
            read = rec.query_sequence
            ref_seq = contigs[rec.reference_name]
            used, covered, ed = _apply(ref_seq, rec.reference_start, rec.cigartuples, read)
            assert used == len(read)
            assert ed == rec.get_tag("NM")
            assert rec.get_tag("MD") == _md(ref_seq, rec.reference_start, rec.cigartuples, read)
            if extender == "banded":
                assert rec.get_tag("AS") == -ed
                assert edlib.align(read, covered, mode="NW")["editDistance"] == ed
            else:
                assert rec.get_tag("AS") == _affine_score(ref_seq, rec.reference_start, rec.cigartuples, read)
            if (rec.reference_name == c and abs(rec.reference_start - pos) <= 10
                    and rec.is_reverse == (strand == "-")):
                correct += 1
                confident += rec.mapping_quality >= 20
    assert set(seen) == set(truth) and set(seen.values()) == {1}
    assert st.reads == len(truth)
    assert correct >= 0.98 * len(truth)
    assert confident >= 0.9 * len(truth)      # random contigs: most placements unique, either scoring


def test_deterministic_across_threads_and_batches(sim_data, tmp_path):
    """The records and the run's counters do not depend on threads, batch size or how many batches
    are mapped side by side."""
    ref, reads, _, _ = sim_data
    a, b, c, d = (tmp_path / f"{x}.sam" for x in "abcd")
    runs = [_run(ref, reads, a, threads=1, batch_size=100000),
            _run(ref, reads, b, threads=2, batch_size=37),
            _run(ref, reads, c, threads=2, batch_size=1000, seed=0),
            _run(ref, reads, d, threads=2, batch_size=23, batches=5)]
    assert _body(a) == _body(b) == _body(c) == _body(d)
    counts = [{k: v for k, v in vars(st).items() if k not in ("seconds", "filter_slack")} for st in runs]
    assert all(x == counts[0] for x in counts) and counts[0]["reads"] > 0


def test_default_batches_side_by_side():
    """threads / 5 batches side by side, 3/4 of the threads on a GPU (a batch's host work overlaps another's
    device work), at least 2; one on one thread."""
    from pymap.options import default_batches
    assert [default_batches(t) for t in (1, 2, 16, 32)] == [1, 2, 3, 6]
    assert [default_batches(t, "gpu") for t in (1, 2, 16, 32)] == [1, 2, 12, 24]
    for device, want in ((None, 3), ("auto", 3), ("cpu", 3), ("gpu", 12)):
        opt = AlignOptions(threads=16, device=device)
        opt.validate()
        assert opt.batches == want


@pytest.mark.parametrize("kw, words", [
    ({"insert_size": (300, 30)}, ["insert_size", "InsertModel"]),
    ({"max_edits": "0.05"}, ["max_edits", "a number"]),
    ({"threads": "2"}, ["threads", "whole number"]),
    ({"threads": 1.5}, ["threads", "whole number"]),
    ({"max_hits": 2.5}, ["max_hits"]),
    ({"seed": "a"}, ["seed"]),
    ({"report_all": 1}, ["report_all", "True or False"]),
    ({"seeder_opts": [("k", 1)]}, ["seeder_opts", "dict"]),
])
def test_api_options_of_the_wrong_type_are_one_usage_error(kw, words):
    with pytest.raises(UsageError) as err:
        AlignOptions(**kw).validate()
    assert all(w in str(err.value) for w in words)
    AlignOptions(threads=np.int64(2), max_edits=np.float32(0.05), max_hits=3).validate()


def test_bam_output_and_quickcheck(sim_data, tmp_path):
    ref, reads, truth, _ = sim_data
    out = tmp_path / "out.bam"
    _run(ref, reads, out, read_group="@RG\\tID:grp1\\tSM:s1")
    with pysam.AlignmentFile(str(out), "rb") as bam:
        assert bam.header.to_dict()["RG"][0]["ID"] == "grp1"
        recs = list(bam)
    assert len(recs) == len(truth)
    assert all(r.get_tag("RG") == "grp1" for r in recs)
    if shutil.which("samtools"):
        subprocess.run(["samtools", "quickcheck", str(out)], check=True)
        res = subprocess.run(["samtools", "view", "-c", str(out)], capture_output=True, text=True, check=True)
        assert res.stderr == "" and int(res.stdout) == len(truth)


def test_all_and_max_hits_report_repeats(tmp_path):
    rng = np.random.default_rng(5)
    unit = "".join(rng.choice(list("ACGT"), 300))
    spacer = lambda n: "".join(rng.choice(list("ACGT"), n))
    seq = spacer(2000) + unit + spacer(1500) + unit + spacer(1700) + unit + spacer(900)
    (tmp_path / "r.fa").write_text(">rep\n" + seq + "\n")
    read = unit[100:200]
    (tmp_path / "q.fq").write_text(f"@q\n{read}\n+\n{'I' * 100}\n")
    out = tmp_path / "o.sam"
    _run(tmp_path / "r.fa", tmp_path / "q.fq", out, report_all=True, max_edits=3)
    recs = list(pysam.AlignmentFile(str(out)))
    assert len(recs) == 3
    assert sum(not r.is_secondary for r in recs) == 1
    assert sorted(r.reference_start for r in recs) == [2100, 2000 + 300 + 1500 + 100, 2000 + 600 + 3200 + 100]
    assert recs[0].mapping_quality == 0
    _run(tmp_path / "r.fa", tmp_path / "q.fq", out, max_hits=2, max_edits=3)
    assert len(list(pysam.AlignmentFile(str(out)))) == 2


def test_unmappable_reads_are_reported(sim_data, tmp_path):
    ref, _, _, contigs = sim_data
    good = contigs["chrA"][1000:1100]
    fq = tmp_path / "u.fq"
    fq.write_text(f"@short\nACGTACG\n+\nIIIIIII\n@alln\n{'N' * 100}\n+\n{'I' * 100}\n"
                  f"@long\n{contigs['chrA'][:2000]}\n+\n{'I' * 2000}\n@empty\n\n+\n\n"
                  f"@random\n{'ACGT' * 25}\n+\n{'I' * 100}\n@good\n{revcomp(good)}\n+\n{'I' * 100}\n")
    out = tmp_path / "u.sam"
    st = _run(ref, fq, out)
    recs = {r.query_name: r for r in pysam.AlignmentFile(str(out))}
    assert len(recs) == 6
    assert recs["short"].get_tag("YU") == "too_short"
    assert recs["empty"].get_tag("YU") == "too_short"
    assert recs["alln"].get_tag("YU") == "too_many_n"
    assert recs["long"].get_tag("YU") == "too_long"
    assert recs["random"].is_unmapped
    assert not recs["good"].is_unmapped and recs["good"].is_reverse and recs["good"].reference_start == 1000
    assert st.mapped == 1 and st.reads == 6


def test_cli_align_example(tmp_path):
    out = tmp_path / "ex.sam"
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", "examples/lambda.fa",
                          "examples/reads.fq.gz", "-o", str(out), "-t", "2"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    recs = list(pysam.AlignmentFile(str(out)))
    primaries = [r for r in recs if not r.is_secondary]
    assert len(primaries) == 2000
    assert sum(not r.is_unmapped for r in primaries) >= 1990
    assert "2000 reads" in res.stderr


def test_mapping_makes_no_cyclic_garbage(tmp_path):
    """`pymap align` maps with Python's cycle collector off (cli.main): a run, after a first one, must
    leave no garbage that only the collector frees: single reads in 40 batches, sorted BAM, pairs."""
    import gc
    import gzip
    ref, reads = "examples/lambda.fa", "examples/reads.fq.gz"
    lines = gzip.open(reads, "rt").read().splitlines(keepends=True)
    (tmp_path / "r1.fq").write_text("".join(lines[:2000]))
    mates = []
    for i in range(0, 2000, 4):                # mate 2: the reverse complement of read 1's last 60 bases
        mates += [lines[i], revcomp(lines[i + 1].strip()[-60:]) + "\n", "+\n", "I" * 60 + "\n"]
    (tmp_path / "r2.fq").write_text("".join(mates))

    def runs():
        opts = dict(threads=2, progress=False, batch_size=50)
        api.align(ref, reads, out=str(tmp_path / "a.sam"), options=AlignOptions(**opts), summary=False)
        api.align(ref, reads, out=str(tmp_path / "a.bam"), options=AlignOptions(sort=True, **opts), summary=False)
        api.align(ref, str(tmp_path / "r1.fq"), out=str(tmp_path / "p.sam"), mates_path=str(tmp_path / "r2.fq"),
                  options=AlignOptions(**opts), summary=False)

    runs()                                     # kernels loaded, caches filled
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        runs()
        assert gc.collect() < 10               # fewer than one object in ten batches
    finally:
        if was:
            gc.enable()


def _one_read_ref(tmp_path, rng, read_fn):
    seq = "".join(rng.choice(list("ACGT"), 6000))
    (tmp_path / "r.fa").write_text(">c\n" + seq + "\n")
    read = read_fn(seq)
    (tmp_path / "q.fq").write_text(f"@q\n{read}\n+\n{'I' * len(read)}\n")
    return seq, read


def test_filter_slack_keeps_reads_with_indels_near_e(tmp_path):
    """A read 3 edits from the reference (a 2-base deletion near its end and a substitution) is
    5 edits from the equal-length segment: an exact filter at e = 3 would reject it."""
    rng = np.random.default_rng(12)
    seq, read = _one_read_ref(tmp_path, rng, lambda s: s[2000:2010] + ("A" if s[2010] != "A" else "C")
                              + s[2011:2090] + s[2092:2102])
    assert edlib.align(read, seq[1990:2110], mode="HW")["editDistance"] == 3
    assert edlib.align(read, seq[2000:2000 + len(read)], mode="NW")["editDistance"] > 3
    out = tmp_path / "o.sam"
    kw = dict(max_edits=3, filter="edlib", extender="banded")
    st = _run(tmp_path / "r.fa", tmp_path / "q.fq", out, **kw)
    rec = next(iter(pysam.AlignmentFile(str(out))))
    assert st.mapped == 1 and rec.reference_start == 2000 and rec.get_tag("NM") == 3
    st = _run(tmp_path / "r.fa", tmp_path / "q.fq", out, filter_slack=0, **kw)
    rec = next(iter(pysam.AlignmentFile(str(out))))
    assert st.mapped == 0 and rec.get_tag("YU") == "over_max_edits"
    # the scoring extender extends a weak read's rejected candidates: the read is mapped anyway
    st = _run(tmp_path / "r.fa", tmp_path / "q.fq", out, max_edits=3, filter="edlib", filter_slack=0)
    rec = next(iter(pysam.AlignmentFile(str(out))))
    assert st.mapped == 1 and rec.reference_start == 2000 and st.rescued >= 1


def test_all_mode_seeds_losslessly(tmp_path):
    """--all turns on the seeder's lossless step and roomy caps unless the user set them."""
    from pymap.seeders.neighborhood import NeighborhoodSeeder
    (tmp_path / "r.fa").write_text(">c\n" + "ACGT" * 500 + "\n")
    pipe = api.make_pipeline(str(tmp_path / "r.fa"), AlignOptions(report_all=True, seeder_opts={"max_cands": 7}))
    assert pipe.seeder.lossless and pipe.seeder.max_cands == 7
    assert pipe.seeder.max_occ == NeighborhoodSeeder.all_locations_defaults["max_occ"]
    pipe = api.make_pipeline(str(tmp_path / "r.fa"), AlignOptions())
    assert not pipe.seeder.lossless


def test_read_inside_a_tandem_array_is_not_unique(tmp_path):
    """A read inside a microsatellite longer than itself fits at every shift of the unit: MAPQ 0."""
    rng = np.random.default_rng(3)
    seq, read = _one_read_ref(tmp_path, rng, lambda s: "GACTAA" * 30)
    seq = seq[:3000] + "GACTAA" * 50 + seq[3000:]
    (tmp_path / "r.fa").write_text(">c\n" + seq + "\n")
    out = tmp_path / "o.sam"
    _run(tmp_path / "r.fa", tmp_path / "q.fq", out, max_edits=10)
    rec = next(iter(pysam.AlignmentFile(str(out))))
    assert not rec.is_unmapped and rec.get_tag("NM") == 0
    assert 3000 <= rec.reference_start <= 3120 and rec.mapping_quality == 0


@pytest.mark.parametrize("extender", ["affine", "banded"])
def test_read_with_errors_inside_a_tandem_array_is_not_unique(tmp_path, extender):
    """A read with two substitutions inside a microsatellite: every shift of the unit scores the
    same or nearly so, and those placements merge into one locus; they still count as runners-up,
    so the read does not get a confident MAPQ."""
    rng = np.random.default_rng(4)
    unit = "AGAGT"
    read = list(unit * 30)
    read[40], read[101] = "C", "C"
    seq, read = _one_read_ref(tmp_path, rng, lambda s: "".join(read))
    seq = seq[:3000] + unit * 32 + seq[3000:]        # shifts 0, 5, 10: all within one locus (e = 10)
    (tmp_path / "r.fa").write_text(">c\n" + seq + "\n")
    out = tmp_path / "o.sam"
    _run(tmp_path / "r.fa", tmp_path / "q.fq", out, max_edits=10, extender=extender)
    rec = next(iter(pysam.AlignmentFile(str(out))))
    assert not rec.is_unmapped and 3000 <= rec.reference_start <= 3010
    assert rec.mapping_quality < 20 and rec.has_tag("XS")


def test_quick_switching_is_restored_by_its_last_user():
    """threads.quick_switching (GPU runs with batches side by side): the interval is lowered while
    any user is inside, never raised, and restored when the last one leaves."""
    import sys
    from pymap.kernels.threads import quick_switching
    before = sys.getswitchinterval()
    with quick_switching(0.001):
        assert sys.getswitchinterval() == 0.001
        with quick_switching(0.002):
            assert sys.getswitchinterval() == 0.001
        assert sys.getswitchinterval() == 0.001
    assert sys.getswitchinterval() == before
    with quick_switching(1.0):
        assert sys.getswitchinterval() == before
