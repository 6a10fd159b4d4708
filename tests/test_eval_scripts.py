"""Fast tests of the evaluation scripts (scripts/score.py, bench_mapping.py, simulate.py, rabema_eval.py).

Hand-made SAM + truth check the scoring rules and the MAPQ table; tests that need Mason, bwa or
/usr/bin/time are skipped when the tool is absent.
"""
import gzip
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
sys.path.insert(0, SCRIPTS)


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


pysam = pytest.importorskip("pysam")
score = _load("score")
simulate = _load("simulate")
bench = _load("bench_mapping")
rabema = _load("rabema_eval")

L = 100
SEQ = "A" * L
QUAL = "I" * L
HEADER = "@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:chr1\tLN:100000\n@SQ\tSN:chr2\tLN:50000\n"

# name, contig, pos, strand, nm
TRUTH = [
    ("r1", "chr1", 1000, "+", 0),
    ("r2", "chr1", 2000, "+", 1),
    ("r3", "chr1", 3000, "-", 0),
    ("r4", "chr2", 4000, "+", 2),
    ("r5", "chr1", 5000, "+", 0),
    ("r6", "chr1", 6000, "+", 0),
    ("r7", "chr2", 7000, "-", 0),
    ("r8", "chr1", 8000, "+", 3),
    ("r9", "chr1", 9000, "-", 0),
    ("r10", "chr2", 10000, "+", 0),
]


def sam_line(name, flag, contig="*", pos=0, mapq=0, cigar="*"):
    return f"{name}\t{flag}\t{contig}\t{pos}\t{mapq}\t{cigar}\t*\t0\t0\t{SEQ}\t{QUAL}\n"


# r1 exact (Q60) | r2 +7 bp (Q30, within 10) | r3 +15 bp (Q25, wrong) | r4 wrong strand (Q60)
# r5 wrong contig (Q0) | r6 unmapped | r7 missing | r8 12S88M, start +12, unclipped start exact (Q40)
# r9 primary right (Q20) + secondary wrong (ignored) | r10 primary right (Q60) twice (violation)
# zz: not in the truth (violation)
RECORDS = [
    sam_line("r1", 0, "chr1", 1000, 60, "100M"),
    sam_line("r2", 0, "chr1", 2007, 30, "100M"),
    sam_line("r3", 16, "chr1", 3015, 25, "100M"),
    sam_line("r4", 16, "chr2", 4000, 60, "100M"),
    sam_line("r5", 0, "chr2", 5000, 0, "100M"),
    sam_line("r6", 4),
    sam_line("r8", 0, "chr1", 8012, 40, "12S88M"),
    sam_line("r9", 16, "chr1", 9000, 20, "100M"),
    sam_line("r9", 256, "chr2", 123, 0, "100M"),
    sam_line("r10", 0, "chr2", 10000, 60, "100M"),
    sam_line("r10", 0, "chr2", 10000, 60, "100M"),
    sam_line("zz", 0, "chr1", 1, 60, "100M"),
]


@pytest.fixture()
def files(tmp_path):
    truth = tmp_path / "truth.tsv"
    simulate.write_truth(str(truth), TRUTH)
    sam = tmp_path / "m.sam"
    sam.write_text(HEADER + "".join(RECORDS))
    return str(truth), str(sam), tmp_path


def test_counts(files):
    truth_path, sam, _ = files
    truth = score.load_truth(truth_path)
    assert len(truth) == 10 and truth["r3"] == ("chr1", 3000, "-", 0)
    r = score.score_sam(truth, sam, tolerance=10, label="m")
    assert r["reads"] == 10
    assert r["mapped"] == 8  # r1 r2 r3 r4 r5 r8 r9 r10
    assert r["correct"] == 5  # r1 r2 r8 r9 r10
    assert r["wrong"] == 3  # r3 r4 r5
    assert r["unmapped"] == 1
    assert r["missing"] == 1 and r["violations"]["missing_examples"] == ["r7"]
    assert r["violations"]["duplicate_primary"] == 1 and r["violations"]["duplicate_examples"] == ["r10"]
    assert r["violations"]["unknown_reads"] == 1
    assert r["secondary_records"] == 1
    assert score.violations_total(r) == 3
    assert r["sensitivity"] == pytest.approx(0.5)
    assert r["precision"] == pytest.approx(5 / 8)


