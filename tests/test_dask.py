"""Mapping on a real local Dask cluster (worker processes): the same records as one process, single
and paired, unsorted and sorted; a worker killed during a run loses and duplicates nothing."""
import os
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
    import numpy as np
    from conftest import revcomp
    seq = "".join(open(REF).read().split("\n")[1:])
    rng = np.random.default_rng(8)
    d = tmp_path_factory.mktemp("dask_pairs")
    r1, r2 = [], []
    for i in range(400):
        p = int(rng.integers(0, len(seq) - 300))
        r1.append(f"@p{i}\n{seq[p:p + 100]}\n+\n{'I' * 100}\n")
        r2.append(f"@p{i}\n{revcomp(seq[p + 200:p + 300])}\n+\n{'I' * 100}\n")
    (d / "r1.fq").write_text("".join(r1))
    (d / "r2.fq").write_text("".join(r2))
    return str(d / "r1.fq"), str(d / "r2.fq")


def _body(path):
    with pysam.AlignmentFile(str(path), reference_filename=REF) as f:
        return [r.to_string() for r in f]


def _align(out, reads=READS, mates=None, **kw):
    kw.setdefault("progress", False)
    return api.align(REF, reads, out=str(out), mates_path=mates, options=AlignOptions(**kw), summary=False)


def test_single_end_same_records_as_one_process(client, tmp_path):
    _align(tmp_path / "one.sam")
    st = _align(tmp_path / "dask.sam", dask=client, batch_size=150)
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    assert st.reads == 2000 and st.mapped == 2000


def test_pairs_same_records_as_one_process(client, pairs, tmp_path):
    _align(tmp_path / "one.sam", *pairs)
    _align(tmp_path / "dask.sam", *pairs, dask=client, batch_size=64)
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")


def test_sorted_bam_same_as_one_process(client, tmp_path):
    _align(tmp_path / "one.bam", sort=True)
    _align(tmp_path / "dask.bam", sort=True, dask=client, batch_size=97)
    assert _body(tmp_path / "dask.bam") == _body(tmp_path / "one.bam")
    assert (tmp_path / "dask.bam.bai").exists()
    assert sorted(os.listdir(tmp_path)) == ["dask.bam", "dask.bam.bai", "one.bam", "one.bam.bai"]


def test_killed_worker_loses_and_duplicates_nothing(client, tmp_path, monkeypatch):
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
    st = _align(tmp_path / "dask.sam", dask=client, batch_size=50)
    assert len(seen) == 40
    assert _body(tmp_path / "dask.sam") == _body(tmp_path / "one.sam")
    assert st.reads == 2000
    client.wait_for_workers(2, timeout=60)


def test_worker_without_the_index_is_one_clear_error(tmp_path):
    from pymap import distributed as pd
    with pytest.raises(InputError, match="every worker can read"):
        pd._worker_pipeline("run", REF, AlignOptions(), str(tmp_path / "missing.idx"), False)


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
