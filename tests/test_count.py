"""`pymap count` and its kernels: canonical m-mers, signature minimizers, super k-mers (CPU, and the
CUDA twins under the simulator), and the k-mer counts against a brute-force counter."""
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pymap import count as C
from pymap.cli import main
from pymap.kernels import kmer_count as KC
from pymap.kernels import minimizers as MZ
from pymap.kernels.encoding import ASCII_TO_CODE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMP = str.maketrans("ACGT", "TGCA")
RULES = ("none", "kmc2", "rapidgkc")


# --------------------------------------------------------------------------------------------------
# brute force, straight from the definitions

def rc(s):
    return s.translate(COMP)[::-1]


def brute_counts(seqs, k):
    out = collections.Counter()
    for s in seqs:
        s = s.upper()
        for i in range(len(s) - k + 1):
            x = s[i:i + k]
            if set(x) <= set("ACGT"):
                out[min(x, rc(x))] += 1
    return out


def value(s):
    v = 0
    for ch in s:
        v = 4 * v + "ACGT".index(ch)
    return v


def allowed(s, rule):
    if rule == "rapidgkc":
        return s[:3] not in ("AAA", "ACA", "CAA", "CCA") and s[-3:] != "AAA"
    if rule == "kmc2":
        return s[:3] not in ("AAA", "ACA") and "AA" not in s[1:]
    return True


def brute_sig(s, rule):
    m = len(s)
    cands = [value(x) for x in (s, rc(s)) if allowed(x, rule)]
    return min(cands) if cands else 4 ** m


def brute_minimizers(seqs, k, m, rule):
    """Per global position: (value, position) of the k-mer's minimizer or (-1, -1)."""
    vals, poss = [], []
    pos0 = 0
    for s in seqs:
        for i in range(len(s)):
            x = s[i:i + k]
            if len(x) < k or not set(x) <= set("ACGT"):
                vals.append(-1)
                poss.append(-1)
                continue
            best, bp = None, None
            for j in range(k - m + 1):
                v = brute_sig(x[j:j + m], rule)
                if best is None or v <= best:
                    best, bp = v, pos0 + i + j
            vals.append(best)
            poss.append(bp)
        pos0 += len(s)
    return np.array(vals, np.int64), np.array(poss, np.int64)


def brute_super_kmers(seqs, vals, max_kmers=0):
    starts, lens = [], []
    pos0 = 0
    for s in seqs:
        i = 0
        while i < len(s):
            if vals[pos0 + i] < 0:
                i += 1
                continue
            j = i + 1
            while j < len(s) and vals[pos0 + j] == vals[pos0 + i]:
                j += 1
            for a in range(i, j, max_kmers or j - i):
                starts.append(pos0 + a)
                lens.append(min(j, a + (max_kmers or j - i)) - a)
            i = j
        pos0 += len(s)
    return np.array(starts, np.int64), np.array(lens, np.int64)


def random_seqs(rng, n, lo, hi, n_rate=0.02, lower=0.1):
    """Upper- and lowercase bases, with N, n, R and space at n_rate in all (none of them counts)."""
    letters = np.array(list("ACGTacgtNnR "))
    p = np.array([(1 - lower) / 4] * 4 + [lower / 4] * 4 + [1.0] * 4)
    p[:8] *= 1 - n_rate
    p[8:] = n_rate / 4
    return ["".join(rng.choice(letters, size=int(rng.integers(lo, hi)), p=p / p.sum())) for _ in range(n)]


def as_csr(seqs):
    codes = ASCII_TO_CODE[np.frombuffer("".join(seqs).encode(), np.uint8)]
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    return codes, offsets


def write_fasta(path, seqs, width=13, gz=False):
    text = "".join(f">s{i} some words\n" + "".join(s[j:j + width] + "\n" for j in range(0, len(s), width))
                   for i, s in enumerate(seqs))
    op = gzip.open if gz else open
    with op(path, "wt") as fh:
        fh.write(text)
    return path