def test_ties_are_wrong_reads_placed_as_well_as_the_truth(files):
    """r5 (true NM 0) sits on another contig with NM 0, unclipped: a tie; r3 has no NM tag; with
    NM 1 or a clip r5 would be a plain error."""
    truth_path, sam, tmp = files
    text = open(sam).read().replace("r5\t0\tchr2\t5000\t0\t100M\t*\t0\t0\t" + SEQ + "\t" + QUAL,
                                    "r5\t0\tchr2\t5000\t0\t100M\t*\t0\t0\t" + SEQ + "\t" + QUAL + "\tNM:i:0")
    assert "NM:i:0" in text
    for tag, ties in (("NM:i:0", 1), ("NM:i:1", 0)):
        p = tmp / f"t{ties}.sam"
        p.write_text(text.replace("NM:i:0", tag))
        r = score.score_sam(score.load_truth(truth_path), str(p))
        assert r["ties"] == ties and r["optimal"] == pytest.approx((5 + ties) / 10)
    assert "| ties |" in score.summary_table([r])


def test_mapq_table(files):
    truth_path, sam, _ = files
    r = score.score_sam(score.load_truth(truth_path), sam)
    table = {row["q"]: row for row in r["mapq_table"]}
    assert [row["q"] for row in r["mapq_table"]] == [60, 30, 20, 10, 1, 0]
    # MAPQs: r1 60 ok, r4 60 wrong, r10 60 ok, r8 40 ok, r2 30 ok, r3 25 wrong, r9 20 ok, r5 0 wrong
    assert (table[60]["mapped"], table[60]["wrong"]) == (3, 1)
    assert (table[30]["mapped"], table[30]["wrong"]) == (5, 1)
    assert (table[20]["mapped"], table[20]["wrong"]) == (7, 2)
    assert (table[10]["mapped"], table[10]["wrong"]) == (7, 2)
    assert (table[1]["mapped"], table[1]["wrong"]) == (7, 2)
    assert (table[0]["mapped"], table[0]["wrong"]) == (8, 3)
    assert table[20]["wrong_rate"] == pytest.approx(2 / 7)
    assert table[0]["mapped_frac"] == pytest.approx(0.8)
    # curve: cumulative and monotone in the mapped fraction
    pts = score.curve(r)
    assert [p[2] for p in pts] == [60, 40, 30, 25, 20, 0]
    assert pts[-1][0] == pytest.approx(0.8) and pts[-1][1] == pytest.approx(3 / 8)
    lines = score.mapeval_text(r).splitlines()
    assert lines[0] == "Q\t60\t3\t1\t3\t1\t0.333333" and lines[-1] == "U\t2"


def test_tolerance_and_strand(files):
    truth_path, sam, _ = files
    truth = score.load_truth(truth_path)
    assert score.score_sam(truth, sam, tolerance=15)["correct"] == 6  # r3 (+15) now counts
    assert score.score_sam(truth, sam, tolerance=6)["correct"] == 4  # r2 (+7) no longer
    t = ("chr1", 100, "+", 0)
    assert score.is_correct(t, "chr1", 110, 110, "+", 10)
    assert not score.is_correct(t, "chr1", 111, 111, "+", 10)
    assert score.is_correct(t, "chr1", 90, 90, "+", 10)
    assert not score.is_correct(t, "chr1", 100, 100, "-", 10)
    assert not score.is_correct(t, "chr2", 100, 100, "+", 10)
    assert score.is_correct(t, "chr1", 130, 100, "+", 10)  # clipped start, unclipped matches
    assert not score.is_correct(("*", 0, "*", -1), "chr1", 100, 100, "+", 10)


def test_truth_from_sam_and_mate_suffix(tmp_path):
    sam = tmp_path / "truth.sam"
    sam.write_text(HEADER + sam_line("a/1", 16, "chr2", 77, 255, "100M").replace("\n", "\tNM:i:4\n")
                   + sam_line("b", 4))
    truth = score.load_truth(str(sam))
    assert truth == {"a": ("chr2", 77, "-", 4), "b": ("*", 0, "*", -1)}
    mason = simulate.mason_truth(str(sam))
    assert mason == truth


