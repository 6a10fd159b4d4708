"""The command line: one-line errors with the right exit status, no tracebacks, nothing lost."""
import gzip
import os
import shutil
import signal
import subprocess
import sys
import time

import pysam
import pytest

from pymap import cli

EX_REF = "examples/lambda.fa"
EX_READS = "examples/reads.fq.gz"


def pymap(*args, stdin=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "pymap.cli", *map(str, args)], capture_output=True,
                          input=stdin, timeout=timeout)


def assert_error(res, code, *words):
    err = res.stderr.decode()
    lines = [l for l in err.splitlines() if not l.startswith("[pymap]")]
    assert res.returncode == code, err
    assert len(lines) == 1 and lines[0].startswith("pymap: error:"), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], err


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    path = d / "lambda.fa"
    shutil.copy(EX_REF, path)
    return path


def test_version_and_help():
    assert pymap("--version").stdout.decode().startswith("pymap ")
    for cmd in ("index", "align", "filter", "candidates", "plugins"):
        res = pymap(cmd, "--help")
        assert res.returncode == 0 and b"usage" in res.stdout


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="counts threads in /proc")
def test_the_command_starts_no_blas_threads():
    """The command loads NumPy's BLAS with one thread (an idle OpenBLAS pool spins at every start):
    importing it, then NumPy, leaves as many threads as NumPy alone with OPENBLAS_NUM_THREADS=1; a
    user's own setting is left alone."""
    def probe(code, **env):
        base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        code += ("; print(os.environ.get('OPENBLAS_NUM_THREADS'), "
                 "[ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('Threads:')][0])")
        out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, check=True)
        return out.stdout.split()
    one_thread = probe("import os, numpy", OPENBLAS_NUM_THREADS="1")
    assert probe("import os, pymap.cli, numpy") == one_thread
    assert probe("import os, pymap.cli, numpy", OPENBLAS_NUM_THREADS="2")[0] == b"2"


@pytest.mark.parametrize("args,words", [
    (["-e", "-1"], ["max-edits", ">= 0"]),
    (["-e", "abc"], ["max-edits"]),
    (["-e", "2.5"], ["max-edits", "whole"]),
    (["-t", "-3"], ["threads"]),
    (["-N", "0"], ["max-hits"]),
    (["--filter", "nosuch"], ["unknown filter", "nosuch"]),
    (["--seeder", "nosuch"], ["unknown seeder"]),
    (["--extender", "nosuch"], ["unknown extender"]),
    (["--filter-opt", "bogus"], ["key=value"]),
    (["-R", "ID:x"], ["read group"]),
    (["-R", "@RG\\tID:x\nSM:y"], ["read group"]),
    (["-R", "@RG\\tID:x\\tSM:b\\n@RG\\tID:c"], ["one read group"]),
    (["-R", "@RG\\tID:a\\tSM:b\\tID:c"], ["field ID given more than once"]),
    (["-R", "@RG\\tID:a\\tXX:zz"], ["'XX' is not a read group field"]),
    (["--batch-size", "0"], ["batch-size"]),
    (["--batches", "0"], ["batches", "1..64"]),
    (["--filter-slack", "-1"], ["filter-slack", ">= 0"]),
    (["--seeder-opt", "lossless=maybe"], ["lossless"]),
])
def test_bad_options(ref, args, words):
    assert_error(pymap("align", ref, EX_READS, *args), 2, *words)


def test_read_group_with_real_tabs(ref, tmp_path):
    """-R given with real tabs rather than \\t: the same @RG, and the @PG command line escapes them."""
    res = pymap("align", ref, EX_READS, "-R", "@RG\tID:x\tSM:y", "-o", tmp_path / "o.sam")
    assert res.returncode == 0, res.stderr
    header = pysam.AlignmentFile(str(tmp_path / "o.sam")).header.to_dict()
    assert header["RG"] == [{"ID": "x", "SM": "y"}]
    assert len(header["PG"]) == 1
    assert header["PG"][0]["CL"].endswith("-R '@RG\\tID:x\\tSM:y' -o " + str(tmp_path / "o.sam"))