def write_fastq(path, seqs, gz=False, multiline=False):
    recs = []
    for i, s in enumerate(seqs):
        if multiline and len(s) > 10:
            body = s[:10] + "\n" + s[10:]
            qual = "I" * 7 + "\n" + "@" * (len(s) - 7)       # '@' opens a quality line
        else:
            body, qual = s, "I" * len(s)
        recs.append(f"@r{i}\n{body}\n+\n{qual}\n")
    op = gzip.open if gz else open
    with op(path, "wt") as fh:
        fh.write("".join(recs))
    return path


# --------------------------------------------------------------------------------------------------
# the minimizer kernels

@pytest.fixture(scope="module")
def small_seqs():
    rng = np.random.default_rng(7)
    seqs = ["".join(rng.choice(list("ACGTN"), p=[.24, .24, .24, .24, .04], size=int(n)))
            for n in rng.integers(0, 70, 25)]
    seqs[0] = "A" * 30 + "CCA" + "T" * 20 + "ACAACAACA" * 3          # low complexity
    return seqs


@pytest.mark.parametrize("rule", RULES)
def test_signature_rules(rule):
    rng = np.random.default_rng(1)
    for m in (3, 4, 7, 11):
        for _ in range(200):
            s = "".join(rng.choice(list("ACGT"), size=m))
            assert MZ.passes(value(s), m, rule) == allowed(s, rule), (s, rule)
    if rule == "rapidgkc":                               # the paper's examples
        for s, ok in (("AAATTCG", False), ("ACAGTTC", False), ("CAAGTCG", False), ("CCAGTCG", False),
                      ("GTCGAAA", False), ("AACTGCT", True), ("AGCTTCA", True)):
            assert MZ.passes(value(s), 7, rule) == ok, s


@pytest.mark.parametrize("rule", RULES)
def test_mmers_minimizers_super_kmers_vs_brute(small_seqs, rule):
    codes, offsets = as_csr(small_seqs)
    for k, m in ((9, 5), (12, 4), (7, 7), (21, 11)):
        if rule != "none" and m < 3:
            continue
        mm = MZ.canonical_mmers(codes, offsets, m, rule)
        exp = []
        for s in small_seqs:
            exp += [brute_sig(s[i:i + m], rule) if i + m <= len(s) and set(s[i:i + m]) <= set("ACGT") else -1
                    for i in range(len(s))]
        assert np.array_equal(mm, np.array(exp, np.int64)), (k, m)
        vals, poss = MZ.kmer_minimizers(codes, offsets, k, m, rule)
        bv, bp = brute_minimizers(small_seqs, k, m, rule)
        assert np.array_equal(vals, bv) and np.array_equal(poss, bp), (k, m)
        for cap in (0, 3):
            starts, n_kmers, mins = MZ.super_kmers(codes, offsets, k, m, rule, cap)
            es, el = brute_super_kmers(small_seqs, bv, cap)
            assert np.array_equal(starts, es) and np.array_equal(n_kmers, el), (k, m, cap)
            assert np.array_equal(mins, bv[es])
    # low complexity never wins under a signature rule: no chosen m-mer starts with AAA (either strand)
    vals, _ = MZ.kmer_minimizers(codes, offsets, 21, 11, rule)
    if rule != "none":
        v = vals[(vals >= 0) & (vals < 4 ** 11)]
        assert not np.any((v >> 16) == 0)                 # AAA... is never a signature


def test_partition_records_are_the_super_kmers(small_seqs):
    """The fused phase 1 kernel cuts the same super k-mers as minimizers.super_kmers (cut to 62-k)."""
    codes, offsets = as_csr(small_seqs * 3)
    for k, m, rule in ((9, 5, 2), (21, 11, 2), (31, 9, 1), (4, 2, 0)):
        recs, part_off, part_kmers = KC.partition_super_kmers(codes, offsets, 0, offsets.size - 1,
                                                              k, m, rule, 3)
        starts, n_kmers, mins = MZ.super_kmers(codes, offsets, k, m, rule, KC.max_record_kmers(k))
        exp = collections.Counter()
        for s, n, v in zip(starts.tolist(), n_kmers.tolist(), mins.tolist()):
            bases = "".join("ACGT"[c] for c in codes[s:s + n + k - 1])
            exp[(bases, int(MZ.partition_of_value(v, 3)))] += 1
        got = collections.Counter()
        for p in range(8):
            r = part_off[p]
            while r < part_off[p + 1]:                 # word 0: 29 bases and n - 1; word 1: 32 more
                w0 = int(recs[r])
                n = (w0 & 63) + 1
                length = n + k - 1
                bits = w0 >> 6
                if length > 29:
                    bits = (bits << 64) | int(recs[r + 1])
                nbits = 58 + (64 if length > 29 else 0)
                got[("".join("ACGT"[(bits >> (nbits - 2 - 2 * t)) & 3] for t in range(length)), p)] += 1
                r += 2 if length > 29 else 1
        assert got == exp, (k, m, rule)
        assert part_kmers.sum() == n_kmers.sum()