def test_missing_everything(tmp_path):
    truth = tmp_path / "t.tsv"
    simulate.write_truth(str(truth), TRUTH)
    sam = tmp_path / "empty.sam"
    sam.write_text(HEADER)
    r = score.score_sam(score.load_truth(str(truth)), str(sam))
    assert r["missing"] == 10 and r["mapped"] == 0 and r["sensitivity"] == 0 and r["precision"] == 0


def test_reports(files):
    truth_path, sam, tmp = files
    md, js, png = tmp / "o.md", tmp / "o.json", tmp / "o.png"
    rc = score.main(["--truth", truth_path, f"mine={sam}", "--md", str(md), "--json", str(js), "--plot", str(png)])
    assert rc == 0
    text = md.read_text()
    assert "| mine | 10 | 8 | 5 | 3 | 0 | 1 | 50.00 | 50.000 | 62.500 | 2 |" in text
    assert "1 missing, 1 dup, 1 unknown" in text
    data = json.loads(js.read_text())
    assert data[0]["correct"] == 5
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert score.main(["--truth", truth_path, sam, "--strict"]) == 1


def test_bam_input(files):
    truth_path, sam, tmp = files
    bam = tmp / "m.bam"
    with pysam.AlignmentFile(sam) as fin, pysam.AlignmentFile(str(bam), "wb", template=fin) as fout:
        for rec in fin:
            fout.write(rec)
    r = score.score_sam(score.load_truth(truth_path), str(bam))
    assert (r["correct"], r["wrong"], r["unmapped"], r["missing"]) == (5, 3, 1, 1)


TIME_V = """\tCommand being timed: "bwa mem -t 2 ref.fa reads.fq"
\tUser time (seconds): 11.52
\tSystem time (seconds): 0.48
\tPercent of CPU this job got: 189%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:06.35
\tAverage shared text size (kbytes): 0
\tMaximum resident set size (kbytes): 181234
\tExit status: 0
"""


def test_time_v_parser():
    r = bench.parse_time_v(TIME_V)
    assert r["wall_s"] == pytest.approx(6.35)
    assert r["user_s"] == pytest.approx(11.52) and r["sys_s"] == pytest.approx(0.48)
    assert r["cpu_s"] == pytest.approx(12.0)
    assert r["max_rss_kb"] == 181234 and r["exit_status"] == 0 and r["cpu_percent"] == 189
    long = TIME_V.replace("0:06.35", "1:02:03").replace("Exit status: 0", "Exit status: 1")
    long = "Command exited with non-zero status 1\n" + long
    r = bench.parse_time_v(long)
    assert r["wall_s"] == pytest.approx(3723) and r["exit_status"] == 1
    r = bench.parse_time_v("Command terminated by signal 9\n" + TIME_V.replace("0:06.35", "2:05.50"))
    assert r["signal"] == 9 and r["wall_s"] == pytest.approx(125.5)
    assert bench.parse_time_v("")["wall_s"] is None


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="GNU time absent")
def test_timed_real(tmp_path):
    out = tmp_path / "o.txt"
    r = bench.timed([sys.executable, "-c", "print('hi')"], stdout_path=str(out), log_path=str(tmp_path / "l"))
    assert r["ok"] and out.read_text() == "hi\n"
    assert r["max_rss_kb"] > 1000 and r["wall_s"] >= 0
    r = bench.timed([sys.executable, "-c", "import sys; sys.exit(3)"], log_path=str(tmp_path / "l2"))
    assert not r["ok"] and r["returncode"] == 3 and r["exit_status"] == 3


def test_summarise_runs_median():
    runs = [dict(ok=True, wall_s=w, cpu_s=2 * w, max_rss_kb=1024 * m, cmd="x") for w, m in ((3, 10), (1, 30), (2, 20))]
    s = bench.summarise_runs(runs)
    assert s["wall_s"] == 2 and s["cpu_s"] == 4 and s["peak_rss_mib"] == 30 and s["rss_mib"] == 20
    assert not bench.summarise_runs(runs + [dict(ok=False, returncode=1, log="l")])["ok"]


def test_dwgsim_name():
    name = "gi|9626243|ref|NC_001416.1|_16651_1_1_0_0_0_2:1:0_0:0:0_1f/1"
    assert simulate.parse_dwgsim_name(name) == (name[:-2], "gi|9626243|ref|NC_001416.1|", 16651, "-", 3)
    assert simulate.parse_dwgsim_name("chr_1_5_9_0_1_0_0_0:0:0_0:0:0_a")[1:] == ("chr_1", 5, "+", 0)
    assert simulate.parse_dwgsim_name("c_5_9_0_1_1_0_0:0:0_0:0:0_a")[1] == "*"


