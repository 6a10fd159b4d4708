#!/usr/bin/env python3
"""How fast P processes write into one output file, the ways pymap's worker processes could write
their SAM text (pymap.processes), each process its own stretch:

- `pwrite`: os.pwrite into one file (the workers until the fortieth session): the file's lock lets
  one write in at a time;
- `files`: a file each, pwrite (the ceiling: nothing shared, but not one output);
- `mapped`: the parent allocates every stretch (pymap's own outfile.allocate: fallocate, which also
  grows the file), then each process copies into a shared mapping of its own (pymap's workers now);
  the rate counts the parent's allocation, and the copies' rate alone follows it (pymap's client
  allocates while the workers map reads). A file system that cannot allocate ends the run: pymap's
  workers would pwrite there;
- `mapped-unallocated`: the file grown with ftruncate only; the mappings' page faults allocate.

Every mode writes through pymap's own worker write (processes._write_at), in 8 MiB pieces.

    python3 scripts/bench_file_writes.py --dir /dev/shm --procs 1 2 4 8 --mib 1024

A Markdown table of GB/s on stdout (of every byte written, the allocation included); each file is
checked to hold what was written, then removed.
"""
import argparse
import multiprocessing
import os
import time

import numpy as np

from pymap.outfile import allocate
from pymap.processes import _write_at

PIECE = 8 << 20
MODES = ["pwrite", "files", "mapped", "mapped-unallocated"]


def _writer(mode, path, k, size, go):
    """Process k writes its stretch by pymap's own worker write (processes._write_at): mapped where
    the stretch is allocated (or the file merely grown), else by pwrite."""
    piece = np.full(PIECE, k + 1, np.uint8)
    pieces = [piece[:min(PIECE, size - at)] for at in range(0, size, PIECE)]
    go.wait()
    if mode == "files":
        fd, base = os.open(f"{path}.{k}", os.O_WRONLY | os.O_CREAT, 0o644), 0
    else:
        fd, base = os.open(path, os.O_RDWR), k * size
    try:
        _write_at(fd, pieces, base, mode.startswith("mapped"))
    finally:
        os.close(fd)


def run(mode, procs, size, path):
    """Seconds for procs processes to write size bytes each by mode (the allocation included), and
    the allocation's seconds alone."""
    with open(path, "wb"):
        pass
    go = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_writer, args=(mode, path, k, size, go)) for k in range(procs)]
    for w in workers:
        w.start()
    time.sleep(0.5)                                     # every process started and waiting
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDWR)
    if mode == "mapped" and not allocate(fd, 0, size * procs):
        raise SystemExit(f"{path}: its file system cannot allocate (pymap's workers write by pwrite there)")
    if mode == "mapped-unallocated":
        os.ftruncate(fd, size * procs)
    os.close(fd)
    allocated = time.perf_counter() - t0
    go.set()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - t0
    if any(w.exitcode for w in workers):
        raise SystemExit(f"{mode}: a writer failed")
    _check(mode, procs, size, path)
    return seconds, allocated


def _check(mode, procs, size, path):
    """Each process's stretch holds its bytes (SystemExit where not); the files are then removed."""
    for k in range(procs):
        name, at = (f"{path}.{k}", 0) if mode == "files" else (path, k * size)
        with open(name, "rb") as fh:
            fh.seek(at)
            got = np.frombuffer(fh.read(size), np.uint8)
        if len(got) != size or (got != k + 1).any():
            raise SystemExit(f"{mode}: process {k}'s stretch does not hold what it wrote")
    for name in [path] + [f"{path}.{k}" for k in range(procs)]:
        if os.path.exists(name):
            os.unlink(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/dev/shm", help="where the files go (default /dev/shm)")
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--mib", type=int, default=1024, help="MiB each process writes")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    args = ap.parse_args()
    size, path = args.mib << 20, os.path.join(args.dir, f"bench_file_writes.{os.getpid()}")
    print(f"{args.mib} MiB a process into {args.dir}, GB/s of all bytes written (allocation included)\n")
    print("| processes | " + " | ".join(args.modes) + " |")
    print("| ---: |" + " ---: |" * len(args.modes))
    for procs in args.procs:
        cells = []
        for mode in args.modes:
            seconds, allocated = run(mode, procs, size, path)
            cell = f"{procs * size / seconds / 1e9:.2f}"
            if mode == "mapped":
                cell += f" (copies {procs * size / (seconds - allocated) / 1e9:.2f})"
            cells.append(cell)
        print(f"| {procs} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
