#!/usr/bin/env python
"""Seeding sensitivity and speed against a simulator's truth (Mason -oa SAM).

    python scripts/eval_seeding.py REF.fa READS.fq TRUTH.sam [--grid] [-o key=value ...]

For each setting: index build time and size, query time per read (both strands): wall time with
all threads (us_read) and CPU time of one thread (cpu_us_read), the fraction of reads whose true (strand, position) is among the candidates (a
candidate within +-max_edits of the truth's POS counts), and the mean candidates per read.
Prints a Markdown table (--json for machine-readable rows).
"""
import argparse
import dataclasses
import gzip
import itertools
import json
import sys
import time

import numba
import numpy as np

from pymap.kernels.encoding import ASCII_TO_CODE
from pymap.batch import ReadBatch
from pymap.plugins import parse_options
from pymap.reference import load_reference
from pymap.seeders.neighborhood import NeighborhoodSeeder


def make_batch(seqs):
    """ReadBatch from a list of bytes sequences (names/quals left empty)."""
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = ASCII_TO_CODE[np.frombuffer(b"".join(seqs), dtype=np.uint8)]
    fields = {f.name for f in dataclasses.fields(ReadBatch)}
    kw = {"codes": codes, "offsets": offsets, "quals": np.zeros(0, np.uint8)}
    if "name_offsets" in fields:
        kw["names"] = np.zeros(0, np.uint8)
        kw["name_offsets"] = np.zeros(len(seqs) + 1, np.int64)
    else:
        kw["names"] = [b""] * len(seqs)
    return ReadBatch(**kw)


def read_fastq(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    names, seqs = [], []
    with opener(path, "rb") as fh:
        for i, line in enumerate(fh):
            if i % 4 == 0:
                names.append(line[1:].split()[0].decode())
            elif i % 4 == 1:
                seqs.append(line.strip())
    return names, seqs


def read_truth(path, ref):
    """{name: (strand, global pos, NM)} of primary alignments of a SAM file."""
    contig = {n: int(o) for n, o in zip(ref.names, ref.offsets[:-1])}
    out = {}
    with open(path) as fh:
        for line in fh:
            if line.startswith("@"):
                continue
            f = line.split("\t", 6)
            flag = int(f[1])
            if flag & 0x904 or f[2] not in contig:
                continue
            nm = line.find("\tNM:i:")
            nm = int(line[nm + 6:].split("\t", 1)[0]) if nm >= 0 else 0
            out[f[0]] = (1 if flag & 16 else 0, contig[f[2]] + int(f[3]) - 1, nm)
    return out


def evaluate(seeder, index, batch, truth_strand, truth_pos, max_e, threads):
    n = len(batch)
    me = np.full(n, max_e, np.int32)
    seeder.candidates(index, batch, me)  # warm-up (compile, derived layouts)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        c = seeder.candidates(index, batch, me)
        times.append(time.perf_counter() - t)
    t_all = min(times)
    # CPU time of one thread per read: robust to other processes sharing the machine
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    cpu = []
    for _ in range(3):
        t = time.process_time()
        seeder.candidates(index, batch, me)
        cpu.append(time.process_time() - t)
    t_one = min(cpu)
    numba.set_num_threads(prev)
    ok = (c.strand == truth_strand[c.read]) & (np.abs(c.pos - truth_pos[c.read]) <= max_e)
    found = np.zeros(n, bool)
    found[c.read[ok]] = True
    return {"found": found.mean() * 100, "cands": len(c) / n, "us_read": t_all / n * 1e6,
            "cpu_us_read": t_one / n * 1e6, "threads": threads}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("reads")
    ap.add_argument("truth")
    ap.add_argument("-e", "--max-edits", type=int, default=5)
    ap.add_argument("-o", "--option", action="append", default=[], help="seeder option key=value")
    ap.add_argument("--grid", action="append", default=[],
                    help="key=v1,v2,... to sweep (several --grid make a product)")
    ap.add_argument("--max-nm", type=int, default=1 << 30,
                    help="only reads whose true alignment has at most this many edits (NM)")
    ap.add_argument("-n", type=int, default=0, help="use the first n reads")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    ref = load_reference(args.ref)
    names, seqs = read_fastq(args.reads)
    if args.n:
        names, seqs = names[:args.n], seqs[:args.n]
    truth = read_truth(args.truth, ref)
    keep = [i for i, nm in enumerate(names) if nm in truth and truth[nm][2] <= args.max_nm]
    seqs = [seqs[i] for i in keep]
    ts = np.array([truth[names[i]][0] for i in keep], np.int8)
    tp = np.array([truth[names[i]][1] for i in keep], np.int64)
    batch = make_batch(seqs)
    base = parse_options(args.option)
    grid = [(k.replace("-", "_"), [parse_options([f"k={x}"])["k"] for x in vals.split(",")])
            for k, vals in (g.split("=", 1) for g in args.grid)]
    rows = []
    indexes = {}
    build_keys = ("seed_len", "nb_len", "pattern")
    for combo in itertools.product(*[vals for _, vals in grid]) if grid else [()]:
        opts = dict(base)
        opts.update({k: v for (k, _), v in zip(grid, combo)})
        seeder = NeighborhoodSeeder(**opts)
        bkey = tuple(seeder.build_params(len(ref.codes))[k] for k in ("pattern", "nb_len"))
        if bkey not in indexes:
            t = time.perf_counter()
            index = seeder.build_index(ref)
            indexes.clear()
            indexes[bkey] = (index, time.perf_counter() - t)
        index, t_build = indexes[bkey]
        res = evaluate(seeder, index, batch, ts, tp, args.max_edits, numba.get_num_threads())
        row = {"pattern": bkey[0], "ls": index.care.size, "ln": bkey[1], "step": seeder.step,
               "e_nb": seeder.e_nb, "max_cands": seeder.max_cands, "min_hits": seeder.min_hits,
               "lookup": seeder.lookup, "build_s": t_build, "index_MiB": index.nbytes / 2 ** 20, **res}
        rows.append(row)
        if not args.json:
            print(" | ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    cols = ["pattern", "ln", "step", "e_nb", "max_cands", "min_hits", "lookup", "build_s", "index_MiB",
            "us_read", "cpu_us_read", "found", "cands"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