def test_prepare_reference_and_inject(tmp_path):
    src = tmp_path / "r.fa"
    src.write_text(">c1 some description\nACGTACGTAC\nACG\n\n>c2\nAAAA\n")
    dst = tmp_path / "out.fa"
    assert simulate.prepare_reference(str(src), str(dst), width=4) == [("c1", 13), ("c2", 4)]
    assert dst.read_text() == ">c1\nACGT\nACGT\nACAC\nG\n>c2\nAAAA\n"
    rng = random.Random(1)
    s, q, run = simulate.inject_n("ACGT" * 25, "I" * 100, rng, 5)
    assert 1 <= run <= 5 and s.count("N") == run and q.count("#") == run and "N" * run in s


def test_rabema_report_parser():
    text = ("Intervals to find:              11197\nIntervals found:                11190\n"
            "Intervals found [%]             99.9375\nInvalid alignments:             3\n"
            "Additional Hits:                0\n\nNumber of reads:                9999\n"
            "Number of reads with intervals: 9999\n\nMapped reads:                   9998\n"
            "Mapped reads [% of total]:      99.99\nMapped reads [% of mappable]:   99.99\n\n"
            "Normalized intervals found:     9997.5\nNormalized intervals found [%]: 99.985\n")
    r = rabema.parse_rabema_report(text)
    assert r["intervals_to_find"] == 11197 and r["intervals_found_pct"] == pytest.approx(99.9375)
    assert r["normalized_found_pct"] == pytest.approx(99.985) and r["additional"] == 0 and r["invalid"] == 3
    assert r["mapped_pct_mappable"] == pytest.approx(99.99)


def test_rabema_missed_intervals_and_variants():
    text = ("....MISSED\tsimulated.38941\t3\tK-12\tF\t4410\t4412\n"
            "MISSED\tsimulated.7\t0\tchr 1\tR\t99\t101\n..done\n")
    assert rabema.parse_missed(text) == [("simulated.38941", "3", "K-12", "F", "4410", "4412")]
    label, env, args = rabema.parse_variant("full=PYMAP_X=1 --filter none --seeder-opt step=2")
    assert (label, env, args) == ("full", {"PYMAP_X": "1"}, ["--filter", "none", "--seeder-opt", "step=2"])
    with pytest.raises(ValueError, match="LABEL=ARGS"):
        rabema.parse_variant("no label here")
    assert rabema.max_errors(3, 150) == 4 and rabema.max_errors(5, 100) == 5
    cmd, _ = rabema.mapper_command("pymap", 3, "r.fa", "q.fq", "o.sam", "2", read_len=150)
    assert cmd[cmd.index("-e") + 1] == "4"


def _random_ref(path, n=20000, seed=3):
    rng = random.Random(seed)
    seq = "".join(rng.choice("ACGT") for _ in range(n))
    with open(path, "w") as fh:
        fh.write(">rnd\n" + "\n".join(seq[i:i + 60] for i in range(0, n, 60)) + "\n")


@pytest.mark.skipif(not (os.access("/usr/lib/seqan/bin/mason_simulator", os.X_OK) or shutil.which("mason_simulator")),
                    reason="mason_simulator absent")
def test_simulate_mason_roundtrip(tmp_path):
    ref = tmp_path / "ref.fa"
    _random_ref(str(ref))
    info = simulate.simulate(str(ref), str(tmp_path / "sim"), length=100, profile="high", n_reads=300, seed=5,
                             inject_n_frac=0.2)
    truth = score.load_truth(info["truth"])
    assert len(truth) == 300 and info["reads_with_n"] > 20
    assert all(t[0] == "rnd" and t[2] in "+-" for t in truth.values())
    # the Mason truth SAM itself scores as 100 % correct against the TSV
    r = score.score_sam(truth, info["simulator_truth"])
    assert r["correct"] == 300 and score.violations_total(r) == 0
    if shutil.which("bwa"):
        subprocess.run(["bwa", "index", info["ref_fa"]], check=True, capture_output=True)
        sam = tmp_path / "bwa.sam"
        with open(sam, "w") as fh:
            subprocess.run(["bwa", "mem", info["ref_fa"], info["reads"]], stdout=fh, stderr=subprocess.DEVNULL,
                           check=True)
        r = score.score_sam(truth, str(sam))
        assert r["sensitivity"] > 0.95 and score.violations_total(r) == 0


