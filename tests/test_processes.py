"""Mapping in worker processes of this machine (--processes N): the records of one process, single
and paired, plain and gzip input, unsorted and sorted; a failing chunk or a killed worker stops the
run with one error, no output file and no worker left behind."""
import gzip
import multiprocessing
import os
import signal
import threading
import time

import pysam
import pytest

from pymap import api, cli
from pymap.errors import InputError, OutputError, UsageError, WorkerLost
from pymap.options import AlignOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = os.path.join(ROOT, "examples", "lambda.fa")
READS = os.path.join(ROOT, "examples", "reads.fq.gz")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = tmp_path_factory.mktemp("procs_plain") / "reads.fq"
    path.write_bytes(gzip.decompress(open(READS, "rb").read()))
    return str(path)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """Read 1 and read 2 files cut from the lambda genome (insert 300, FR)."""
    from conftest import lambda_pairs
    return lambda_pairs(tmp_path_factory.mktemp("procs_pairs"), 600, 9)


def _body(path):
    with pysam.AlignmentFile(str(path), reference_filename=REF) as f:
        return [r.to_string() for r in f]


def _align(out, reads=READS, mates=None, **kw):
    kw.setdefault("progress", False)
    return api.align(REF, reads, out=str(out), mates_path=mates, options=AlignOptions(**kw), summary=False)


def _workers_left():
    return [p for p in multiprocessing.active_children() if p.name.startswith("pymap-worker")]


def test_summary_allowance_as_one_process(tmp_path):
    """The run summary's filter allowance: "e" under --all (the filter at 2e), the fixed one under
    --filter-slack, as one process says it."""
    for kw in ({"report_all": True}, {"filter_slack": 1}):
        one = _align(tmp_path / "one.sam", **kw).filter_slack
        assert one == ("e" if "report_all" in kw else "1")
        assert _align(tmp_path / "p2.sam", processes=2, batch_size=500, threads=2, **kw).filter_slack == one


def test_summary_counts_of_a_filter_chain_as_one_process(tmp_path):
    """What each stage of a filter chain accepted: the same from worker processes as from one."""
    one = _align(tmp_path / "one.sam", filter="shouji,sneakysnake").filter_stages
    assert list(one) == ["shouji", "sneakysnake"] and one["shouji"] >= one["sneakysnake"] > 0
    assert _align(tmp_path / "p2.sam", filter="shouji,sneakysnake", processes=2, batch_size=500,
                  threads=2).filter_stages == one
    assert "filter accepts shouji " in api.summary_line(_align(tmp_path / "s.sam", filter="shouji,sneakysnake"))


@pytest.mark.parametrize("reads", ["plain", "gzip"])
def test_single_end_same_records_as_one_process(plain, tmp_path, reads):
    path = plain if reads == "plain" else READS
    st1 = _align(tmp_path / "one.sam", path)
    for n, size in ((2, 150), (3, 77)):
        st = _align(tmp_path / f"p{n}.sam", path, processes=n, batch_size=size, threads=2)
        assert _body(tmp_path / f"p{n}.sam") == _body(tmp_path / "one.sam")
        assert (st.reads, st.mapped, st.aligned) == (st1.reads, st1.mapped, st1.aligned)
    assert not _workers_left()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]        # no scratch left


def test_workers_write_a_plain_sam_file_themselves(plain, tmp_path, monkeypatch):
    """Into a SAM file the workers write their records at the offsets the client steps over
    (outfile.HeldPart), no part file copied by the client; compressed output takes the part files.
    The records are those of one process either way."""
    from pymap import outfile
    calls = {"held": 0, "part": 0}
    for cls, key in ((outfile.HeldPart, "held"), (outfile.PartFile, "part")):
        def counted(self, fh, _copy=cls.copy_to, _key=key):
            calls[_key] += 1
            return _copy(self, fh)
        monkeypatch.setattr(cls, "copy_to", counted)
    _align(tmp_path / "one.sam", plain)
    _align(tmp_path / "p.sam", plain, processes=2, batch_size=100, threads=2)
    assert calls == {"held": 20, "part": 0}
    assert open(tmp_path / "p.sam", "rb").read() == open(tmp_path / "one.sam", "rb").read()
    _align(tmp_path / "p.sam.gz", plain, processes=2, batch_size=100, threads=2)
    assert calls == {"held": 20, "part": 20}
    assert _body(tmp_path / "p.sam.gz") == _body(tmp_path / "one.sam")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]


