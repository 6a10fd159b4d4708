#!/usr/bin/env python3
"""Output and scale-out costs in one run, as ratios (issue 16's targets):

- SAM vs BAM vs sorted BAM from `pymap align -t T`;
- `samtools sort -@T` on the same SAM (the peer of --sort);
- `--dask local:N` against `-t T` (one process);

each configuration `--repeats` times in turn (interleaved, so load drifts hit all of them), medians
reported, every output checked to hold the same records.

    python3 scripts/bench_output.py --ref /tmp/ecoli.fa --reads /tmp/r1M.fq -t 2 --repeats 2 \\
        --workdir /tmp/bench_output --md out.md
    python3 scripts/bench_output.py ... --only dask --workers 1,2,4,8,16   # scaling of workers
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time


def run(cmd, log):
    t = time.perf_counter()
    with open(log, "w") as fh:
        subprocess.run(cmd, check=True, stdout=fh, stderr=subprocess.STDOUT)
    return time.perf_counter() - t


def dask_timing(log):
    """(seconds until the first chunk came back, seconds in all, seconds a chunk took on average,
    fraction of the time workers were busy from their first chunk to their last, CPU seconds a chunk's
    thread used (user + system)) from a --dask run's summary note."""
    import re
    text = open(log).read()
    m = re.search(r"first chunk back after ([0-9.]+) s, \d+ chunks in ([0-9.]+) s", text)
    c = re.search(r"a chunk took ([0-9.]+) s on average, workers busy (\d+) %", text)
    u = re.search(r"thread used ([0-9.]+) s user and ([0-9.]+) s system", text)
    if not (m and c and u):
        return None, None, None, None, None
    return (float(m.group(1)), float(m.group(2)), float(c.group(1)), int(c.group(2)) / 100,
            float(u.group(1)) + float(u.group(2)))