def test_seeder_options_leave_the_default_index_alone(tmp_path):
    """Seeder options that change the index give it a file of its own (REF.pymap.<crc>.idx), built
    by `pymap index` or the first run with them and loaded by the next; REF.pymap.idx stays that of
    runs without them."""
    ref = tmp_path / "lambda.fa"
    shutil.copy(EX_REF, ref)
    idx = tmp_path / "lambda.fa.pymap.idx"
    plain = pymap("align", ref, EX_READS)
    saved = idx.read_bytes()
    custom = pymap("align", ref, EX_READS, "--seeder-opt", "seed_len=13")
    assert custom.returncode == 0 and b"index saved to" in custom.stderr
    own = [p for p in os.listdir(tmp_path) if p.startswith("lambda.fa.pymap.") and p != idx.name]
    assert len(own) == 1 and own[0].endswith(".idx") and idx.read_bytes() == saved
    again = pymap("align", ref, EX_READS, "--seeder-opt", "seed_len=13")
    assert again.returncode == 0 and b"index built" not in again.stderr
    assert pymap("index", ref, "--seeder-opt", "seed_len=13").stderr.decode().rstrip().endswith(own[0])
    plain_again = pymap("align", ref, EX_READS)
    body = lambda out: [l for l in out.splitlines() if not l.startswith(b"@PG")]   # noqa: E731
    assert body(plain_again.stdout) == body(plain.stdout) and b"index built" not in plain_again.stderr
    assert body(again.stdout) == body(custom.stdout)


def test_index_threads_must_not_be_negative(ref, tmp_path):
    assert_error(pymap("index", ref, "-t", "-1", "-o", tmp_path / "x.idx"), 2, "threads")


def test_index_to_a_path_it_cannot_write(ref, tmp_path):
    assert_error(pymap("index", ref, "-o", tmp_path / "nowhere" / "x.idx"), 2, "cannot write", "no such directory")
    assert_error(pymap("index", ref, "-o", tmp_path), 2, "cannot write", "a directory")
    if os.path.exists("/dev/full"):             # a device is not replaced by the index renamed over it
        assert_error(pymap("index", ref, "-o", "/dev/full"), 2, "/dev/full: cannot write an index there")
        assert not os.path.isfile("/dev/full")


BAD_FILTERS = """
import numpy as np
from pymap.plugins import Filter


class Short(Filter):
    name = "short"

    def filter_pairs(self, reads, refs, max_edits):
        return np.ones(len(reads) - 1, bool), np.zeros(len(reads) - 1, np.int32)


class Boom(Filter):
    name = "boom"

    def filter_pairs(self, reads, refs, max_edits):
        raise RuntimeError("boom inside filter")


class Lists(Filter):
    'Accepts every pair; its answers are Python lists.'

    name = "lists"

    def filter_pairs(self, reads, refs, max_edits):
        return [True] * len(reads), [0] * len(reads)


class NoDoc(Lists):
    name = "nodoc"
"""


def _bad_filters_env(tmp_path):
    """The environment of a pymap that finds the filters of BAD_FILTERS (and one whose module cannot
    be imported) installed from another package."""
    (tmp_path / "badfilters.py").write_text(BAD_FILTERS)
    (tmp_path / "badmissing.py").write_text("raise ImportError('needs libfoo')\n")
    info = tmp_path / "badfilters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: badfilters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[pymap.filters]\nshort = badfilters:Short\nboom = badfilters:Boom\n"
                                           "lists = badfilters:Lists\nnodoc = badfilters:NoDoc\n"
                                           "missing = badmissing:X\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize("name, words", [("short", ["error: filter 'short' returned", "decisions"]),
                                         ("boom", ["error: the filter plugin 'boom' failed", "boom inside",
                                                   "plugin's authors"])])
def test_a_broken_plugin_is_named(ref, tmp_path, name, words):
    """A filter from another package that breaks its contract or raises: the one error line names it,
    not pymap (exit status 3)."""
    env = _bad_filters_env(tmp_path)
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", str(ref), EX_READS, "--filter", name, "-o",
                          str(tmp_path / "o.sam")], capture_output=True, env=env, timeout=300)
    err = res.stderr.decode()
    lines = [l for l in err.splitlines() if not l.startswith("[pymap]")]
    assert res.returncode == 3 and len(lines) == 1 and "internal error" not in err, err
    assert all(w in lines[0] for w in words), err
    assert not (tmp_path / "o.sam").exists()


def test_plugins_of_other_packages_as_they_come(ref, tmp_path):
    """A filter answering with Python lists maps (the allowance measurement included); one whose module
    cannot be imported is one error line naming it (exit 2) and `pymap plugins` lists it as such; one
    without a docstring is listed."""
    env = _bad_filters_env(tmp_path)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "pymap.cli", *map(str, args)], capture_output=True, text=True,
                              env=env, timeout=300)
    res = run("align", ref, EX_READS, "--filter", "lists", "-o", tmp_path / "o.sam")
    assert res.returncode == 0 and (tmp_path / "o.sam").exists(), res.stderr
    res = run("align", ref, EX_READS, "--filter", "missing", "-o", tmp_path / "m.sam")
    lines = [line for line in res.stderr.splitlines() if not line.startswith("[pymap]")]
    assert res.returncode == 2 and len(lines) == 1 and "internal error" not in res.stderr, res.stderr
    assert "filter plugin 'missing' cannot be loaded" in lines[0] and "needs libfoo" in lines[0]
    res = run("plugins")
    listed = {line.split()[0]: line for line in res.stdout.splitlines() if line.startswith("  ")}
    assert res.returncode == 0 and "cannot load" not in listed["nodoc"] and "needs libfoo" in listed["missing"]


