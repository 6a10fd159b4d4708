#!/usr/bin/env python
"""`pymap count` against `jellyfish count -C`: the same counts, wall time and peak memory.

    python scripts/bench_count.py --genome ecoli=/tmp/ecoli.fa --genome big=/tmp/synth104.fa \\
        [-k 21 25 31] [-t 2] [--work /tmp/bench_count] [--repeats 1] [--jellyfish jellyfish]

Per genome (a plain FASTA: jellyfish reads no gzip) and k, each command runs on its own, timed from
start to exit, with its peak resident memory (VmHWM, polled):

  jf count      jellyfish count -C -m K -s SIZE -t T -o DB GENOME   (SIZE: the genome's length; the
                binary database is written to disk)
  jf dump       jellyfish dump -c -o TXT DB                          (KMER COUNT text)
  jf histo      jellyfish histo -o HISTO DB
  pymap count   pymap count -k K -t T -o TXT GENOME                  (KMER<TAB>COUNT text: reading,
                counting and writing, Python start-up and the kernel cache load included)
  pymap histo   pymap count -k K -t T --histo -o HISTO GENOME

Like for like: 'pymap count' against 'jf count + jf dump' (sequence in, text out) and 'pymap histo'
against 'jf count + jf histo'; 'jf count' alone is shown too. Peak memory of a pair of jellyfish
commands is the larger of the two. Before timing, pymap runs once on a small file (its kernels are
compiled then, not in the timed runs) and each genome is read once (file cache warm for everyone).
With --repeats N each command runs N times and the fastest run counts.

--gpu also times the CUDA kernels of kernels/minimizers_cuda.py (m-mers, minimizers, super k-mer
flags, device arrays in and out, best of 5 after a warm-up) against their CPU twins (one thread) on the
first genome, and checks that they agree.

Equality: both text outputs are parsed into (k-mer, count) arrays, sorted and compared in full; the
histograms are compared byte for byte. Results: a Markdown table on stdout, JSON with --json FILE.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from numba import njit


def _hwm_mb(pid):
    """VmHWM of a running process in MB (0 once it has exited). The peak of the process's own memory
    since its exec: unlike ru_maxrss it does not inherit the parent's size at fork."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run(cmd):
    """(wall seconds, peak resident MB) of a command; raises on failure. The peak is VmHWM read every
    5 ms while it runs (a high-water mark: only growth in its last 5 ms could be missed)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _hwm_mb(proc.pid))
        time.sleep(0.005)
    wall = time.perf_counter() - t
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return wall, peak


def best_of(n, cmd):
    runs = [run(cmd) for _ in range(n)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


@njit(cache=True)
def _parse_counts(buf, k):
    """KMER<space or tab>COUNT lines -> (2-bit k-mers, counts)."""
    n = 0
    for i in range(buf.shape[0]):
        n += buf[i] == 10
    kmers = np.empty(n, np.uint64)
    counts = np.empty(n, np.int64)
    code = np.full(256, 255, np.uint8)
    code[65] = 0
    code[67] = 1
    code[71] = 2
    code[84] = 3
    pos = 0
    for r in range(n):
        x = np.uint64(0)
        for t in range(k):
            c = code[buf[pos + t]]
            if c > 3:
                raise ValueError("not a k-mer")
            x = (x << np.uint64(2)) | np.uint64(c)
        pos += k + 1                       # the separator
        c = 0
        while buf[pos] != 10:
            c = c * 10 + (buf[pos] - 48)
            pos += 1
        pos += 1
        kmers[r] = x
        counts[r] = c
    return kmers, counts


def load_counts(path, k):
    kmers, counts = _parse_counts(np.fromfile(path, np.uint8), k)
    order = np.argsort(kmers, kind="stable")
    return kmers[order], counts[order]


def same_counts(a, b, k):
    ka, ca = load_counts(a, k)
    kb, cb = load_counts(b, k)
    return bool(ka.shape == kb.shape and np.array_equal(ka, kb) and np.array_equal(ca, cb)), int(ka.shape[0])


def genome_length(path):
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.startswith(b">"):
                n += len(line.rstrip())
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--genome", action="append", required=True, metavar="NAME=FASTA")
    ap.add_argument("-k", type=int, nargs="+", default=[21, 25, 31])
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/bench_count")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--jellyfish", default="jellyfish")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--keep", action="store_true", help="keep the count files")
    ap.add_argument("--gpu", action="store_true", help="time the CUDA minimizer kernels too")
    a = ap.parse_args()
    jf = shutil.which(a.jellyfish) or a.jellyfish
    os.makedirs(a.work, exist_ok=True)
    pymap = [sys.executable, "-m", "pymap.cli", "count"]
    t = str(a.threads)
    # warm-up: kernels compiled (or loaded) once, outside the timed runs
    small = os.path.join(a.work, "warm.fa")
    with open(small, "w") as fh:
        fh.write(">w\n" + "ACGTTGCAAGGCTTAACGATCGATTTACG" * 50 + "\n")
    warm_out = os.path.join(a.work, "warm.out")         # a regular file, never a device
    for k in a.k:
        run(pymap + ["-k", str(k), "-t", t, "-o", warm_out, small])
        run(pymap + ["-k", str(k), "-t", t, "--histo", "-o", warm_out, small])
    if a.gpu:
        print(gpu_kernels(a.genome[0].split("=", 1)[1]))
    rows = []
    for spec in a.genome:
        name, path = spec.split("=", 1)
        size = genome_length(path)
        with open(path, "rb") as fh:                      # warm the file cache
            while fh.read(1 << 24):
                pass
        for k in a.k:
            db = os.path.join(a.work, f"{name}.{k}.jf")
            jtxt = os.path.join(a.work, f"{name}.{k}.jf.txt")
            jhist = os.path.join(a.work, f"{name}.{k}.jf.histo")
            ptxt = os.path.join(a.work, f"{name}.{k}.pymap.txt")
            phist = os.path.join(a.work, f"{name}.{k}.pymap.histo")
            r = {"genome": name, "bases": size, "k": k, "threads": a.threads}
            r["jf_count"] = best_of(a.repeats, [jf, "count", "-C", "-m", str(k), "-s", str(size), "-t", t,
                                                "-o", db, path])
            r["jf_dump"] = best_of(a.repeats, [jf, "dump", "-c", "-o", jtxt, db])
            r["jf_histo"] = best_of(a.repeats, [jf, "histo", "-o", jhist, db])
            r["pymap_count"] = best_of(a.repeats, pymap + ["-k", str(k), "-t", t, "-o", ptxt, path])
            r["pymap_histo"] = best_of(a.repeats,
                                       pymap + ["-k", str(k), "-t", t, "--histo", "-o", phist, path])
            r["equal"], r["distinct"] = same_counts(ptxt, jtxt, k)
            with open(jhist, "rb") as f1, open(phist, "rb") as f2:
                r["histo_equal"] = f1.read() == f2.read()
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
            if a.json:
                with open(a.json, "w") as fh:
                    json.dump(rows, fh, indent=1)
            if not a.keep:
                for p in (db, jtxt, ptxt):
                    os.unlink(p)
    print(table(rows))


def gpu_kernels(path, k=31, m=11):
    """Markdown lines: the CUDA minimizer kernels against the CPU ones on one genome."""
    from pymap.count import iter_pieces
    from pymap.kernels import minimizers as MZ
    from pymap.kernels import minimizers_cuda as MC
    from pymap.kernels.cuda_support import cuda
    pieces = list(iter_pieces(path, k, max_piece=1 << 40))
    codes = np.concatenate([c for c, _ in pieces])
    starts = np.cumsum([0] + [len(c) for c, _ in pieces])
    offsets = np.concatenate([[0]] + [o[1:] + starts[i] for i, (_, o) in enumerate(pieces)])
    n = codes.shape[0]
    d_codes, d_off = cuda.to_device(codes), cuda.to_device(offsets.astype(np.int64))

    def best(f, sync=False):
        f()
        b = 1e9
        for _ in range(5):
            t = time.perf_counter()
            f()
            if sync:
                cuda.synchronize()
            b = min(b, time.perf_counter() - t)
        return b

    r = MZ.RULE_RAPIDGKC
    cpu_mm = best(lambda: MZ.canonical_mmers(codes, offsets, m, r))
    cpu_min = best(lambda: MZ.kmer_minimizers(codes, offsets, k, m, r))
    cpu_skm = best(lambda: MZ.super_kmers(codes, offsets, k, m, r))
    mm = cuda.device_array(n, np.int64)
    val = cuda.device_array(n, np.int64)
    pos = cuda.device_array(n, np.int64)
    f1 = cuda.device_array(n, np.uint8)
    f2 = cuda.device_array(n, np.uint8)
    g = MC._blocks(n), MC.THREADS_PER_BLOCK
    gpu_mm = best(lambda: MC.canonical_mmers_kernel[g](d_codes, d_off, m, r, mm), True)
    gpu_min = best(lambda: MC.kmer_minimizers_kernel[g](mm, d_off, k, m, val, pos), True)
    gpu_flags = best(lambda: MC.run_flags_kernel[g](val, d_off, f1, f2), True)
    gpu_skm = best(lambda: MC.super_kmers_cuda(d_codes, d_off, k, m, r))
    cpu, gpu = MZ.super_kmers(codes, offsets, k, m, r), MC.super_kmers_cuda(d_codes, d_off, k, m, r)
    same = all(np.array_equal(x, y) for x, y in zip(cpu, gpu))

    def ms(x):
        return f"{1e3 * x:.2f}"

    return ("| step (k=31, m=11, rapidgkc) | CPU, 1 thread, ms | GPU kernel, ms |\n| --- | ---: | ---: |\n"
            f"| canonical m-mers | {ms(cpu_mm)} | {ms(gpu_mm)} |\n"
            f"| + window minimizers | {ms(cpu_min)} | {ms(gpu_min)} (minimizers only) |\n"
            f"| + super k-mers | {ms(cpu_skm)} | {ms(gpu_flags)} (flags only); {ms(gpu_skm)} all steps with "
            f"host compaction |\n\n{n:,} positions; GPU output equal to the CPU's: {same}\n")


def table(rows):
    head = ("| genome | k | distinct k-mers | counts equal | jf count s | jf count + dump s | pymap count s "
            "| speed-up | jf count + histo s | pymap --histo s | speed-up | peak MB jf | peak MB pymap "
            "| memory ratio |\n| --- | ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: |\n")
    lines = []
    for r in rows:
        jc, jd, jh = r["jf_count"], r["jf_dump"], r["jf_histo"]
        pc, ph = r["pymap_count"], r["pymap_histo"]
        jtext = jc[0] + jd[0]
        jhis = jc[0] + jh[0]
        jmem = max(jc[1], jd[1])
        lines.append(f"| {r['genome']} ({r['bases'] / 1e6:.1f} Mbp) | {r['k']} | {r['distinct']:,} | "
                     f"{'yes' if r['equal'] and r['histo_equal'] else 'NO'} | {jc[0]:.2f} | {jtext:.2f} | "
                     f"{pc[0]:.2f} | {jtext / pc[0]:.2f}x | {jhis:.2f} | {ph[0]:.2f} | {jhis / ph[0]:.2f}x | "
                     f"{jmem:.0f} | {pc[1]:.0f} | {pc[1] / jmem:.2f} |")
    return head + "\n".join(lines)


if __name__ == "__main__":
    main()
