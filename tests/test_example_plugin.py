"""The example plugin package (examples/pymap_example_plugin): installed into a fresh virtual
environment that sees this pymap, found through its entry points, and mapping the example reads.
Also the q-gram filter's contract and the k-mer seeder's index checks, in process."""
import gzip
import importlib.util
import os
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import edlib
import numpy as np
import pysam
import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "examples" / "pymap_example_plugin"
EXAMPLES = ROOT / "examples"


def _setuptools_builds_wheels():
    """setuptools builds a wheel without build isolation when `wheel` is installed or it is 70.1+
    (which carries bdist_wheel itself)."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    try:
        major, minor = (int(x) for x in version("setuptools").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1)


def _run(cmd, cwd, check=True, timeout=300):
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)
    if check and proc.returncode != 0:
        shown = " ".join(map(str, cmd))
        raise AssertionError(f"{shown} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """(python of a venv with the example package installed, work directory with the example data)."""
    tmp = tmp_path_factory.mktemp("plugin")
    env_dir = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", env_dir], tmp)
    py = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    if sys.prefix != sys.base_prefix:
        # pytest itself runs in a virtual environment: --system-site-packages shows the base
        # interpreter's packages, not this environment's, so add those (and their .pth files)
        purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site = _run([py, "-c", purelib], tmp).stdout.strip()
        import site as parent_site
        dirs = [d for d in parent_site.getsitepackages() if os.path.isdir(d)]
        lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
        Path(site, "_parent_env.pth").write_text(lines)
    # build from a copy, so that no build/ or *.egg-info appears in the repository
    src = tmp / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    flags = ["--no-deps", "--no-build-isolation"]
    if not _setuptools_builds_wheels():
        # setuptools < 70.1 without `wheel` cannot build a wheel here: let pip fetch the build
        # requirements into an isolated build environment, from the index CI installed pymap from
        flags = ["--no-deps"]
    _run([py, "-m", "pip", "install", "-q", *flags, src], tmp)
    work = tmp / "work"
    work.mkdir()
    # the indexes are written next to the reference: a copy keeps them out of the repository
    shutil.copy(EXAMPLES / "lambda.fa", work / "lambda.fa")
    if (EXAMPLES / "lambda.fa.pymap.idx").exists():
        shutil.copy(EXAMPLES / "lambda.fa.pymap.idx", work / "lambda.fa.pymap.idx")
    return py, work


def _pymap(plugin_env, *args, check=True):
    py, work = plugin_env
    return _run([py, "-m", "pymap.cli", *args], work, check=check)


def _primaries(path):
    """{read name: (unmapped, contig, start, reverse)} of the primary/unmapped records; asserts that
    every read has exactly one, and that NM agrees with the CIGAR and MD of mapped records."""
    out = {}
    with pysam.AlignmentFile(str(path)) as sam:
        for rec in sam:
            if rec.is_secondary or rec.is_supplementary:
                continue
            assert rec.query_name not in out, f"{rec.query_name} has two primary records"
            if not rec.is_unmapped:
                pairs = rec.get_aligned_pairs(with_seq=True)
                mismatches = sum(1 for q, r, base in pairs
                                 if q is not None and r is not None and base.islower())
                indels = sum(n for op, n in rec.cigartuples if op in (1, 2))
                assert rec.get_tag("NM") == mismatches + indels, rec.to_string()
                assert rec.query_alignment_length == rec.query_length
            out[rec.query_name] = (rec.is_unmapped, rec.reference_name, rec.reference_start, rec.is_reverse)
    return out


def _read_names():
    with gzip.open(EXAMPLES / "reads.fq.gz", "rt") as fh:
        return [line[1:].split()[0] for i, line in enumerate(fh) if i % 4 == 0]


def test_plugins_lists_the_example_plugins(plugin_env):
    out = _pymap(plugin_env, "plugins").stdout
    sections = {}
    kind = None
    for line in out.splitlines():
        if not line.startswith(" "):
            kind = line.rstrip(":")
        else:
            name, doc = line.split(None, 1)
            sections.setdefault(kind, {})[name] = doc
    assert "kmer" in sections["seeders"] and "neighborhood" in sections["seeders"]
    assert "qgram" in sections["filters"] and "q-gram" in sections["filters"]["qgram"]
    assert "nw-edlib" in sections["extenders"] and "cannot load" not in out


def test_example_plugins_map_the_example_reads(plugin_env):
    _, work = plugin_env
    reads = EXAMPLES / "reads.fq.gz"
    _pymap(plugin_env, "align", "lambda.fa", reads, "-o", "default.sam", "--no-progress")
    run = _pymap(plugin_env, "align", "lambda.fa", reads, "--filter", "qgram", "--seeder", "kmer",
                 "--extender", "nw-edlib", "-o", "out.sam", "--no-progress")
    assert (work / "lambda.fa.kmer15.npz").exists()
    assert "run at e+" in run.stderr
    names = _read_names()
    default, example = _primaries(work / "default.sam"), _primaries(work / "out.sam")
    assert sorted(example) == sorted(names) == sorted(default)
    mapped_default = sum(not v[0] for v in default.values())
    mapped = sum(not v[0] for v in example.values())
    assert mapped >= 0.9 * len(names)
    assert abs(mapped - mapped_default) <= 0.03 * mapped_default, (mapped, mapped_default)
    # where both map a read, they agree on the place (equal alignments may differ in a few bases)
    both = [n for n in names if not default[n][0] and not example[n][0]]
    near = sum(default[n][1:2] == example[n][1:2] and default[n][3] == example[n][3]
               and abs(default[n][2] - example[n][2]) <= 5 for n in both)
    assert near >= 0.98 * len(both)
    # a second run loads the saved index, which is no pymap index container: nothing to say of it
    again = _pymap(plugin_env, "align", "lambda.fa", reads, "--filter", "qgram", "--seeder", "kmer",
                   "--extender", "nw-edlib", "-o", "again.sam", "--no-progress")
    assert "index built" not in again.stderr and "not a pymap index" not in again.stderr
    records = [[line for line in (work / name).read_text().splitlines() if not line.startswith("@")]
               for name in ("out.sam", "again.sam")]
    assert records[0] == records[1]        # deterministic


def test_chain_routes_options_to_the_stages_that_take_them(plugin_env):
    py, work = plugin_env
    reads = EXAMPLES / "reads.fq.gz"
    run = _pymap(plugin_env, "align", "lambda.fa", reads, "--filter", "qgram,gatekeeper",
                 "--filter-opt", "q=5", "--device", "cpu", "-o", "chain.sam", "--no-progress")
    assert "filter accepts qgram" in run.stderr
    chain = _primaries(work / "chain.sam")
    assert sorted(chain) == sorted(_read_names())
    assert sum(not v[0] for v in chain.values()) >= 0.9 * len(chain)
    code = ("from pymap.api import make_filter, route_options\n"
            "print(route_options('filter', ['qgram', 'gatekeeper'], {'q': 5, 'device': 'cpu'}))\n"
            "f = make_filter('qgram,gatekeeper', {'q': 5, 'device': 'cpu'})\n"
            "print(f.stages[0].q, f.stages[1].device)\n"
            "f = make_filter('qgram,gatekeeper', {'qgram.q': 6})\n"
            "print(f.stages[0].q)\n")
    lines = _run([py, "-c", code], work).stdout.splitlines()
    assert lines == ["[{'q': 5}, {'device': 'cpu'}]", "5 cpu", "6"]
    # a bad value is refused by the plugin's __init__, naming the option (usage error, exit 2)
    bad = _pymap(plugin_env, "align", "lambda.fa", reads, "--filter", "qgram", "--filter-opt", "q=0",
                 "-o", "bad.sam", check=False)
    assert bad.returncode == 2 and "pymap: error: filter 'qgram'" in bad.stderr and "'q'" in bad.stderr
    bad = _pymap(plugin_env, "align", "lambda.fa", reads, "--seeder", "kmer", "--seeder-opt", "width=3",
                 "-o", "bad.sam", check=False)
    assert bad.returncode == 2 and "has no option 'width'" in bad.stderr
    assert not (work / "bad.sam").exists()


# ------------------------------------------------------------------ in process, without installing

@pytest.fixture()
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(PKG))
    import pymap_example_plugin.kmer as kmer
    import pymap_example_plugin.qgram as qgram
    return qgram, kmer


def _mutate(rng, seq, edits, alphabet):
    s = list(seq)
    for _ in range(edits):
        kind, i = int(rng.integers(0, 3)), int(rng.integers(0, len(s)))
        if kind == 0:
            s[i] = alphabet[int(rng.integers(0, alphabet.size))]
        elif kind == 1:
            s.insert(i, alphabet[int(rng.integers(0, 4))])
        elif len(s) > 1:
            del s[i]
    return np.array(s, np.uint8)


def test_qgram_never_rejects_a_pair_within_e(example):
    qgram, _ = example
    rng = np.random.default_rng(11)
    alphabet = np.frombuffer(b"ACGTN", np.uint8)
    rejected_far = 0
    for length in (12, 50, 100, 150):
        reads, refs = [], []
        for i in range(300):
            read = alphabet[rng.choice(5, length, p=[0.245, 0.245, 0.245, 0.245, 0.02])]
            ref = _mutate(rng, read, int(rng.integers(0, 20)), alphabet)
            ref = np.concatenate([ref, alphabet[rng.integers(0, 4, length)]])[:length]
            if i % 10 == 0:                  # unrelated pairs
                ref = alphabet[rng.integers(0, 4, length)]
            reads.append(read)
            refs.append(ref)
        reads, refs = np.stack(reads), np.stack(refs)
        dist = np.array([edlib.align(a.tobytes(), b.tobytes(), mode="NW", task="distance")["editDistance"]
                         for a, b in zip(reads, refs)])
        for q in (2, 3, 4, 5):
            filt = qgram.QGramFilter(q=q)
            for e in range(0, 13):
                accept, estimate = filt.filter_pairs(reads, refs, e)
                assert accept.dtype == np.bool_ and estimate.dtype == np.int32
                assert accept.shape == estimate.shape == (reads.shape[0],)
                assert not np.any(~accept & (dist <= e)), (length, q, e)
                assert np.all(estimate[~accept] == -1)
                assert np.all((estimate[accept] >= 0) & (estimate[accept] <= np.minimum(dist[accept], e)))
                rejected_far += int(np.sum(~accept & (dist > 2 * e + 10)))
    assert rejected_far > 1000                # and it does filter
    filt = qgram.QGramFilter()
    empty = np.empty((0, 100), np.uint8)
    accept, estimate = filt.filter_pairs(empty, empty, 3)
    assert accept.shape == estimate.shape == (0,)
    with pytest.raises(ValueError, match="'q'"):
        qgram.QGramFilter(q=13)


def test_kmer_index_round_trip_and_mismatch(example, tmp_path):
    _, kmer = example
    from pymap.errors import IndexCorrupt, IndexMismatch
    from pymap.reference import parse_fasta
    rng = np.random.default_rng(5)
    seqs = ["".join(np.array(list("ACGT"))[rng.integers(0, 4, n)]) for n in (3000, 40)]
    ref = parse_fasta(f">a\n{seqs[0]}\n>b\n{seqs[1]}\n".encode())
    other = parse_fasta(f">a\n{seqs[0]}\n>c\n{seqs[1]}\n".encode())
    seeder = kmer.KmerSeeder(k=11)
    path = seeder.index_path(str(tmp_path / "ref.fa"))
    assert path.endswith("ref.fa.kmer11.npz")
    index = seeder.build_index(ref)
    # no k-mer crosses the boundary of contig a and b
    assert np.all((index.positions + 11 <= 3000) | (index.positions >= 3000))
    assert index.kmers.shape[0] == (3000 - 10) + (40 - 10)
    seeder.save_index(index, path)
    loaded = seeder.load_index(path, ref)
    assert np.array_equal(loaded.kmers, index.kmers) and np.array_equal(loaded.positions, index.positions)
    with pytest.raises(IndexMismatch):
        seeder.load_index(path, other)
    with pytest.raises(IndexMismatch):
        kmer.KmerSeeder(k=12).load_index(path, ref)
    Path(path).write_bytes(Path(path).read_bytes()[:100])
    with pytest.raises(IndexCorrupt):
        seeder.load_index(path, ref)
    with pytest.raises(ValueError, match="'step'"):
        kmer.KmerSeeder(step=0)