def test_pairs_learned_model_and_sorted_output(pairs, tmp_path):
    r1, r2 = pairs
    st1 = _align(tmp_path / "one.bam", r1, r2, sort=True)
    st = _align(tmp_path / "p.bam", r1, r2, sort=True, processes=2, batch_size=200)
    assert _body(tmp_path / "p.bam") == _body(tmp_path / "one.bam")
    assert st.proper_pairs == st1.proper_pairs > 500
    assert os.path.exists(tmp_path / "p.bam.bai")


def test_a_pending_model_is_waited_for_or_cancelled():
    """A worker's chunks of pairs sent while the run learns its insert-size model wait for it after
    their hits (chunks.PendingModel); a run that ends first ends their wait with an error."""
    import threading

    from pymap import chunks
    got = []
    pending = chunks.PendingModel()
    t = threading.Thread(target=lambda: got.append(pending.wait()))
    t.start()
    t.join(0.05)
    assert t.is_alive() and not got                 # nothing until the model comes
    pending.set("model")
    t.join()
    assert got == ["model"]
    cancelled = chunks.PendingModel()
    cancelled.cancel()
    with pytest.raises(RuntimeError, match="insert-size model"):
        cancelled.wait()


def test_interleaved_pairs_from_stdin_like_input(pairs, tmp_path):
    """Interleaved gzip mates: parsed here, sent to the workers as arrays (while the workers learn the
    insert-size model, only as many as they take at once: a task none takes held this process in
    put(), deaf to the model)."""
    r1, r2 = pairs
    lines1, lines2 = open(r1).read().splitlines(), open(r2).read().splitlines()
    inter = "".join("\n".join(lines1[i:i + 4] + lines2[i:i + 4]) + "\n" for i in range(0, len(lines1), 4))
    path = tmp_path / "inter.fq.gz"
    path.write_bytes(gzip.compress(inter.encode()))
    _align(tmp_path / "one.sam", str(path), interleaved=True)
    _align(tmp_path / "p.sam", str(path), interleaved=True, processes=2, batch_size=300)
    assert _body(tmp_path / "p.sam") == _body(tmp_path / "one.sam")


def test_bad_record_in_a_worker_chunk_is_one_input_error(plain, tmp_path):
    bad = tmp_path / "bad.fq"
    text = open(plain).read().splitlines(keepends=True)
    bad.write_text("".join(text[:400]) + "@x\nACGT\n+\nII\n" + "".join(text[400:800]))
    with pytest.raises(InputError, match="record 101: sequence and quality lengths differ"):
        _align(tmp_path / "out.sam", str(bad), processes=2, batch_size=30)
    assert not os.path.exists(tmp_path / "out.sam")
    assert not _workers_left()


def test_a_killed_worker_stops_the_run(plain, tmp_path, monkeypatch):
    """A worker killed while mapping (the out-of-memory killer): WorkerLost, no output file."""
    from pymap import processes
    start = processes.ProcessRun.__init__

    def init_then_kill(self, *args, **kw):
        start(self, *args, **kw)
        victim = self.workers[0]
        threading.Timer(0.3, lambda: os.kill(victim.pid, signal.SIGKILL)).start()

    monkeypatch.setattr(processes.ProcessRun, "__init__", init_then_kill)
    big = tmp_path / "big.fq"
    big.write_text(open(plain).read() * 40)
    t = time.monotonic()
    with pytest.raises(WorkerLost, match="worker process 0 ended before its chunks were mapped .killed by SIGKILL"):
        _align(tmp_path / "out.sam", str(big), processes=2, batch_size=20)
    assert time.monotonic() - t < 60
    assert not os.path.exists(tmp_path / "out.sam")
    assert not _workers_left()