def test_bwa_xa_option_is_refused(ref, tmp_path):
    """bwa mem's -h INT[,INT] is refused (argparse took it for -h: help on stdout, exit 0); -h alone is help."""
    assert_error(pymap("align", ref, EX_READS, "-h", "5,200", "-o", tmp_path / "o.sam"), 2, "-h 5,200", "-N")
    assert not (tmp_path / "o.sam").exists()
    res = pymap("align", "-h")
    assert res.returncode == 0 and b"usage: pymap align" in res.stdout


def test_bwa_scoring_pairs_and_minus_y(ref, tmp_path):
    """bwa mem's -O/-E deletion,insertion pairs are taken when equal (pymap scores both gaps alike),
    refused otherwise; -Y (soft-clipped supplementary alignments, pymap's only way) is taken."""
    plain = pymap("align", ref, EX_READS, "-O", "7", "-E", "2")
    paired = pymap("align", ref, EX_READS, "-O", "7,7", "-E", "2,2", "-Y")
    body = lambda out: [l for l in out.splitlines() if not l.startswith(b"@PG")]   # noqa: E731
    assert plain.returncode == paired.returncode == 0 and body(paired.stdout) == body(plain.stdout)
    assert_error(pymap("align", ref, EX_READS, "-O", "6,5"), 2, "-O", "alike")
    assert cli._gap_penalty("7,7") == cli._gap_penalty("7") == 7     # the pair is the one penalty


def test_bwa_minus_c_appends_header_comments(ref, tmp_path):
    """-C (bwa mem's) appends each read's header comment, SAM tags, to its records (blanks between
    tags written as tabs, spaces inside a Z value kept; pairs, FASTA and processes alike); without
    -C comments are ignored; a comment that is not SAM tags (Casava's 1:N:0:...), or repeats a tag
    pymap writes (NM), is one error line and no output."""
    with pysam.FastaFile(str(ref)) as fa:
        seq = fa.fetch(fa.references[0])
    rc = seq[5300:5400][::-1].translate(str.maketrans("ACGT", "TGCA"))
    (tmp_path / "r1.fq").write_text(f"@p1/1 BC:Z:ACGTAC\tRX:Z:GGAT\n{seq[5000:5100]}\n+\n{'I' * 100}\n"
                                    f"@p2/1\n{seq[7000:7100]}\n+\n{'I' * 100}\n")
    (tmp_path / "r2.fq").write_text(f"@p1/2 BC:Z:ACGTAC  RX:Z:GGAT XN:i:-3\n{rc}\n+\n{'I' * 100}\n"
                                    f"@p2/2 XA:A:q CO:Z:two  words \n{rc}\n+\n{'I' * 100}\n")
    for extra in ([], ["--processes", "2"]):
        res = pymap("align", ref, tmp_path / "r1.fq", tmp_path / "r2.fq", "-C", *extra, "-o", tmp_path / "c.sam")
        assert res.returncode == 0, res.stderr.decode()
        with pysam.AlignmentFile(str(tmp_path / "c.sam")) as sam:
            tags = [(r.query_name, r.is_read1, sorted(t for t, _ in r.get_tags() if t in ("BC", "RX", "XN", "XA")))
                    for r in sam]
        assert tags == [("p1", True, ["BC", "RX"]), ("p1", False, ["BC", "RX", "XN"]), ("p2", True, []),
                        ("p2", False, ["XA"])]
    line = [x for x in open(tmp_path / "c.sam") if x.startswith("p1\t")][1]
    assert line.rstrip("\n").endswith("\tBC:Z:ACGTAC\tRX:Z:GGAT\tXN:i:-3")
    line = [x for x in open(tmp_path / "c.sam") if x.startswith("p2\t")][1]
    assert line.rstrip("\n").endswith("\tXA:A:q\tCO:Z:two  words")     # a Z value keeps its spaces
    plain = pymap("align", ref, tmp_path / "r1.fq", tmp_path / "r2.fq")
    assert plain.returncode == 0 and b"BC:Z" not in plain.stdout
    (tmp_path / "f.fa").write_text(f">f1 CB:Z:AAAC\n{seq[100:200]}\n")
    res = pymap("align", ref, tmp_path / "f.fa", "-C")
    assert res.returncode == 0 and res.stdout.splitlines()[-1].endswith(b"\tCB:Z:AAAC")
    (tmp_path / "cas.fq").write_text(f"@c1 1:N:0:ATCACG\n{seq[100:200]}\n+\n{'I' * 100}\n")
    assert pymap("align", ref, tmp_path / "cas.fq").returncode == 0
    assert_error(pymap("align", ref, tmp_path / "cas.fq", "-C", "-o", tmp_path / "cas.sam"), 1, "c1",
                 "1:N:0:ATCACG", "not a SAM tag")
    assert not (tmp_path / "cas.sam").exists()
    (tmp_path / "own.fq").write_text(f"@o1 BC:Z:AC NM:i:7\n{seq[100:200]}\n+\n{'I' * 100}\n")
    assert_error(pymap("align", ref, tmp_path / "own.fq", "-C", "-o", tmp_path / "own.bam"), 1, "o1",
                 "'NM:i:7' is a tag pymap writes itself")
    assert not (tmp_path / "own.bam").exists()
    (tmp_path / "zs.fq").write_text(f"@z1 CO:Z:two words NM:i:7\n{seq[100:200]}\n+\n{'I' * 100}\n")
    assert_error(pymap("align", ref, tmp_path / "zs.fq", "-C"), 1, "z1", "'NM:i:7' is a tag pymap writes itself")