SIM_SCRIPT = textwrap.dedent(r'''
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from pymap.kernels import minimizers as MZ
    from pymap.kernels import minimizers_cuda as MC
    rng = np.random.default_rng(3)
    lens = rng.integers(0, 50, 12)
    offsets = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    codes = rng.choice(5, size=int(offsets[-1]), p=[.24, .24, .24, .24, .04]).astype(np.uint8)
    codes[:20] = 0
    out = {"checked": 0, "mismatch": []}
    for k, m, rule in [(21, 11, 2), (11, 5, 1), (5, 5, 0), (3, 1, 0)]:
        a = MZ.canonical_mmers(codes, offsets, m, rule)
        b = MC.canonical_mmers_cuda(codes, offsets, m, rule)
        v1, p1 = MZ.kmer_minimizers(codes, offsets, k, m, rule)
        v2, p2 = MC.kmer_minimizers_cuda(codes, offsets, k, m, rule)
        same = [np.array_equal(a, b), np.array_equal(v1, v2), np.array_equal(p1, p2)]
        for cap in (0, 2):
            s1 = MZ.super_kmers(codes, offsets, k, m, rule, cap)
            s2 = MC.super_kmers_cuda(codes, offsets, k, m, rule, cap)
            same += [np.array_equal(x, y) for x, y in zip(s1, s2)]
        out["checked"] += int(codes.size)
        if not all(same):
            out["mismatch"].append([k, m, rule, same])
    print(json.dumps(out))
''')


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_cuda_kernels_equal_the_cpu_ones(where):
    if where == "gpu":
        from pymap.kernels.cuda_support import cuda_available
        if not cuda_available():
            pytest.skip("no CUDA GPU here (the simulator variant runs instead)")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if where == "simulator" else "0")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT, ROOT], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["mismatch"] == [] and res["checked"] > 300


# --------------------------------------------------------------------------------------------------
# counting

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("count")
    rng = np.random.default_rng(11)
    seqs = random_seqs(rng, 60, 0, 400)
    seqs += ["", "ACG", "N" * 50, "acgtacgtacgtNNacgt", "A" * 300, "ACGT" * 40]
    reads = random_seqs(rng, 150, 20, 120, n_rate=0.01, lower=0.05)
    return {"seqs": seqs, "reads": reads, "fa": write_fasta(d / "a.fa", seqs),
            "fa.gz": write_fasta(d / "a.fa.gz", seqs, width=70, gz=True),
            "fq": write_fastq(d / "r.fq", reads), "fq.gz": write_fastq(d / "r.fq.gz", reads, gz=True),
            "fq.multi": write_fastq(d / "m.fq", reads, multiline=True), "dir": d}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8, 13, 21, 25, 31])
def test_counts_equal_brute_force(data, k):
    exp = brute_counts(data["seqs"], k)
    res = C.count_kmers(data["fa"], k, threads=2)
    assert res.as_dict() == dict(exp)
    assert res.kmers.dtype == np.uint64 and res.counts.dtype == np.uint32
    exp_r = brute_counts(data["reads"], k)
    assert C.count_kmers(data["fq.gz"], k).as_dict() == dict(exp_r)