def test_a_worker_killed_holding_records_stops_the_run(plain, tmp_path, monkeypatch):
    """A worker killed between mapping a chunk and writing it into the output: WorkerLost, no
    output file."""
    from pymap import processes
    place = processes.ProcessRun._place
    killed = []

    def kill_then_place(self, k, offset, allocated):
        if not killed:          # once: a second kill could find the first one's worker reaped (ESRCH)
            killed.append(k)
            os.kill(self.workers[self.holder[k]].pid, signal.SIGKILL)
        place(self, k, offset, allocated)

    monkeypatch.setattr(processes.ProcessRun, "_place", kill_then_place)
    with pytest.raises(WorkerLost, match="worker process [01] ended before its chunks were mapped .killed by SIGKILL"):
        _align(tmp_path / "out.sam", plain, processes=2, batch_size=100)
    assert not os.path.exists(tmp_path / "out.sam")
    assert not _workers_left()


def test_a_worker_lost_waiting_for_a_task_does_not_hold_the_others(plain, tmp_path, monkeypatch):
    """A worker killed while its thread waits for a task keeps the task queue's lock for good: the
    other one, done with the only chunk, can no longer take the None that ends it. The run ends
    without waiting STOP_GRACE for it: complete (the records of one process) where the chunk was
    placed before the client saw the death, else WorkerLost and no output; no worker left."""
    from pymap import processes
    place = processes.ProcessRun._place

    def kill_the_idle_one_then_place(self, k, offset, allocated):
        idle = 1 - self.holder[k]           # one chunk: the other worker's thread waits in tasks.get()
        os.kill(self.workers[idle].pid, signal.SIGKILL)
        place(self, k, offset, allocated)

    monkeypatch.setattr(processes.ProcessRun, "_place", kill_the_idle_one_then_place)
    out, t = tmp_path / "out.sam", time.monotonic()
    try:
        _align(out, plain, processes=2, threads=2, batch_size=100_000)
    except WorkerLost as exc:
        assert "killed by SIGKILL" in str(exc) and not os.path.exists(out)
    else:
        _align(tmp_path / "one.sam", plain)
        assert _body(out) == _body(tmp_path / "one.sam")
    assert time.monotonic() - t < processes.STOP_GRACE - 2
    assert not _workers_left()


def test_a_held_part_that_cannot_be_written_is_one_output_error(plain, tmp_path, monkeypatch):
    """A worker that cannot write its records into the output: one error naming the output, no
    file, no worker left."""
    from pymap import processes
    place = processes.ProcessRun._place

    def place_elsewhere(self, k, offset, allocated):
        self.place_path = str(tmp_path / "gone" / "out.sam.part")
        place(self, k, offset, allocated)

    monkeypatch.setattr(processes.ProcessRun, "_place", place_elsewhere)
    with pytest.raises(OutputError, match=r"out.sam: cannot write \(No such file or directory\)"):
        _align(tmp_path / "out.sam", plain, processes=2, batch_size=100)
    assert not os.path.exists(tmp_path / "out.sam")
    assert not _workers_left()


@pytest.mark.parametrize("case", ["mapped", "not allocated", "no shared mappings"])
def test_a_held_part_is_written_into_its_stretch_of_the_file(tmp_path, monkeypatch, case):
    """A worker copies its pieces through a mapping of their stretch of the file where the client
    allocated it, from an offset on no page boundary; where it did not (its file system cannot), or
    the file system maps no files, it writes them (pwrite). The bytes around them stay as they were."""
    import mmap

    import numpy as np
    from pymap import processes
    maps, real = [], mmap.mmap

    def counted(*args, **kw):
        if case == "no shared mappings":
            raise OSError(19, "No such device")
        maps.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(processes.mmap, "mmap", counted)
    path = tmp_path / "out.sam"
    path.write_bytes(b"h" * 5000)
    pieces = [np.frombuffer(b"r1\tx\n", np.uint8), np.zeros(0, np.uint8), np.full(9000, ord("s"), np.uint8)]
    size = sum(len(p) for p in pieces)
    with open(path, "r+b") as fh:
        os.ftruncate(fh.fileno(), 6001 + size + 7)
    fd = os.open(path, os.O_RDWR)
    try:
        processes._write_at(fd, pieces, 6001, case != "not allocated")
        processes._write_at(fd, [], 4096, case != "not allocated")      # nothing, from a page's start
    finally:
        os.close(fd)
    assert path.read_bytes() == b"h" * 5000 + bytes(1001) + b"r1\tx\n" + b"s" * 9000 + bytes(7)
    assert len(maps) == (case == "mapped")