def records_digest(path, ref):
    """(a digest of the records whatever their order, header and @PG aside; how many): outputs of
    every configuration must agree. BAM and CRAM are turned into SAM by pysam into a file first
    (its captured stdout stops at 2 GiB)."""
    import hashlib
    if not path.endswith(".sam"):
        sam = path + ".view.sam"
        subprocess.run([sys.executable, "-c", "import sys, pysam; pysam.view('-T', sys.argv[1], '-o', sys.argv[3], "
                        "sys.argv[2], catch_stdout=False)", ref, path, sam], check=True)
        path = sam
    total, n = 0, 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.startswith(b"@"):
                total += int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")
                n += 1
    if path.endswith(".view.sam"):
        os.unlink(path)
    return total % (1 << 64), n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--reads", required=True)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--only", choices=["output", "dask", "all"], default="all")
    ap.add_argument("--workers", default=None, help="Dask worker counts to run, e.g. 1,2,4 (default: -t)")
    ap.add_argument("--batch-size", type=int, default=20000)
    ap.add_argument("--samtools", default=shutil.which("samtools") or "pysam",
                    help="the samtools of the peer sort: a path, or 'pysam' for pysam's own (default: samtools "
                         "on PATH, else pysam)")
    ap.add_argument("--workdir", default="/tmp/bench_output")
    ap.add_argument("--md")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    os.makedirs(a.workdir, exist_ok=True)
    w = lambda name: os.path.join(a.workdir, name)
    pymap = [sys.executable, "-m", "pymap.cli", "align", a.ref, a.reads, "--no-progress",
             "--batch-size", str(a.batch_size)]
    subprocess.run([sys.executable, "-m", "pymap.cli", "index", a.ref], check=True, capture_output=True)
    configs = {}
    if a.only in ("output", "all"):
        configs["sam"] = pymap + ["-t", str(a.threads), "-o", w("out.sam")]
        configs["bam"] = pymap + ["-t", str(a.threads), "-o", w("out.bam")]
        configs["sorted bam"] = pymap + ["-t", str(a.threads), "-o", w("sorted.bam"), "--sort"]
        samtools = ([sys.executable, "-c", "import sys, pysam; pysam.samtools.sort(*sys.argv[1:], catch_stdout=False)"]
                    if a.samtools == "pysam" else [a.samtools, "sort"])
        configs["samtools sort"] = samtools + ["-@", str(a.threads), "-o", w("peer.bam"), w("out.sam")]
    if a.only in ("dask", "all"):
        configs.setdefault("sam", pymap + ["-t", str(a.threads), "-o", w("out.sam")])
        for n in (a.workers or str(a.threads)).split(","):
            configs[f"dask local:{n}"] = pymap + ["--dask", f"local:{n}", "-o", w(f"dask{n}.sam")]
    times = {k: [] for k in configs}
    for r in range(a.repeats):
        for name, cmd in configs.items():
            times[name].append(run(cmd, w(name.replace(" ", "_").replace(":", "") + ".log")))
            print(f"round {r + 1}: {name} {times[name][-1]:.2f} s", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in times.items()}
    outputs = {"sam": "out.sam", "bam": "out.bam", "sorted bam": "sorted.bam", "samtools sort": "peer.bam",
               **{k: f"dask{k.split(':')[1]}.sam" for k in configs if k.startswith("dask")}}
    digests = {k: records_digest(w(outputs[k]), a.ref) for k in configs}
    same = len({d for d, _ in digests.values()}) == 1
    n_reads = digests["sam"][1]
    rows = [f"| configuration | median s | runs | vs SAM -t {a.threads} |", "|---|---:|---|---:|"]
    for k in configs:
        rows.append(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.1f}' for x in times[k])} | {med[k] / med['sam']:.3f} |")
    lines = rows + ["", f"{n_reads} records; every output holds the same records: {same}"]
    if "bam" in med:
        lines.append(f"BAM over SAM: {100 * (med['bam'] / med['sam'] - 1):+.1f} %")
    if "sorted bam" in med and "samtools sort" in med:
        lines.append(f"--sort costs {med['sorted bam'] - med['sam']:.2f} s over SAM; samtools sort -@{a.threads} "
                     f"on that SAM {med['samtools sort']:.2f} s")
    # after its first chunk a Dask run is in its steady state: start-up (cluster, worker imports,
    # index loads) is reported apart from the throughput that follows
    steady = {}
    for k in configs:
        if k.startswith("dask"):
            first, total, chunk, busy, cpu = dask_timing(w(k.replace(" ", "_").replace(":", "") + ".log"))
            if first is not None and total > first:
                steady[k] = (first, (n_reads - a.batch_size) / (total - first), chunk, busy, cpu)
    for k in configs:
        if k.startswith("dask"):
            n = int(k.split(":")[1])
            eff = (f"; scaling efficiency {med['dask local:1'] / (n * med[k]):.2f} (vs local:1)"
                   if "dask local:1" in med else "")
            if k in steady:
                eff += f"; first chunk after {steady[k][0]:.1f} s, then {steady[k][1]:,.0f} reads/s"
                if "dask local:1" in steady:
                    eff += f" (steady-state efficiency {steady[k][1] / (n * steady['dask local:1'][1]):.2f})"
                    # the loss split: each chunk mapped slower (contention), or workers waiting (the
                    # client, the scheduler, the ramp and the tail of the run)
                    eff += (f"; a chunk {steady[k][2]:.3f} s, {steady[k][4]:.3f} s of CPU (local:1 "
                            f"{steady['dask local:1'][2]:.3f} s, {steady['dask local:1'][4]:.3f} s of CPU), "
                            f"workers busy {100 * steady[k][3]:.0f} %")
            lines.append(f"{k}: throughput {med['sam'] / med[k]:.3f} x that of -t {a.threads}; per worker "
                         f"{n_reads / med[k] / n:,.0f} reads/s{eff}")
    text = "\n".join(lines)
    print(text)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text + "\n")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"times": times, "median": med, "same_records": same, "reads": n_reads}, fh, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
