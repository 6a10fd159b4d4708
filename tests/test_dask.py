"""Mapping on a real local Dask cluster (worker processes): the same records as one process, single
and paired, unsorted and sorted; a worker killed during a run loses and duplicates nothing."""
import os
import re
import signal

import pysam
import pytest

from pymap import api, cli
from pymap.errors import InputError, UsageError
from pymap.options import AlignOptions

distributed = pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "examples", "lambda.fa")
READS = os.path.join(ROOT, "examples", "reads.fq.gz")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """Read 1 and read 2 files cut from the lambda genome (insert 300, FR)."""
    from conftest import lambda_pairs
    return lambda_pairs(tmp_path_factory.mktemp("dask_pairs"), 400, 8)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """examples/reads.fq.gz uncompressed: workers read their chunks' bytes themselves."""
    import gzip
    path = tmp_path_factory.mktemp("dask_plain") / "reads.fq"
    path.write_bytes(gzip.decompress(open(READS, "rb").read()))
    return str(path)


def _body(path):
    with pysam.AlignmentFile(str(path), reference_filename=REF) as f:
        return [r.to_string() for r in f]


def _align(out, reads=READS, mates=None, summary=False, **kw):
    kw.setdefault("progress", False)
    return api.align(REF, reads, out=str(out), mates_path=mates, options=AlignOptions(**kw), summary=summary)


def _how(capsys):
    """How the last run's chunks and records travelled, from its summary note."""
    return _how_in(capsys.readouterr().err)


def _how_in(err):
    return err[err.rindex("(chunks"):].split(")")[0][1:]


def test_single_end_same_records_as_one_process(client, tmp_path, capsys):
    """gzip reads: the client parses the chunks; the workers write the records to part files."""
    _align(tmp_path / "one.sam")
    st = _align(tmp_path / "dask.sam", dask=client, batch_size=150, summary=True)
    assert _how(capsys) == "chunks parsed by the client, records in part files"
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    assert st.reads == 2000 and st.mapped == 2000
    assert sorted(os.listdir(tmp_path)) == ["dask.sam", "one.sam"]


def test_plain_fastq_read_by_the_workers(client, plain, tmp_path, capsys):
    """Plain FASTQ: chunks go as byte ranges that each worker reads and parses."""
    _align(tmp_path / "one.sam")
    st = _align(tmp_path / "dask.sam", plain, dask=client, batch_size=150, summary=True)
    err = capsys.readouterr().err
    assert _how_in(err) == "chunks as file ranges, records in part files"
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    assert st.reads == 2000
    # each chunk's wall time and its thread's CPU time, apart
    wall = float(re.search(r"a chunk took ([0-9.]+) s on average", err).group(1))
    user, system = map(float, re.search(r"thread used ([0-9.]+) s user and ([0-9.]+) s system", err).groups())
    assert 0 < user and 0 <= system and user + system <= wall + 0.01
    assert sorted(os.listdir(tmp_path)) == ["dask.sam", "one.sam"]


def test_workers_on_other_file_systems(client, plain, tmp_path, capsys, monkeypatch):
    """Workers that see neither the reads nor the output's directory: the client parses the chunks
    and the records come back in the results."""
    from pymap import distributed as pd
    _align(tmp_path / "one.sam")
    monkeypatch.setattr(pd.DaskRun, "_workers_see", lambda self, files: (False, False))
    _align(tmp_path / "dask.sam", plain, dask=client, batch_size=150, summary=True)
    assert _how(capsys) == "chunks parsed by the client, records in the results"
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")


@pytest.mark.parametrize("gz", [False, True])
def test_pairs_same_records_as_one_process(client, pairs, tmp_path, capsys, gz):
    import gzip
    _align(tmp_path / "one.sam", *pairs)
    if gz:
        for i, name in enumerate(pairs):
            (tmp_path / f"r{i + 1}.fq.gz").write_bytes(gzip.compress(open(name, "rb").read()))
        pairs = (str(tmp_path / "r1.fq.gz"), str(tmp_path / "r2.fq.gz"))
    _align(tmp_path / "dask.sam", *pairs, dask=client, batch_size=64, summary=True)
    chunks = "chunks parsed by the client" if gz else "chunks as file ranges"
    assert _how(capsys) == chunks + ", records in part files"
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")