def test_formats_and_multiple_files(data):
    k = 21
    exp = brute_counts(data["seqs"], k)
    assert C.count_kmers(data["fa.gz"], k).as_dict() == dict(exp)
    exp_r = brute_counts(data["reads"], k)
    assert C.count_kmers(data["fq"], k).as_dict() == dict(exp_r)
    assert C.count_kmers(data["fq.multi"], k).as_dict() == dict(exp_r)
    both = C.count_kmers([data["fa"], data["fq"]], k).as_dict()
    assert both == dict(exp + exp_r)


def test_chunk_and_piece_boundaries(data, monkeypatch):
    """Tiny read chunks and pieces: records cut anywhere still give every k-mer exactly once."""
    from pymap import reads
    for chunk in (1, 7, 64):
        monkeypatch.setattr(reads, "CHUNK_BYTES", chunk)
        monkeypatch.setattr(C, "MAX_PIECE", 40)
        for k in (1, 5, 21):
            assert C.count_kmers(data["fa"], k).as_dict() == dict(brute_counts(data["seqs"], k)), (chunk, k)
        assert C.count_kmers(data["fq.multi"], 9).as_dict() == dict(brute_counts(data["reads"], 9)), chunk


def test_options_threads_and_waves_do_not_change_counts(data):
    k = 25
    ref = C.count_kmers(data["fa"], k, threads=1)
    two = C.count_kmers(data["fa"], k, threads=2)
    assert np.array_equal(ref.kmers, two.kmers) and np.array_equal(ref.counts, two.counts)
    exp = dict(brute_counts(data["seqs"], k))
    for kw in (dict(m=5), dict(rule="none"), dict(rule="kmc2", m=9), dict(partitions=1),
               dict(partitions=4096), dict(wave_kmers=100, partitions=64), dict(m=25)):
        assert C.count_kmers(data["fa"], k, threads=2, **kw).as_dict() == exp, kw
    # waves of a few partitions: the stream holds every k-mer once
    parts = list(C.iter_counts(data["fa"], k, wave_kmers=500, partitions=256))
    assert len(parts) > 3
    assert sum(len(p) for p in parts) == len(exp)


def test_write_counts_lines(data, tmp_path):
    k = 13
    res = C.count_kmers(data["fa"], k)
    path = tmp_path / "out.txt"
    with open(path, "wb") as fh:
        assert C.write_counts(res, fh) == len(res)
    lines = path.read_text().splitlines()
    got = {a: int(b) for a, b in (line.split("\t") for line in lines)}
    assert got == dict(brute_counts(data["seqs"], k)) and len(lines) == len(got)
    big = C.KmerCounts(31, np.array([0, (1 << 62) - 1, 0x1B], np.uint64),
                       np.array([1, 4294967295, 12345], np.uint32))
    text = C.format_counts(big).tobytes().decode()
    assert text == f"{'A' * 31}\t1\n{'T' * 31}\t4294967295\n{'A' * 28}CGT\t12345\n"


# `jellyfish histo` output on t1.fa below (jellyfish 2.3.0, count -C -m 5), with its options
T1_HISTO = {(): "2 129\n3 1\n4 28\n5 1\n6 3\n10001 1\n",
            ("-h", "5"): "2 129\n3 1\n4 28\n5 1\n6 4\n",
            ("-l", "3", "-h", "7", "-f"): "2 129\n3 1\n4 28\n5 1\n6 3\n7 0\n8 1\n",
            ("-i", "2", "-h", "10"): "2 130\n4 29\n6 3\n12 1\n"}


def t1_fasta(path):
    rng = np.random.default_rng(1)
    t = "".join(rng.choice(list("ACGT"), size=200))
    path.write_text(">a\n" + "A" * 20050 + "\n>b\n" + t + "\n>c\n" + t.lower()
                    + "\n>d\nACGTNACGTACGTAC\n>e\nACGRYACGT\n")
    return path


def _histo_kw(args):
    kw = {}
    names = {"-l": "low", "-h": "high", "-i": "increment"}
    it = iter(args)
    for a in it:
        if a == "-f":
            kw["full"] = True
        else:
            kw[names[a]] = int(next(it))
    return kw