def test_candidates_writes_the_seeding_pairs(ref, tmp_path):
    """`pymap candidates`: a line per candidate, read and reference segment of one length, as many as
    it says; the options of later stages are not its own."""
    res = pymap("candidates", ref, EX_READS, "-o", tmp_path / "c.txt")
    assert res.returncode == 0, res.stderr
    lines = (tmp_path / "c.txt").read_text().splitlines()
    said = int(res.stderr.decode().split(" candidate pairs")[0].split()[-1])
    assert said == len(lines) >= 2000
    assert all(len(read) == len(seg) and set(read + seg) <= set("ACGTN") for read, seg in
               (line.split("\t") for line in lines))
    assert_error(pymap("candidates", ref, EX_READS, "--filter", "edlib"), 2, "unrecognized", "--filter")


def test_missing_files(ref, tmp_path):
    assert_error(pymap("align", tmp_path / "nope.fa", EX_READS), 1, "no such file")
    assert_error(pymap("align", ref, tmp_path / "nope.fq"), 1, "no such file")
    assert_error(pymap("index", tmp_path / "nope.fa"), 1, "no such file")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_disk_is_one_error_line(ref, tmp_path):
    """An output that cannot be written (a full disk) is the user's to fix, not an internal error;
    also where the output is small enough to stay in the file's buffer until it is closed."""
    assert_error(pymap("align", ref, EX_READS, "-o", "/dev/full"), 1, "/dev/full: cannot write (No space left")
    tiny = tmp_path / "tiny.fa"
    tiny.write_text(">a\nACGTACGTACGTACGTACGTACGTA\n")
    assert_error(pymap("count", "-k", "21", tiny, "-o", "/dev/full"), 1, "/dev/full: cannot write (No space left")
    with open("/dev/full", "wb") as full:
        res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", str(ref), EX_READS], stdout=full,
                             stderr=subprocess.PIPE, timeout=300)
    assert_error(res, 1, "stdout: cannot write (No space left")
    assert_error(pymap("count", "-k", "21", ref, "-o", "/dev/full"), 1, "/dev/full: cannot write (No space left")
    with open("/dev/full", "wb") as full:
        res = subprocess.run([sys.executable, "-m", "pymap.cli", "count", "-k", "21", str(ref)], stdout=full,
                             stderr=subprocess.PIPE, timeout=300)
    assert_error(res, 1, "stdout: cannot write (No space left")


@pytest.mark.parametrize("content,words", [
    (b"@r1\nACGT\n+\nIII\n", ["lengths differ"]),
    (b"@r1\nACGTACGTACGTACGTACGT\n+\nIIIIIIIIIIIIIIIIIIII\n@r2\nACG", ["truncated"]),
    (b"\x89PNG\x00\x00garbage" * 50, ["binary"]),
])
def test_bad_reads(ref, tmp_path, content, words):
    p = tmp_path / "bad.fq"
    p.write_bytes(content)
    assert_error(pymap("align", ref, p), 1, *words)