def _failing_fallocate(err):
    """A stand-in for the C library's fallocate that fails with errno err."""
    import ctypes

    def call(fd, mode, offset, size):
        ctypes.set_errno(err)
        return -1
    return call


def test_a_stretch_that_cannot_be_allocated_is_one_output_error(plain, tmp_path, monkeypatch):
    """A full disk met while allocating a held part's stretch: one error naming the output, no file,
    no worker left (the worker never maps pages the disk cannot give)."""
    import errno

    from pymap import outfile
    monkeypatch.setattr(outfile, "_fallocate", lambda: _failing_fallocate(errno.ENOSPC))
    with pytest.raises(OutputError, match=r"out.sam: cannot write \(No space left on device\)$"):
        _align(tmp_path / "out.sam", plain, processes=2, batch_size=100)
    assert not os.path.exists(tmp_path / "out.sam")
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".")]
    assert not _workers_left()


def test_a_held_part_has_its_stretch_allocated_before_it_is_placed(tmp_path, monkeypatch):
    """The client allocates a held part's stretch of the output (a worker's mapping can neither grow
    the file nor report a full disk) before it has the worker write there, and steps past it. Where
    the file system cannot allocate, it grows nothing and says so; the worker then writes."""
    import errno

    from pymap import outfile
    seen = []
    with open(tmp_path / "out.sam", "wb") as fh:
        fh.write(b"@HD\tVN:1.6\n")
        outfile.HeldPart(100000, lambda at, allocated: seen.append((at, allocated, os.fstat(fh.fileno())))).copy_to(fh)
        outfile.HeldPart(0, lambda at, allocated: seen.append((at, allocated, None))).copy_to(fh)
        assert fh.tell() == 11 + 100000
        for err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            monkeypatch.setattr(outfile, "_fallocate", lambda: _failing_fallocate(err))
            outfile.HeldPart(5, lambda at, allocated: seen.append((at, allocated, os.fstat(fh.fileno())))).copy_to(fh)
    (at, allocated, st), (at0, allocated0, _), *cannot = seen
    assert (at, at0) == (11, 11 + 100000) and (allocated, allocated0) == (True, False)
    assert st.st_size == 11 + 100000 and st.st_blocks * 512 >= 100000
    assert [(at, allocated, st.st_size) for at, allocated, st in cannot] == \
        [(11 + 100000 + 5 * k, False, 11 + 100000) for k in range(3)]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("processes", [1, 2])
def test_a_full_disk_is_one_output_error(plain, processes):
    with pytest.raises(OutputError, match=r"^/dev/full: cannot write \(No space left on device\)$"):
        _align("/dev/full", plain, processes=processes, batch_size=500)
    assert not _workers_left()


@pytest.mark.parametrize("bad", [0, 65, True, "2"])
def test_processes_must_be_a_count(bad):
    with pytest.raises(UsageError, match="processes must be"):
        AlignOptions(processes=bad).validate()


def test_processes_and_dask_exclude_each_other():
    with pytest.raises(UsageError, match="exclude each other"):
        AlignOptions(processes=2, dask="local:2").validate()