def test_histogram_matches_jellyfish_format(tmp_path):
    path = t1_fasta(tmp_path / "t1.fa")
    res = C.count_kmers(path, 5)
    counts = np.array(list(res.as_dict().values()))
    for args in T1_HISTO:
        kw = _histo_kw(args)
        # the bucket rule stated independently: labels base + i*inc, first and last buckets catch all
        low, high, inc = kw.get("low", 1), kw.get("high", 10000), kw.get("increment", 1)
        base = 0 if inc >= low else low - inc
        top = high + inc
        exp = collections.Counter(base if c < base else top if c > top else base + (c - base) // inc * inc
                                  for c in counts.tolist())
        labels, values = C.histogram(res.counts, **kw)
        text = C.format_histogram(labels, values)
        if not kw.get("full"):
            assert text == "".join(f"{a} {exp[a]}\n" for a in sorted(exp))
    # the exact text jellyfish printed for this input
    for args, text in T1_HISTO.items():
        assert C.format_histogram(*C.histogram(res, **_histo_kw(args))) == text, args
    assert C.format_histogram(*C.histogram(np.empty(0, np.uint32))) == ""
    with pytest.raises(C.UsageError):
        C.histogram(res, low=5, high=4)


def test_empty_and_header_only_inputs(tmp_path):
    for text in ("", "\n\n", ">x\n", ">x\n>y\nAC\n", "@r\n\n+\n\n"):
        p = tmp_path / "e.fa"
        p.write_text(text)
        res = C.count_kmers(p, 3)
        assert len(res) == 0 and res.kmers.dtype == np.uint64


def test_jellyfish_agrees(tmp_path, data):
    """The real thing, when installed (CI may not have it)."""
    jf = shutil.which("jellyfish")
    if not jf:
        pytest.skip("jellyfish not installed")
    fa = write_fasta(tmp_path / "j.fa", data["seqs"] + data["reads"], width=60)
    for k in (5, 21, 31):
        db = tmp_path / f"j{k}.jf"
        subprocess.run([jf, "count", "-C", "-m", str(k), "-s", "1M", "-t", "2", "-o", str(db), str(fa)],
                       check=True)
        dump = subprocess.run([jf, "dump", "-c", str(db)], check=True, capture_output=True, text=True).stdout
        jcounts = {a: int(b) for a, b in (line.split() for line in dump.splitlines())}
        res = C.count_kmers(fa, k, threads=2)
        assert res.as_dict() == jcounts, k
        histo = subprocess.run([jf, "histo", str(db)], check=True, capture_output=True, text=True).stdout
        assert C.format_histogram(*C.histogram(res)) == histo


# --------------------------------------------------------------------------------------------------
# the command line

def cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err, *words):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pymap: error:"), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], err


def test_cli_count_and_histo(data, tmp_path, capsys):
    out = tmp_path / "c.txt"
    code, _, err = cli(capsys, "count", "-k", 21, "-t", 2, "-o", out, data["fa"], data["fq.gz"])
    assert code == 0, err
    got = {a: int(b) for a, b in (line.split("\t") for line in out.read_text().splitlines())}
    assert got == dict(brute_counts(data["seqs"] + data["reads"], 21))
    code, text, err = cli(capsys, "count", "-k", 21, "--histo", data["fa"], data["fq.gz"])
    assert code == 0, err
    assert text == C.format_histogram(*C.histogram(np.array(list(got.values()))))
    code, text, _ = cli(capsys, "count", "-k", 21, "--histo", "--high", 2, "--full", data["fa"])
    assert code == 0 and text.splitlines()[0] == "0 0"


@pytest.mark.parametrize("args,code,words", [
    (["-k", "0"], 2, ["-k", "1..31"]),
    (["-k", "32"], 2, ["-k", "1..31"]),
    (["-k", "21", "-m", "30"], 2, ["-m"]),
    (["-k", "21", "-m", "2", "--rule", "kmc2"], 2, ["m >= 3"]),
    (["-k", "21", "--partitions", "3"], 2, ["partitions"]),
    (["-k", "21", "-t", "-1"], 2, ["threads"]),
    (["-k", "21", "--histo", "--low", "9", "--high", "3"], 2, ["histogram"]),
])
def test_cli_bad_options(data, capsys, args, code, words):
    c, out, err = cli(capsys, "count", *args, data["fa"])
    assert c == code
    one_error_line(err, *words)