@pytest.mark.skipif(not shutil.which("dwgsim"), reason="dwgsim absent")
def test_simulate_dwgsim(tmp_path):
    ref = tmp_path / "ref.fa"
    _random_ref(str(ref))
    info = simulate.simulate(str(ref), str(tmp_path / "sim"), length=150, n_reads=200, seed=5, simulator="dwgsim")
    truth = score.load_truth(info["truth"])
    assert len(truth) == 200 and all(t[0] == "rnd" for t in truth.values())
    with open(info["reads"]) as fh:
        first = fh.readline().strip()[1:]
    assert first in truth and not first.endswith("/1")


def test_first_calls_times_every_kernel_load(tmp_path):
    """scripts/first_calls.py runs a pymap command and reports the kernels' first calls, each once a
    thread, with the command's own output and exit status."""
    root = os.path.dirname(SCRIPTS)
    shutil.copy(os.path.join(root, "examples", "lambda.fa"), tmp_path / "lambda.fa")
    out = tmp_path / "out.sam"
    res = subprocess.run([sys.executable, os.path.join(SCRIPTS, "first_calls.py"), "align", str(tmp_path / "lambda.fa"),
                          os.path.join(root, "examples", "reads.fq.gz"), "-o", str(out), "-t", "2", "--top", "3"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = [line for line in res.stderr.splitlines() if line.startswith("[first_calls]")]
    assert len(summary) == 1 and int(summary[0].split()[1]) > 5, res.stderr[-2000:]
    listed = [line for line in res.stderr.splitlines() if " ms  ended at " in line]
    assert len(listed) == 3 and all(" pymap." in line for line in listed)
    assert "2000 reads; 2000 mapped" in res.stderr and out.read_text().count("\n") > 2000


def test_bench_gpu_pipeline_rows_runs_and_timeline(tmp_path):
    """scripts/bench_gpu_pipeline.py (here on the CPU): a row per batches-side-by-side setting with its
    CPU, system and page-fault columns, a line per run with its lock probe, each row's timeline, and the
    records compared."""
    root = os.path.dirname(SCRIPTS)
    shutil.copy(os.path.join(root, "examples", "lambda.fa"), tmp_path / "lambda.fa")
    res = subprocess.run([sys.executable, os.path.join(SCRIPTS, "bench_gpu_pipeline.py"), str(tmp_path / "lambda.fa"),
                          os.path.join(root, "examples", "reads.fq.gz"), "-t", "2", "--devices", "cpu", "--repeats", "2",
                          "--batches", "1,2", "--batch-size", "500", "--timeline", "--workdir", str(tmp_path),
                          "--gil-probe"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert sum(line.startswith("# cpu, ") and ", run " in line for line in lines) == 4
    assert any(line.startswith("# idle process, lock wait after a 1 ms sleep: mean") for line in lines)
    assert sum(", run " in line and "; lock wait after a 1 ms sleep: mean" in line for line in lines) == 4
    assert sum(line.startswith("## timeline, cpu") for line in lines) == 2
    header = next(line for line in lines if line.startswith("| device |"))
    assert "| system s | minor faults |" in header
    rows = [line for line in lines if line.startswith("| cpu, ")]
    assert len(rows) == 2 and all("| 2000 |" in row for row in rows)
    assert "records identical: True" in lines


@pytest.mark.parametrize("batch_size", [None, 700])
def test_bench_host_ceiling_pymap_stage_table(tmp_path, batch_size):
    """scripts/bench_host_ceiling.py on pymap work: the efficiency row per process count and a table of
    each stage's seconds alone and together, with pymap's batch size or a given one."""
    root = os.path.dirname(SCRIPTS)
    shutil.copy(os.path.join(root, "examples", "lambda.fa"), tmp_path / "lambda.fa")
    with gzip.open(os.path.join(root, "examples", "reads.fq.gz"), "rt") as fh:
        (tmp_path / "r.fq").write_text("".join(next(fh) for _ in range(4 * 1500)))
    args = [sys.executable, os.path.join(SCRIPTS, "bench_host_ceiling.py"), "--procs", "1,2", "--work", "pymap",
            "--repeats", "1", "--ref", str(tmp_path / "lambda.fa"), "--reads", str(tmp_path / "r.fq")]
    res = subprocess.run(args + (["--batch-size", str(batch_size)] if batch_size else []),
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = res.stdout.splitlines()
    assert sum(line.startswith("| pymap | ") for line in lines) == 2
    assert f"batch size {batch_size or 'default'}" in res.stdout
    header = next(line for line in lines if line.startswith("| processes | "))
    assert all(stage in header for stage in ("seed", "filter", "extend", "select", "sam"))
    rows = [line for line in lines if line.startswith("| 1 | ") or line.startswith("| 2 | ")]
    assert len(rows) == 2


def test_bench_file_writes_table_and_its_check(tmp_path):
    """scripts/bench_file_writes.py: a row per process count with every mode's rate; each writer's
    stretch is checked, so a writer that wrote elsewhere fails the run."""
    wb = _load("bench_file_writes")
    args = [sys.executable, os.path.join(SCRIPTS, "bench_file_writes.py"), "--dir", str(tmp_path),
            "--procs", "1", "3", "--mib", "9"]
    res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split(" | ") for line in res.stdout.splitlines() if line.startswith(("| 1 |", "| 3 |"))]
    assert len(rows) == 2 and all(len(row) == 1 + len(wb.MODES) for row in rows)
    assert "copies" in rows[1][wb.MODES.index("mapped") + 1]
    assert os.listdir(tmp_path) == []
    path = str(tmp_path / "f")
    with open(path, "wb") as fh:
        fh.write(b"\x01" * 4096 + bytes(4096))      # process 0's stretch right, process 1's not written
    with pytest.raises(SystemExit, match="process 1's stretch"):
        wb._check("pwrite", 2, 4096, path)


def test_spy_summary_through_and_busy(tmp_path, capsys):
    """scripts/spy_summary.py: --through counts the samples through each named frame; --busy leaves out
    a thread waiting for a lock."""
    spy = _load("spy_summary")
    raw = tmp_path / "spy.txt"
    raw.write_text(
        "serve (pymap/processes.py:94);Pipeline.reselect (pymap/pipeline.py:377);0x7f00 (?) 3\n"
        "serve (pymap/processes.py:94);read_span (pymap/reads.py:156);read (libc.so.6) 1\n"
        "serve (pymap/processes.py:94);Pipeline.write (pymap/pipeline.py:500);pthread_cond_wait (libc.so.6) 4\n")
    argv = sys.argv
    sys.argv = ["spy_summary.py", str(raw), "--busy", "--through", "Pipeline.reselect", "read_span",
                "Pipeline.write"]
    try:
        spy.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out.splitlines()
    assert out[:5] == ["4 samples", "## through", "      3  75.0%  Pipeline.reselect",
                       "      1  25.0%  read_span", "      0   0.0%  Pipeline.write"]


def test_spy_summary_callers(tmp_path, capsys):
    """scripts/spy_summary.py --callers: the innermost pymap frames of the samples whose innermost frame
    is the named native function, most first; a name no sample ends in gets an empty section."""
    spy = _load("spy_summary")
    raw = tmp_path / "spy.txt"
    raw.write_text(
        "serve (pymap/processes.py:94);CandidateBatch.take (pymap/batch.py:147);mapiter_trivial_get (numpy.so) 5\n"
        "serve (pymap/processes.py:94);Pipeline.hits (pymap/pipeline.py:292);mapiter_trivial_get (numpy.so) 2\n"
        "serve (pymap/processes.py:94);CandidateBatch.take (pymap/batch.py:147);LONG_add (numpy.so) 3\n")
    argv = sys.argv
    sys.argv = ["spy_summary.py", str(raw), "--callers", "mapiter_trivial_get", "pwrite64"]
    try:
        spy.main()
    finally:
        sys.argv = argv
    out = capsys.readouterr().out.splitlines()
    at = out.index("## callers of mapiter_trivial_get (7 samples)")
    assert out[at + 1:at + 4] == ["      5  50.0%  CandidateBatch.take (pymap/batch.py:147)",
                                  "      2  20.0%  Pipeline.hits (pymap/pipeline.py:292)",
                                  "## callers of pwrite64 (0 samples)"]
    assert out[-1] == "## callers of pwrite64 (0 samples)"