def test_corrupt_gzip_reads(ref, tmp_path):
    p = tmp_path / "bad.fq.gz"
    data = gzip.compress(open("examples/reads.fq.gz", "rb").read())
    p.write_bytes(data[:20] + b"\x00" * 50 + data[70:])
    assert_error(pymap("align", ref, p), 1, "gzip")


def test_bad_reference(tmp_path):
    p = tmp_path / "bad.fa"
    p.write_bytes(b"ACGT\n")
    assert_error(pymap("align", p, EX_READS), 1, "FASTA")
    p.write_bytes(b">a\nACGT\n>a\nACGT\n")
    assert_error(pymap("index", p), 1, "duplicate")


def test_empty_reads_file(ref, tmp_path):
    p = tmp_path / "empty.fq"
    p.write_bytes(b"")
    res = pymap("align", ref, p)
    assert res.returncode == 0
    assert all(l.startswith(b"@") for l in res.stdout.splitlines())


def test_stdin_reads_and_summary(ref):
    data = gzip.decompress(open(EX_READS, "rb").read())
    res = pymap("align", ref, "-", stdin=data)
    assert res.returncode == 0, res.stderr
    body = [l for l in res.stdout.splitlines() if not l.startswith(b"@")]
    assert len(body) == 2000
    assert b"2000 reads" in res.stderr


def test_index_from_other_reference(ref, tmp_path):
    other = tmp_path / "other.fa"
    other.write_text(">x\n" + "ACGTTGCAAC" * 500 + "\n")
    assert pymap("index", other).returncode == 0
    assert_error(pymap("align", ref, EX_READS, "--index", f"{other}.pymap.idx"), 1, "pymap index")
    # a stale default index next to the reference is rebuilt, never used
    shutil.copy(f"{other}.pymap.idx", f"{ref}.pymap.idx")
    res = pymap("align", ref, EX_READS)
    assert res.returncode == 0 and b"rebuilding" in res.stderr


def test_truncated_index(ref, tmp_path):
    assert pymap("index", ref, "-o", tmp_path / "i.idx").returncode == 0
    data = open(tmp_path / "i.idx", "rb").read()
    (tmp_path / "t.idx").write_bytes(data[: len(data) // 2])
    assert_error(pymap("align", ref, EX_READS, "--index", tmp_path / "t.idx"), 1, "pymap index")
    (tmp_path / "g.idx").write_bytes(os.urandom(5000))
    assert_error(pymap("align", ref, EX_READS, "--index", tmp_path / "g.idx"), 1)


def test_broken_pipe_is_quiet(ref):
    cmd = f"{sys.executable} -m pymap.cli align {ref} {EX_READS} | head -n 3"
    res = subprocess.run(cmd, shell=True, capture_output=True)
    assert len(res.stdout.splitlines()) == 3
    assert b"Traceback" not in res.stderr and b"error" not in res.stderr


def _default_sigint():
    """The child takes SIGINT as a terminal's Ctrl-C: a shell without job control starts background
    jobs (a CI run, say) with SIGINT ignored, and Python's children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, b"interrupted"),
                                             (signal.SIGTERM, 143, b"terminated")])
def test_interrupt_leaves_no_partial_index(tmp_path, sig, code, said):
    big = tmp_path / "big.fa"
    import numpy as np
    rng = np.random.default_rng(0)
    big.write_text(">big\n" + "".join(rng.choice(list("ACGT"), 3_000_000)) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "pymap.cli", "index", str(big)], stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)
    time.sleep(4)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    leftovers = [p for p in os.listdir(tmp_path) if p != "big.fa"]
    if proc.returncode == 0:  # finished before the signal: the index must then be whole
        assert leftovers == ["big.fa.pymap.idx"]
    else:
        assert proc.returncode == code and said in err and b"Traceback" not in err
        assert leftovers == []


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stopped_align_leaves_no_partial_output(ref, tmp_path, sig, code):
    """A run stopped while its sorted BAM is being written (reads still coming on stdin) removes its
    partial files: the output, its index and the sort's temporary."""
    out = tmp_path / "out" / "x.bam"
    out.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "pymap.cli", "align", str(ref), "-", "-o", str(out), "--sort",
                             "--no-progress", "--batch-size", "100"], stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)
    proc.stdin.write(open(EX_READS, "rb").read())
    proc.stdin.flush()
    deadline = time.time() + 120
    while not os.listdir(out.parent) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert os.listdir(out.parent), "no partial output appeared"
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.stdin.close()
    err = proc.stderr.read()
    rc = proc.wait(timeout=60)
    assert rc == code and b"Traceback" not in err, (rc, err)
    assert os.listdir(out.parent) == [], (rc, err)