def test_cli_bad_inputs(tmp_path, capsys):
    cases = {"missing.fa": (None, "no such file"),
             "bin.fa": (b"\x00\x01\x02binary", "not a FASTA/FASTQ"),
             "text.fa": (b"hello world\n", "not a FASTA/FASTQ"),
             "bad.fq": (b"@r1\nACGT\n+\nIIII\nr2\nACGT\n+\nIIII\n", "does not start with '@'"),
             "trunc.fq": (b"@r1\nACGT\n+\nIIII\n@r2\nACGTACGT\n+\nII", "truncated"),
             "long.fq": (b"@r1\nACGT\n+\nIIIIII\n", "quality"),
             "bad.gz": (b"\x1f\x8b\x08\x00garbage-not-gzip", "gzip")}
    for name, (content, words) in cases.items():
        p = tmp_path / name
        if content is not None:
            p.write_bytes(content)
        c, out, err = cli(capsys, "count", "-k", 3, "-o", tmp_path / "o.txt", p)
        assert c == 1, (name, err)
        one_error_line(err, words)
        assert not (tmp_path / "o.txt").exists()
    c, _, err = cli(capsys, "count", "-k", 3, tmp_path)
    assert c == 1
    one_error_line(err, "directory")
    (tmp_path / "ok.fa").write_text(">a\nACGT\n")
    c, _, err = cli(capsys, "count", "-k", 3, "-o", tmp_path, tmp_path / "ok.fa")
    assert c == 2
    one_error_line(err, "directory")


def test_cli_output_to_a_pipe_keeps_the_pipe(data, tmp_path, capsys):
    """-o on a FIFO (or /dev/null) writes into it: the usual write-then-rename would replace it."""
    import threading
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    code, _, err = cli(capsys, "count", "-k", 11, "-o", fifo, data["fa"])
    reader.join(60)
    assert code == 0, err
    assert stat_is_fifo(fifo)
    lines = got[0].decode().splitlines()
    assert len(lines) == len(brute_counts(data["seqs"], 11))


def stat_is_fifo(path):
    import stat
    return stat.S_ISFIFO(os.stat(path).st_mode)


def program(*args, importtime=False):
    """`pymap ...` as its own process (main() reading sys.argv, as the installed command does)."""
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "pymap.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_count_as_a_program(data, tmp_path):
    """The count command as a process: complete output, exit status 0, and a start-up without the mapping
    pipeline or SciPy (docs/counting.md: start-up is most of a run on a bacterial genome)."""
    out = tmp_path / "c.txt"
    res = program("count", "-k", 21, "-t", 2, "-o", out, data["fa"], data["fq.gz"], importtime=True)
    assert res.returncode == 0, res.stderr
    got = {a: int(b) for a, b in (line.split("\t") for line in out.read_text().splitlines())}
    assert got == dict(brute_counts(data["seqs"] + data["reads"], 21))
    imported = {line.rsplit("|", 1)[1].strip() for line in res.stderr.splitlines()
                if line.startswith("import time:")}
    assert "pymap.count" in imported
    assert not imported & {"pymap.api", "pymap.pipeline", "pysam", "scipy.linalg"}
    res = program("count", "-k", 21, "--histo", data["fa"], data["fq.gz"])
    assert res.returncode == 0, res.stderr
    assert res.stdout == C.format_histogram(*C.histogram(np.array(list(got.values()))))
    res = program("count", "-k", 21, "-o", tmp_path / "x.txt", tmp_path / "missing.fa")
    assert res.returncode == 1
    one_error_line(res.stderr, "no such file")
    assert not (tmp_path / "x.txt").exists()