def test_interleaved_pairs_same_records_as_one_process(client, pairs, tmp_path, capsys):
    lines = [open(p).read().splitlines(keepends=True) for p in pairs]
    inter = tmp_path / "inter.fq"
    inter.write_text("".join("".join(lines[m][4 * i:4 * i + 4]) for i in range(len(lines[0]) // 4)
                             for m in (0, 1)))
    _align(tmp_path / "one.sam", *pairs)
    _align(tmp_path / "dask.sam", str(inter), dask=client, batch_size=64, interleaved=True, summary=True)
    assert _how(capsys) == "chunks as file ranges, records in part files"
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")


def test_pair_files_of_different_lengths_same_error(client, pairs, tmp_path):
    short = tmp_path / "r2.fq"
    short.write_text("".join(open(pairs[1]).read().splitlines(keepends=True)[:4 * 150]))
    with pytest.raises(InputError) as one:
        _align(tmp_path / "one.sam", pairs[0], str(short))
    with pytest.raises(InputError) as dask:
        _align(tmp_path / "dask.sam", pairs[0], str(short), dask=client, batch_size=64)
    assert str(dask.value) == str(one.value) == f"{short} ends after 150 reads, {pairs[0]} has more"
    assert sorted(os.listdir(tmp_path)) == ["r2.fq"]


def test_error_in_a_local_worker_is_one_line(plain, tmp_path):
    """`--dask local:N`: a chunk that fails on a worker is the client's one error line (the workers'
    own logs of the failed task are silenced), exit 1, no output."""
    import subprocess
    import sys
    lines = open(plain).read().splitlines(keepends=True)
    trunc = tmp_path / "t.fq"
    trunc.write_text("".join(lines[:-2]))
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", REF, str(trunc), "-o",
                          str(tmp_path / "t.bam"), "--dask", "local:2", "--batch-size", "64", "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    said = [line for line in res.stderr.splitlines() if not line.startswith("[pymap]")]
    assert res.returncode == 1 and len(said) == 1 and said[0].startswith("pymap: error: ") and "truncated" in said[0]
    assert sorted(os.listdir(tmp_path)) == ["t.fq"]


def test_bam_and_stdout_from_part_files(client, plain, tmp_path):
    """Part files go into a BAM through samtools' pipe, and to stdout, as the bytes of the records."""
    import subprocess
    import sys
    _align(tmp_path / "one.sam")
    _align(tmp_path / "dask.bam", plain, dask=client, batch_size=150)
    assert _body(tmp_path / "dask.bam") == _body(tmp_path / "one.sam")
    res = subprocess.run([sys.executable, "-m", "pymap.cli", "align", REF, plain, "--dask", client.scheduler.address,
                          "--batch-size", "150", "--no-progress", "-o", "-"], capture_output=True, check=True)
    (tmp_path / "stdout.sam").write_bytes(res.stdout)
    assert _body(tmp_path / "stdout.sam") == _body(tmp_path / "one.sam")
    assert sorted(os.listdir(tmp_path)) == ["dask.bam", "one.sam", "stdout.sam"]


@pytest.mark.parametrize("sendfile_takes_it", [True, False])
def test_part_file_copied_in_place_of_its_bytes(tmp_path, monkeypatch, sendfile_takes_it):
    """PartFile.copy_to: after what the writer buffered, before what follows; into a file and a
    pipe; by sendfile or, where the descriptor does not take it, by reading; the part removed."""
    import errno
    import threading
    from pymap import outfile
    if not sendfile_takes_it:
        def refuse(*args):
            raise OSError(errno.EINVAL, "not here")
        monkeypatch.setattr(os, "sendfile", refuse)
    body = os.urandom(3 << 20)
    for target in ("file", "pipe"):
        part = tmp_path / "part"
        part.write_bytes(body)
        if target == "file":
            fh = open(tmp_path / "out", "wb")
        else:
            r, w = os.pipe()
            fh, got = open(w, "wb"), []
            reader = threading.Thread(target=lambda: got.append(open(r, "rb").read()))
            reader.start()
        fh.write(b"head")
        outfile.PartFile(str(part)).copy_to(fh)
        fh.write(b"tail")
        fh.close()
        if target == "pipe":
            reader.join()
        data = (tmp_path / "out").read_bytes() if target == "file" else got[0]
        assert data == b"head" + body + b"tail"
        assert not part.exists()


def test_sorted_bam_same_as_one_process(client, tmp_path):
    _align(tmp_path / "one.bam", sort=True)
    _align(tmp_path / "dask.bam", sort=True, dask=client, batch_size=97)
    assert _body(tmp_path / "dask.bam") == _body(tmp_path / "one.bam")
    assert (tmp_path / "dask.bam.bai").exists()
    assert sorted(os.listdir(tmp_path)) == ["dask.bam", "dask.bam.bai", "one.bam", "one.bam.bai"]


def test_killed_worker_loses_and_duplicates_nothing(client, plain, tmp_path, monkeypatch):
    from pymap import distributed as pd
    _align(tmp_path / "one.sam")
    collect = pd.DaskRun._collect
    seen = []

    def collect_and_kill(self, future):
        seen.append(1)
        if len(seen) == 3:              # mid-run: kill a worker process that holds chunks in flight
            pids = client.run(os.getpid)
            os.kill(sorted(pids.values())[0], signal.SIGKILL)
        return collect(self, future)

    monkeypatch.setattr(pd.DaskRun, "_collect", collect_and_kill)
    st = _align(tmp_path / "dask.sam", plain, dask=client, batch_size=50)
    assert len(seen) == 40
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    assert st.reads == 2000
    assert sorted(os.listdir(tmp_path)) == ["dask.sam", "one.sam"]
    client.wait_for_workers(2, timeout=60)


def test_worker_without_the_index_is_one_clear_error(tmp_path):
    from pymap import distributed as pd
    with pytest.raises(InputError, match="every worker can read"):
        pd._worker_pipeline("run", REF, AlignOptions(), str(tmp_path / "missing.idx"), False)


def test_workers_check_files_and_scratch(tmp_path):
    from pymap import distributed as pd
    reads = tmp_path / "r.fq"
    reads.write_text("@r\nA\n+\nI\n")
    st = os.stat(reads)
    (tmp_path / "probe").write_text("token")
    assert pd._sees([(str(reads), st.st_size, st.st_mtime_ns)], str(tmp_path), "token") == (True, True)
    assert pd._sees([(str(reads), st.st_size + 1, st.st_mtime_ns)], str(tmp_path), "other") == (False, False)
    assert pd._sees([(str(tmp_path / "gone.fq"), 1, 1)], str(tmp_path / "gone"), "token") == (False, False)


def test_bad_dask_spec_is_a_usage_error(capsys):
    assert cli.main(["align", REF, READS, "--dask", "local:zero"]) == 2
    assert "local:N" in capsys.readouterr().err
    with pytest.raises(UsageError):
        _align("-", dask="nonsense")


def test_cli_on_a_running_scheduler(tmp_path, capsys):
    """`--dask tcp://HOST:PORT` with a scheduler and a worker started as separate programs."""
    import json
    import subprocess
    import sys
    import time
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--port", "0",
                               "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(300):
            if sched_file.exists() and sched_file.read_text().strip():
                break
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                                       "--nthreads", "1", "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with distributed.Client(address) as c:
            c.wait_for_workers(1, timeout=60)
        _align(tmp_path / "one.sam")
        rc = cli.main(["align", REF, READS, "-o", str(tmp_path / "dask.sam"), "--dask", address, "--no-progress",
                       "--batch-size", "500"])
        assert rc == 0, capsys.readouterr().err
        assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def _worker_settings():
    """(MALLOC_TRIM_THRESHOLD_, Dask's profiler on, the worker's parent is a forkserver, pymap
    imported and Numba prepared for quick kernel loads before any task) of the worker process this runs in."""
    import sys
    import dask
    from numba.core import caching
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
        parent = fh.read()
    return (os.environ.get("MALLOC_TRIM_THRESHOLD_"), dask.config.get("distributed.worker.profile.enabled"),
            b"forkserver" in parent, "pymap.api" in sys.modules,
            getattr(caching.Cache.load_overload, "pymap_quick", False))


@pytest.mark.skipif(not os.path.exists("/proc/self/cmdline"), reason="reads the parent's command line in /proc")
def test_local_cluster_runs_workers_without_dask_slowdowns(monkeypatch):
    """`--dask local:N`: workers forked from a server that imported pymap and warmed Numba, without
    Dask's malloc trim threshold and profiler; workers with Dask's defaults (the `client` fixture) get
    a note."""
    from pymap import distributed as pd
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)   # left here by other clusters' nannies
    local, owned = pd.connect("local:1")
    try:
        assert list(local.run(_worker_settings).values()) == [(None, False, True, True, True)]
        assert list(local.run(pd._slow_settings_notes).values()) == [[]]
    finally:
        for thing in owned:
            thing.close()