def test_cli_names_the_workers(plain, tmp_path, capsys):
    out = tmp_path / "cli.sam"
    assert cli.main(["align", "--no-progress", "-t", "2", "--processes", "2", "--batch-size", "100", REF, plain,
                     "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: processes: 2 workers (1 thread, 1 batch side by side each)" in err
    assert "chunks in" in err
    _align(tmp_path / "one.sam", plain)
    assert _body(out) == _body(tmp_path / "one.sam")


@pytest.mark.parametrize("visible,want", [(None, ["0", "1"]), ("2,3", ["2", "3"]), ("GPU-a, GPU-b", ["GPU-a", "GPU-b"])])
def test_workers_are_spread_over_the_visible_gpus(monkeypatch, visible, want):
    """Worker k gets GPU k mod their number, named as this process's CUDA_VISIBLE_DEVICES names it."""
    from pymap import workers
    monkeypatch.setattr(workers, "gpu_count", lambda: 2)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert workers.visible_gpus(AlignOptions(device="gpu")) == want
    assert workers.visible_gpus(AlignOptions(device="cpu")) is None


def test_worker_threads_keep_their_own_gpu(monkeypatch):
    """A worker's threads sharing a GPU pipeline: each thread's chunks run on one GPU slot of its own
    (cuda_support.batch_on_gpu), the same at every chunk; nothing of the kind on the CPU."""
    import contextlib
    import types

    from pymap import chunks
    from pymap.kernels import cuda_support
    asked = []

    @contextlib.contextmanager
    def fake_batch_on_gpu(k):
        asked.append((threading.get_ident(), k))
        yield

    monkeypatch.setattr(cuda_support, "batch_on_gpu", fake_batch_on_gpu)
    gpu_pipe = types.SimpleNamespace(run_stats=types.SimpleNamespace(on_gpu=("seed",)), concurrent=True)
    cpu_pipe = types.SimpleNamespace(run_stats=types.SimpleNamespace(on_gpu=()), concurrent=True)

    together = threading.Barrier(3)         # all alive at once: no thread's ident reused by another

    def work():
        together.wait()
        for _ in range(3):
            with chunks._on_thread_gpu(gpu_pipe), chunks._on_thread_gpu(cpu_pipe):
                pass
        together.wait()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(asked) == 9
    by_thread = {}
    for ident, k in asked:
        by_thread.setdefault(ident, set()).add(k)
    assert all(len(ks) == 1 for ks in by_thread.values())
    assert len({next(iter(ks)) for ks in by_thread.values()}) == 3


@pytest.mark.parametrize("device,threads,processes,want", [(None, 16, 1, 3), (None, 16, 4, 2), (None, 16, 16, 1),
                                                           ("gpu", 16, 1, 12), ("gpu", 16, 2, 6)])
def test_each_worker_maps_its_threads_batches_side_by_side(device, threads, processes, want):
    """--processes N: each worker has 1/N of the threads, and by default the batches side by side of a
    process of that many threads; --batches given counts per worker."""
    opt = AlignOptions(device=device, threads=threads, processes=processes).validate()
    assert (opt.process_threads, opt.batches) == (max(1, threads // processes), want)
    assert AlignOptions(threads=16, processes=4, batches=5).validate().batches == 5


def test_cli_stdin_to_stdout_and_one_error_line(tmp_path):
    """Reads on stdin (parsed here, sent to the workers) and SAM on stdout, as one process writes them;
    a malformed record on stdin: one error line, exit 1, no traceback."""
    import subprocess
    import sys
    data = gzip.decompress(open(READS, "rb").read())

    def run(*args, stdin):
        return subprocess.run([sys.executable, "-m", "pymap.cli", "align", "--no-progress", *args, REF, "-"],
                              input=stdin, capture_output=True, timeout=300)

    one, two = run(stdin=data), run("--processes", "2", "--batch-size", "300", stdin=data)
    assert one.returncode == two.returncode == 0, two.stderr
    body = [[l for l in r.stdout.splitlines() if not l.startswith(b"@PG")] for r in (one, two)]
    assert body[0] == body[1] and len(body[0]) > 2000
    bad = run("--processes", "2", "--batch-size", "300", stdin=data[:40000] + b"@x\nACGT\n+\nII\n" + data[40000:])
    err = bad.stderr.decode().splitlines()
    assert bad.returncode == 1
    assert [l for l in err if not l.startswith("[pymap]")] == [l for l in err if l.startswith("pymap: error:")]
    assert len([l for l in err if l.startswith("pymap: error:")]) == 1 and "Traceback" not in bad.stderr.decode()


@pytest.fixture
def fake_gpus(monkeypatch):
    """A visible GPU count for auto_count (the workers themselves find none and map on the CPU), and
    a threshold of 1 KB instead of 1 GiB."""
    from pymap import workers

    def visible(n):
        monkeypatch.setattr(workers, "gpu_count", lambda: n)
    monkeypatch.setattr(workers, "AUTO_MIN_BYTES", 1000)
    return visible


@pytest.mark.parametrize("gpus,threads,want,want_pairs", [
    (1, 16, 2, 4), (1, 32, 2, 4), (1, 15, 1, 3), (1, 8, 1, 2), (1, 4, 1, 1), (2, 16, 2, 4), (2, 32, 4, 8),
    (2, 8, 2, 2), (0, 16, 1, 1)])
def test_auto_takes_workers_for_a_gpu_run_of_large_plain_fastq(
        fake_gpus, plain, pairs, gpus, threads, want, want_pairs):
    """processes "auto": a worker a GPU, two a GPU where each has 8 threads; pairs against a
    reference of up to 1 GiB up to four a GPU of 4 threads each; one process without a GPU."""
    from pymap.workers import auto_count
    fake_gpus(gpus)
    assert auto_count("gpu", threads, [plain], reference=REF) == want
    assert auto_count("auto", threads, list(pairs), paired=True, reference=REF) == want_pairs
    assert auto_count("auto", threads, [plain], paired=True, reference=REF) == want_pairs    # interleaved


def test_auto_takes_fewer_pair_workers_against_a_large_or_unknown_reference(
        fake_gpus, pairs, tmp_path, monkeypatch):
    """Each worker keeps its own copy of the index and reference on its GPU: against a reference file
    over the limit (a gzip one counted four times its size) or one that cannot be read, pairs take
    the single reads' two workers a GPU."""
    from pymap import workers
    fake_gpus(1)
    monkeypatch.setattr(workers, "AUTO_PAIR_MAX_REFERENCE", 1000)
    small, packed = tmp_path / "small.fa", tmp_path / "packed.fa.gz"
    small.write_bytes(b">c\n" + b"ACGT" * 200 + b"\n")
    packed.write_bytes(b"\x1f\x8b" + bytes(298))            # read as 300 bytes of gzip: 1,200 of FASTA
    assert workers.auto_count("gpu", 16, list(pairs), paired=True, reference=str(small)) == 4
    assert workers.auto_count("gpu", 16, list(pairs), paired=True, reference=str(packed)) == 2
    assert workers.auto_count("gpu", 16, list(pairs), paired=True, reference=str(tmp_path / "none.fa")) == 2
    assert workers.auto_count("gpu", 16, list(pairs), paired=True, reference=REF) == 2    # 49 kB


def test_gpus_are_counted_as_numba_would(monkeypatch):
    """The driver's own count: one under Numba's CUDA simulator, none where Numba's CUDA is off or
    there are no NVIDIA device files (this machine, unless it has a GPU); asked once a process, on a
    thread of its own where count_soon started it."""
    import glob

    from pymap import workers
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert workers._ask_driver() == 1
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    monkeypatch.setenv("NUMBA_DISABLE_CUDA", "1")
    assert workers._ask_driver() == 0
    monkeypatch.delenv("NUMBA_DISABLE_CUDA")
    monkeypatch.setattr(glob, "glob", lambda pattern: [])
    monkeypatch.setattr(os.path, "exists", lambda path: False)
    assert workers._ask_driver() == 0
    monkeypatch.undo()
    monkeypatch.setattr(workers, "_ANSWER", [])
    asked = []
    monkeypatch.setattr(workers, "_ask_driver", lambda: asked.append(1) or 3)
    workers.count_gpus_soon()
    assert workers.gpu_count() == 3 and workers.gpu_count() == 3 and asked == [1]


def test_auto_maps_here_otherwise(fake_gpus, plain, tmp_path):
    """The CPU, Dask, stdin, gzip and small inputs map in this process."""
    from pymap.workers import auto_count
    fake_gpus(1)
    assert auto_count("cpu", 16, [plain]) == 1
    assert auto_count(None, 16, [plain]) == 1
    assert auto_count("gpu", 16, [plain], dask="local:2") == 1
    assert auto_count("gpu", 16, ["-"]) == 1
    assert auto_count("gpu", 16, [READS]) == 1                 # gzip
    small = tmp_path / "small.fq"
    small.write_bytes(open(plain, "rb").read(900))
    assert auto_count("gpu", 16, [small]) == 1


def test_auto_run_takes_workers_with_the_same_records(fake_gpus, plain, tmp_path, monkeypatch, capsys):
    """An "auto" run (the command line's default) that qualifies maps in worker processes, records as one
    process; where the index cannot be saved for them, it maps in this process instead (an explicit
    count fails)."""
    from pymap import chunks
    from pymap.errors import IndexNotOnDisk
    fake_gpus(1)

    def run(name, **kw):
        api.align(REF, plain, out=str(tmp_path / name), options=AlignOptions(progress=False, batch_size=500, **kw))
        return capsys.readouterr().err

    err = run("auto.sam", device="auto", threads=16, processes="auto")
    assert "note: processes (auto): 2 workers on 1 GPU (8 threads" in err
    _align(tmp_path / "one.sam", plain, processes=1, batch_size=500)
    assert _body(tmp_path / "auto.sam") == _body(tmp_path / "one.sam")

    def not_saved(*args):
        raise IndexNotOnDisk("the index could not be saved")
    monkeypatch.setattr(chunks, "client_load", not_saved)
    assert "processes:" not in run("here.sam", device="auto", threads=16, processes="auto")
    assert _body(tmp_path / "here.sam") == _body(tmp_path / "one.sam")
    with pytest.raises(IndexNotOnDisk):
        run("fail.sam", device="auto", threads=16, processes=2)
    assert _workers_left() == []


def test_auto_pairs_run_takes_four_workers_with_the_same_records(fake_gpus, pairs, tmp_path, capsys):
    """An "auto" run of paired reads against a small reference takes four workers a GPU of 4 threads;
    its records are one process's."""
    fake_gpus(1)
    r1, r2 = pairs
    api.align(REF, r1, out=str(tmp_path / "auto.sam"), mates_path=r2,
              options=AlignOptions(progress=False, device="auto", threads=16, processes="auto", batch_size=300))
    assert "note: processes (auto): 4 workers on 1 GPU (4 threads" in capsys.readouterr().err
    _align(tmp_path / "one.sam", r1, r2, processes=1, batch_size=300)
    assert _body(tmp_path / "auto.sam") == _body(tmp_path / "one.sam")
    assert _workers_left() == []


def test_cli_takes_auto_or_a_count():
    assert cli._processes("auto") == "auto" and cli._processes("3") == 3
    assert cli.main(["align", "--processes", "many", REF, READS]) == 2


@pytest.fixture
def read_only_ref(tmp_path, monkeypatch):
    """A copy of the reference in a directory this process may not write to (os.access says so)."""
    import shutil
    (tmp_path / "ro").mkdir()
    ref = tmp_path / "ro" / "ref.fa"
    shutil.copy(REF, ref)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(ref.parent) and mode == os.W_OK
                        else real_access(p, mode, **kw))
    return ref


def test_an_index_that_cannot_be_saved_is_said_before_it_is_built(tmp_path, monkeypatch, plain, read_only_ref):
    """Worker processes need the index on disk: where it is missing and its directory not writable,
    the client says so before building it (an auto run then maps here, building it once)."""
    from pymap import api as api_mod
    from pymap.errors import IndexNotOnDisk
    ref = read_only_ref
    built = []
    real_open = api_mod.open_index
    monkeypatch.setattr(api_mod, "open_index", lambda *a, **kw: built.append(1) or real_open(*a, **kw))
    opts = AlignOptions(progress=False, processes=2, batch_size=500)
    with pytest.raises(IndexNotOnDisk, match="cannot be saved there"):
        api.align(str(ref), plain, out=str(tmp_path / "out.sam"), options=opts, summary=False)
    assert built == [] and not (tmp_path / "out.sam").exists() and _workers_left() == []


def test_cli_auto_without_a_gpu_maps_here(plain, tmp_path, monkeypatch, capsys):
    """The command line's default on a large input with --device auto and no GPU: the workers' server
    may start early, but the run maps in this process, with the records of one."""
    from pymap import workers
    monkeypatch.setattr(workers, "AUTO_MIN_BYTES", 1000)
    monkeypatch.setattr(workers, "gpu_count", lambda: 0)
    out = tmp_path / "cli.sam"
    assert cli.main(["align", "--no-progress", "--device", "auto", "-t", "2", REF, plain, "-o", str(out)]) == 0
    assert "processes" not in capsys.readouterr().err
    _align(tmp_path / "one.sam", plain)
    assert _body(out) == _body(tmp_path / "one.sam") and _workers_left() == []


def test_the_command_line_decides_on_workers_before_it_imports_numpy():
    """What the command line needs to start the workers' server and count the GPUs (pymap.cli,
    pymap.workers) imports neither NumPy, Numba nor Dask: the server's imports and the driver's start
    overlap this process's own."""
    import subprocess
    import sys
    code = ("import sys, pymap.cli, pymap.workers\n"
            "print([m for m in ('numpy', 'numba', 'distributed') if m in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_an_auto_run_without_a_saved_index_maps_here_loading_the_reference_once(
        fake_gpus, tmp_path, monkeypatch, plain, read_only_ref):
    """Where the index cannot be saved for the workers, an auto run maps in this process with the
    reference the client had loaded (a large genome's FASTA parsed once, not twice)."""
    from pymap import api as api_mod
    fake_gpus(1)
    ref = read_only_ref
    loads = []
    real_open = api_mod.open_reference
    monkeypatch.setattr(api_mod, "open_reference", lambda *a, **kw: loads.append(1) or real_open(*a, **kw))
    opts = AlignOptions(progress=False, device="auto", threads=16, processes="auto", batch_size=500)
    api.align(str(ref), plain, out=str(tmp_path / "auto.sam"), options=opts, summary=False)
    assert loads == [1] and _workers_left() == []
    _align(tmp_path / "one.sam", plain, batch_size=500)
    assert _body(tmp_path / "auto.sam") == _body(tmp_path / "one.sam")


def test_the_workers_server_loads_the_parse_the_workers_call(plain):
    """The server the workers are forked from (pymap.worker_preload) loads the FASTQ parse's kernels
    for the arrays a worker reads (reads.read_span): a worker's parse then adds no signature, which
    the first run with workers would compile in the server (a read-only buffer's, 1.2-2.4 s)."""
    import json
    import subprocess
    import sys
    code = ("import json\n"
            "from numba.core.registry import CPUDispatcher\n"
            "from pymap import jitcache\n"
            "from pymap.kernels import fastq\n"
            "jitcache.warm_numba()\n"
            "kernels = {n: k for n, k in vars(fastq).items() if isinstance(k, CPUDispatcher)}\n"
            "warmed = {n: len(k.signatures) for n, k in kernels.items()}\n"
            "from pymap.reads import read_span\n"
            f"end = sum(len(line) for line in open({plain!r}, 'rb').readlines()[:40])\n"
            f"batch = read_span({plain!r}, 0, end, False, 0, 'reads')\n"
            "print(json.dumps([len(batch), warmed, {n: len(k.signatures) for n, k in kernels.items()}]))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    n, warmed, after = json.loads(res.stdout.strip().splitlines()[-1])
    assert n > 0 and sum(warmed.values()) >= 2 and after == warmed