def test_api_pipeline_loads_kernels_without_scipy(tmp_path):
    """A pipeline built through the Python API loads its first kernels as the CLI does, without SciPy's
    linear algebra (0.25 s of every API run's start otherwise)."""
    pytest.importorskip("scipy")
    ref = tmp_path / "lambda.fa"
    ref.write_bytes((Path(__file__).resolve().parents[1] / "examples" / "lambda.fa").read_bytes())
    script = textwrap.dedent(f"""
        import sys
        from pymap import api
        from pymap.options import AlignOptions
        api.make_pipeline({str(ref)!r}, AlignOptions(threads=1))
        assert "scipy.linalg" not in sys.modules, "scipy.linalg imported"
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]


def test_scipy_hidden_only_while_numba_loads():
    """After jitcache.numba_without_scipy, kernels calling np.dot, np.linalg and np.correlate still compile
    (Numba needs SciPy for the first two: without it there is nothing to check)."""
    pytest.importorskip("scipy")
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from numba import njit
        from pymap import jitcache
        jitcache.numba_without_scipy()
        assert "scipy.linalg" not in sys.modules and "scipy.linalg.cython_blas" not in sys.modules
        a, m = np.arange(4.0), 2 * np.eye(3)
        assert njit(lambda a, b: np.dot(a, b))(a, a) == 14.0
        assert njit(lambda m: np.linalg.inv(m))(m)[0, 0] == 0.5
        assert njit(lambda a, b: np.correlate(a, b))(a, a)[0] == 14.0
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def test_cached_kernels_load_without_numba_registries(tmp_path):
    """After jitcache.prepare_numba a kernel loaded from the cache runs, arrays allocated through Numba's
    runtime included, without Numba's registries installed, without its linking bitcode parsed and
    with the runtime's functions loaded from pymap's cache (the first run compiles, which installs
    them); kernels compiled afterwards in the same process still compile and run, one that calls the
    loaded kernel included (it links that bitcode). The
    symbols read from the machine code's ELF table are those Numba lists from the bitcode."""
    (tmp_path / "kmod.py").write_text(textwrap.dedent("""
        import numpy as np
        from numba import njit

        @njit(cache=True, nogil=True)
        def doubled(n):
            out = np.empty(n, np.int64)
            for i in range(n):
                out[i] = 2 * i
            return out
    """))
    script = textwrap.dedent("""
        import json, sys
        import numpy as np
        from numba import njit
        from numba.core import codegen
        from numba.core.runtime import nrtdynmod
        from pymap import jitcache
        jitcache.prepare_numba()
        create, created = nrtdynmod.create_nrt_module, []
        nrtdynmod.create_nrt_module = lambda ctx: created.append(1) or create(ctx)
        patched = codegen.CPUCodeLibrary.__dict__["_unserialize"]
        jitcache.prepare_numba()                    # the CLI and the API module both prepare: once it is
        assert codegen.CPUCodeLibrary.__dict__["_unserialize"] is patched
        parse, parsed = codegen.ll.parse_bitcode, []
        codegen.ll.parse_bitcode = lambda data: parsed.append(1) or parse(data)
        from kmod import doubled
        assert doubled(5).tolist() == [0, 2, 4, 6, 8]
        seen = {"registries": "numba.cpython.mathimpl" in sys.modules, "parsed on load": len(parsed),
                "runtime compiled": len(created)}
        lib = doubled.overloads[doubled.signatures[0]].library
        if seen["registries"]:                      # compiled in this run: its ELF symbols against Numba's list
            module = lib._get_module_for_linking()
            listed = {g.name for gs in (module.functions, module.global_variables) for g in gs
                      if not g.is_declaration}
            seen["elf symbols as listed"] = jitcache._elf_symbols(lib._get_compiled_object()) == listed != set()
        assert njit(lambda x: np.sqrt(x) + 1.0)(4.0) == 3.0
        assert njit(lambda n: doubled(n).sum())(4) == 12
        seen["parsed to link"] = len(parsed) - seen["parsed on load"]
        print(json.dumps(seen))
    """)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": path}
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                           cwd=tmp_path) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr[-2000:]
    assert [json.loads(res.stdout) for res in runs] == [
        {"registries": True, "parsed on load": 0, "runtime compiled": 1, "elf symbols as listed": True,
         "parsed to link": 0},
        {"registries": False, "parsed on load": 0, "runtime compiled": 0, "parsed to link": 2}]
    assert len(list((tmp_path / "cache").glob("nrt-*.pkl"))) == 1
