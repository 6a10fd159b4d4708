#!/usr/bin/env python
"""Neighborhood matching speed: perfect hash vs binary search vs list (MAROSE paper, Figure 8).

    python scripts/bench_nbindex.py [--ref FASTA | --random N] [--seed-len 4] [--nb-len 4,8,16]
                                    [--errors 0,1,2] [--json]

Blocks nb_block(s) are built from a reference (default: E. coli from /work/shared/data) with a seed
length of 4 as in the paper (256 blocks of ~18,000 positions for E. coli). Queries are neighborhoods
that follow a seed in the reference (so the exact one is always a member). The task is the paper's:
decide whether the neighborhood b, or any neighborhood within e substitutions, is in nb_block(s);
positions are not retrieved.

  * phf, bsearch: one exact lookup per degenerated neighborhood of Pi_e(b) (|Pi_e(b)| lookups).
  * list: one scan of the whole block, comparing each entry with b under the Hamming distance <= e.
  * phf-staged: the perfect hash with the lookups of 64 queries done stage by stage (all block rows,
    then all g, then all slots), as the mapper's query kernel does: the fixed access pattern of the
    perfect hash lets independent cache misses overlap on a CPU (the GPU hides them with threads).

Single thread. Reported per method: neighborhoods b processed per second (each with its whole Pi_e(b):
the unit of Figure 8), the exact lookups per second (phf, bsearch) or block entries compared per
second (list), and the speed-up over the list.
"""
import argparse
import json
import os
import sys
import time

import numba
import numpy as np
from numba import njit

from pymap.kernels.nbindex_build import build
from pymap.kernels.nbindex_layouts import bsearch_layout, list_layout
from pymap.kernels.nbindex_query import (degenerate, hamming2, lookup_bsearch, lookup_phf, n_variants_nb,
                                         phf_stages)

DEFAULT_REF = "/work/shared/data/ecoli_MG1655.fa.gz"
MODES = {"phf": 0, "bsearch": 1, "list": 2}
MODE_PHF, MODE_BSEARCH, MODE_LIST = 0, 1, 2


@njit(cache=True, nogil=True)
def bench_lookups(mode, qkeys, qnbs, ln, e_nb, blk, g, slots, blk_d, dist, pos_nb):
    """Membership test of each query neighborhood (with its degenerated set Pi_e) in its block, single
    thread. Returns (queries with a hit, exact lookups made, block entries scanned)."""
    nvar = n_variants_nb(ln, e_nb)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    found = 0
    lookups = 0
    scanned = 0
    for i in range(qkeys.shape[0]):
        key = qkeys[i]
        nb = qnbs[i]
        hit = False
        if mode == MODE_LIST:
            a = np.int64(slots[np.int64(blk[key, 0]), 1])
            b = np.int64(slots[np.int64(blk[key + 1, 0]), 1])
            for j in range(a, b):
                if hamming2(np.int64(pos_nb[j]), nb, e_nb):
                    hit = True
            scanned += b - a
        else:
            nv = degenerate(nb, ln, e_nb, var, combo)
            lookups += nv
            for t in range(nv):
                if mode == MODE_PHF:
                    a, b = lookup_phf(blk, g, slots, key, var[t])
                else:
                    a, b = lookup_bsearch(blk_d, dist, key, var[t])
                if b > a:
                    hit = True
        if hit:
            found += 1
    return found, lookups, scanned


@njit(cache=True, nogil=True)
def bench_lookups_staged(qkeys, qnbs, ln, e_nb, blk, g, slots, batch):
    """bench_lookups for 'phf' with the lookups of `batch` queries done stage by stage (phf_stages),
    as the mapper's query kernel does."""
    nvar = n_variants_nb(ln, e_nb)
    var = np.empty(nvar, np.int64)
    combo = np.empty(max(e_nb, 1), np.int64)
    work = np.empty((batch * nvar, 7), np.int64)
    found = 0
    lookups = 0
    n = qkeys.shape[0]
    for q0 in range(0, n, batch):
        q1 = min(n, q0 + batch)
        ni = 0
        for i in range(q0, q1):
            nv = degenerate(qnbs[i], ln, e_nb, var, combo)
            for t in range(nv):
                work[ni, 0] = i
                work[ni, 1] = qkeys[i]
                work[ni, 2] = var[t]
                ni += 1
        lookups += ni
        phf_stages(blk, g, slots, work, ni)
        last = -1
        for t in range(ni):
            if work[t, 6] > work[t, 5] and work[t, 0] != last:
                last = work[t, 0]
                found += 1
    return found, lookups, 0