def test_cli_local_cluster_started_first_thing(plain, tmp_path):
    """`pymap align --dask local:N` starts the server that forks the workers before it imports
    NumPy, Numba or Dask (workers.start_dask_server): the same records as one process."""
    import subprocess
    import sys
    _align(tmp_path / "one.sam")
    code = ("import sys, multiprocessing.forkserver as f; from pymap import cli, workers as w\n"
            "start = w.start_dask_server\n"
            "def traced(spec):\n"
            "    start(spec)\n"
            "    print('server', f._forkserver._forkserver_pid is not None,\n"
            "          [m for m in ('numpy', 'numba', 'distributed') if m in sys.modules], file=sys.stderr)\n"
            "w.start_dask_server = traced\n"
            "sys.exit(cli.main(sys.argv[1:]))")
    res = subprocess.run([sys.executable, "-c", code, "align", REF, plain, "--dask", "local:2", "--batch-size", "150",
                          "--no-progress", "-o", str(tmp_path / "dask.sam")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "server True []" in res.stderr           # running before this process imported them
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")


def test_workers_with_dask_defaults_get_a_note(client):
    from pymap import distributed as pd
    notes = list(client.run(pd._slow_settings_notes).values())
    assert len(notes) == 2
    assert all(len(n) == 1 and "MALLOC_TRIM_THRESHOLD_=65536" in n[0] and "profiler on" in n[0] for n in notes)


@pytest.mark.parametrize("local,device,want", [(True, None, "cpu"), (True, "auto", "cpu"), (True, "gpu", "gpu"),
                                               (False, None, None), (False, "auto", "auto")])
def test_local_workers_map_on_the_cpu_unless_told(local, device, want):
    """`--dask local:N`: N worker processes would share the machine's GPU; "auto" means the CPU there."""
    from pymap import distributed as pd
    run = pd.DaskRun.__new__(pd.DaskRun)
    run._load(REF, AlignOptions(device=device), None, False, local=local)
    assert run.options.device == want


@pytest.mark.parametrize("device", ["gpu", "cpu"])
def test_first_gpu_chunk_of_a_worker_maps_alone(monkeypatch, device):
    """A worker's threads starting at once: the process's first chunk that may use a GPU maps alone
    (Numba's CUDA driver sets itself up at first use, not thread-safely), the later ones side by side;
    on the CPU every chunk starts at once."""
    import threading
    import time

    from pymap import distributed
    spans = []

    def fake_map(run, chunk, model, header_text, part):
        start = time.monotonic()
        time.sleep(0.3)
        spans.append((chunk, start, time.monotonic()))
        return chunk

    monkeypatch.setattr(distributed, "_map_chunk_here", fake_map)
    monkeypatch.setattr(distributed, "_GPU_START", threading.Lock())
    monkeypatch.setattr(distributed, "_GPU_STARTED", threading.Event())
    run = ("run", "ref.fa", AlignOptions(device=device), "ref.idx", False)
    threads = [threading.Thread(target=distributed._map_chunk, args=(run, k, None, None, None)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans.sort(key=lambda s: s[1])
    first, rest = spans[0], spans[1:]
    assert len(spans) == 4
    if device == "gpu":
        assert all(start >= first[2] for _, start, _ in rest)          # nothing beside the first
    else:
        assert all(start < first[2] for _, start, _ in rest)
    assert max(s for _, s, _ in rest) < min(e for _, _, e in rest)    # the later ones side by side


@pytest.mark.parametrize("concurrent", [True, False])
def test_worker_threads_share_a_concurrent_pipeline(monkeypatch, concurrent):
    """A worker's threads share one pipeline where its stages allow batches side by side (on a GPU:
    one index copy, not one a thread); otherwise each thread builds its own."""
    import threading
    import time
    import types

    from pymap import distributed
    built = []

    def fake_build(*args):
        time.sleep(0.1)
        pipe = types.SimpleNamespace(concurrent=concurrent)
        built.append(pipe)
        return pipe, time.time()

    monkeypatch.setattr(distributed, "_build_pipeline", fake_build)
    monkeypatch.setattr(distributed, "_PIPELINES", {})
    got = []
    threads = [threading.Thread(target=lambda: got.append(distributed._worker_pipeline("run", REF, None, "i", False)[0]))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4
    assert len(built) == (1 if concurrent else 4)
    assert len({id(p) for p in got}) == len(built)


def test_scheduler_addresses():
    """HOST:PORT is a tcp scheduler, as Dask takes it; anything else without a scheme is one usage error."""
    from pymap.distributed import scheduler_address
    assert scheduler_address("10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert scheduler_address("node-3.cluster:8786") == "tcp://node-3.cluster:8786"
    assert scheduler_address("[::1]:8786") == "tcp://[::1]:8786"
    assert scheduler_address("tls://node:8786") == "tls://node:8786"
    for bad in ("node", "node:port", "local", ":8786"):
        with pytest.raises(UsageError, match="scheduler address"):
            scheduler_address(bad)