def load_codes(args):
    if args.random:
        rng = np.random.default_rng(args.seed)
        codes = rng.integers(0, 4, args.random).astype(np.uint8)
        return codes, np.array([0, codes.shape[0]], np.int64), f"random {args.random:,} bp"
    from pymap.reference import load_reference
    ref = load_reference(args.ref)
    return ref.codes, ref.offsets, f"{os.path.basename(args.ref)} ({ref.codes.shape[0]:,} bp)"


def make_queries(codes, index_pos, ls, ln, n, rng):
    """(seed key, neighborhood) of n random indexed positions."""
    p = rng.choice(index_pos, size=n).astype(np.int64)
    keys = np.zeros(n, np.int64)
    nbs = np.zeros(n, np.int64)
    for q in range(ls):
        keys = keys * 4 + codes[p + q]
    for q in range(ls, ls + ln):
        nbs = nbs * 4 + codes[p + q]
    return keys, nbs


def run(name, keys, nbs, ln, e, arrays, blk_d, dist, pos_nb):
    if name == "phf-staged":
        return bench_lookups_staged(keys, nbs, ln, e, arrays["blk"], arrays["g"], arrays["slots"], 64)
    return bench_lookups(MODES[name], keys, nbs, ln, e, arrays["blk"], arrays["g"], arrays["slots"],
                           blk_d, dist, pos_nb)


def timed(name, keys, nbs, ln, e, arrays, blk_d, dist, pos_nb, min_time):
    """Run the membership kernel on growing prefixes of the queries until min_time of CPU is spent
    (CPU time of this single thread: robust to other processes on the machine)."""
    run(name, keys[:8], nbs[:8], ln, e, arrays, blk_d, dist, pos_nb)   # compile / warm
    n = 64
    while True:
        n = min(n, keys.shape[0])
        t = time.process_time()
        found, lookups, scanned = run(name, keys[:n], nbs[:n], ln, e, arrays, blk_d, dist, pos_nb)
        dt = time.process_time() - t
        if dt >= min_time or n == keys.shape[0]:
            return n, dt, found, lookups, scanned
        n *= 4


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default=DEFAULT_REF, help="FASTA(.gz) reference (default: E. coli)")
    ap.add_argument("--random", type=int, default=0, metavar="N", help="use N bp of random sequence instead")
    ap.add_argument("--seed-len", type=int, default=4, help="seed length ls (paper: 4)")
    ap.add_argument("--nb-len", default="4,8,16", help="neighborhood lengths ln (comma list)")
    ap.add_argument("--errors", default="0,1,2", help="substitutions e in the degenerated neighborhoods")
    ap.add_argument("--queries", type=int, default=200_000, help="query pool size")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    args = ap.parse_args(argv)

    numba.set_num_threads(1)
    codes, offsets, label = load_codes(args)
    rng = np.random.default_rng(args.seed)
    ls = args.seed_len
    rows = []
    for ln in [int(x) for x in args.nb_len.split(",")]:
        t = time.perf_counter()
        arrays = build(codes, offsets, np.arange(ls), ls, ln)
        t_build = time.perf_counter() - t
        blk_d, dist = bsearch_layout(arrays["blk"], arrays["slots"])
        pos_nb = list_layout(arrays["slots"], arrays["pos"].shape[0])
        keys, nbs = make_queries(codes, arrays["pos"], ls, ln, args.queries, rng)
        blocks = np.diff(arrays["slots"][arrays["blk"][:, 0].astype(np.int64), 1].astype(np.int64))
        for e in [int(x) for x in args.errors.split(",")]:
            if e > ln:
                continue
            base = None
            for name in ("list", "bsearch", "phf", "phf-staged"):
                n, dt, found, lookups, scanned = timed(name, keys, nbs, ln, e, arrays, blk_d, dist, pos_nb,
                                                       args.min_time)
                rate = n / dt
                if base is None:
                    base = rate
                rows.append({"reference": label, "ls": ls, "ln": ln, "e": e, "method": name,
                             "mean_block": float(blocks[blocks > 0].mean()), "queries": n,
                             "found": found, "nb_per_s": rate,
                             "ops_per_s": (scanned if name == "list" else lookups) / dt,
                             "speedup_vs_list": rate / base, "build_s": t_build})
                if not args.json:
                    print(f"ln={ln} e={e} {name:8s} {rate:14,.0f} nb/s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"Neighborhood matching, {label}, ls = {ls}, single thread "
          f"(mean block {rows[0]['mean_block']:,.0f} entries)\n")
    print("| ln | e | method | neighborhoods b / s | lookups or entries / s | vs list |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        unit = "entries" if r["method"] == "list" else "lookups"
        print(f"| {r['ln']} | {r['e']} | {r['method']} | {r['nb_per_s']:,.0f} | "
              f"{r['ops_per_s']:,.0f} {unit} | {r['speedup_vs_list']:.1f}x |")


if __name__ == "__main__":
    main()
