"""The GPU stages of `--device gpu` give the CPU's results: under the CUDA simulator here, on a real
GPU where one is present. Each check runs in a child process (the simulator is chosen at import)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent


def run_check(name, where, *args):
    if where == "gpu":
        from pymap.kernels.cuda_support import cuda_available
        if not cuda_available():
            pytest.skip("no CUDA GPU here (the simulator variant runs instead)")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if where == "simulator" else "0")
    code = (f"import sys, json; sys.path.insert(0, {str(TESTS)!r}); import test_gpu_stages as t; "
            f"print(json.dumps(t.{name}(*{list(args)!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------- extender

def simulated_candidates(rng, n):
    """(ref, items, read codes, read offsets) of n candidates from affine_sim.simulate."""
    from affine_sim import simulate
    ref, items = simulate(rng, n, lengths=(20, 35, 70, 150))
    reads = [np.asarray(it[0], np.uint8) for it in items]
    off = np.zeros(len(reads) + 1, np.int64)
    off[1:] = np.cumsum([r.size for r in reads])
    return ref, items, np.concatenate(reads), off


def compare_affine(n):
    """The CUDA affine kernel against the CPU one on simulated candidates (clips, indels, N, contig
    ends, long CIGARs), with and without traceback, and per-candidate minimum scores."""
    from pymap.kernels import affine as ka
    from pymap.kernels.affine_cuda import affine_align_cuda
    from pymap.kernels.encoding import reverse_complement_batch
    rng = np.random.default_rng(3)
    ref, items, codes, off = simulated_candidates(rng, n)
    long_read = ref[100:340].copy()                        # many short gaps: a CIGAR over the slot
    for x in range(200, 0, -20):
        long_read = np.insert(long_read, x, (long_read[x] + 1) % 4) if (x // 20) % 2 else np.delete(long_read, x)
    codes = np.concatenate([codes, long_read])
    off = np.append(off, off[-1] + long_read.size)
    args = (codes, reverse_complement_batch(codes, off), off, ref,
            np.arange(len(items) + 1, dtype=np.int32), np.array([it[2] for it in items] + [0], np.int8),
            np.array([it[3] for it in items] + [100], np.int64), np.array([it[4] for it in items] + [0], np.int64),
            np.array([it[5] for it in items] + [400], np.int64), np.array([it[6] for it in items] + [8], np.int32))
    min_score = rng.integers(1, 40, len(items) + 1)
    # decoys: reads at random places of their window, whose raised minimum the q-gram bound rules out:
    # the CPU settles them with it (kernels.affine._hopeless), the GPU by its DP's early stop
    # (the same answer: no alignment)
    lengths = np.diff(off)
    decoy = rng.choice(len(items), len(items) // 4, replace=False)
    d_pos = np.array([rng.integers(args[7][i], max(args[7][i] + 1, args[8][i] - lengths[i])) for i in decoy])
    args = tuple(np.concatenate([a, v]) for a, v in zip(args[4:], (
        decoy.astype(np.int32), args[5][decoy], d_pos, args[7][decoy], args[8][decoy], args[9][decoy])))
    args = (codes, reverse_complement_batch(codes, off), off, ref) + args
    min_score = np.concatenate([min_score, lengths[decoy] // 2 + 10])
    P = ka.make_params()
    bits = np.zeros(1 << (2 * ka.Q - 6), np.uint64)
    hopeless = sum(
        bool(ka._hopeless(args[1] if args[5][j] else args[0], off[args[4][j]], lengths[args[4][j]], ref, args[6][j],
                          args[7][j], args[8][j], args[9][j], P, min_score[j], bits))
        for j in range(len(min_score)) if min_score[j] > P[ka.P_MIN])
    bad = []
    aligned = int((ka.affine_align(*args)[1] >= 0).sum())
    for kw in ({}, {"min_score": min_score}):
        cpu = ka.affine_align(*args, **kw)
        gpu = affine_align_cuda(*args, **kw)
        bad += [f"align {i}" for i, (a, b) in enumerate(zip(cpu, gpu)) if not np.array_equal(a, b)]
        gpu_s = affine_align_cuda(*args, traceback=False, **kw)
        bad += [f"scores {i}" for i, (a, b) in enumerate(zip(cpu[:6], gpu_s)) if not np.array_equal(a, b)]
    nops = np.diff(cpu[7])
    return {"bad": bad, "n": len(min_score), "long": int((nops > 16).sum()), "aligned": aligned,
            "hopeless": int(hopeless), "decoys": len(decoy)}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_affine_cuda_equals_cpu(where):
    res = run_check("compare_affine", where, 300 if where == "simulator" else 20000)
    assert res["bad"] == []
    assert res["long"] >= 1 and res["aligned"] > res["n"] // 2
    assert res["hopeless"] >= res["decoys"] // 2


def compare_banded(n):
    """The CUDA edit-distance kernel against the CPU one on simulated candidates (indels, N, contig
    ends, junk ends), thresholds 0 and 6 to 20 (bands of one and of two words), with and without
    traceback."""
    from pymap.kernels import banded as kb
    from pymap.kernels.banded_cuda import banded_cuda
    from pymap.kernels.encoding import reverse_complement_batch
    rng = np.random.default_rng(5)
    ref, items, codes, off = simulated_candidates(rng, n)
    e = np.where(rng.random(len(items)) < 0.1, 0, rng.integers(6, 21, len(items))).astype(np.int32)
    args = (codes, reverse_complement_batch(codes, off), off, ref, np.arange(len(items), dtype=np.int32),
            np.array([it[2] for it in items], np.int8), np.array([it[3] for it in items], np.int64),
            np.array([it[4] for it in items], np.int64), np.array([it[5] for it in items], np.int64), e)
    cpu = kb.banded_align(*args)
    gpu = banded_cuda(*args)
    bad = [f"align {i}" for i, (a, b) in enumerate(zip(cpu, gpu)) if not np.array_equal(a, b)]
    gpu_d = banded_cuda(*args, traceback=False)
    bad += [f"distances {i}" for i, (a, b) in enumerate(zip(kb.banded_distances(*args), gpu_d))
            if not np.array_equal(a, b)]
    found = cpu[0] >= 0
    return {"bad": bad, "n": len(items), "aligned": int(found.sum()), "wide": int((found & (e >= 16)).sum())}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_banded_cuda_equals_cpu(where):
    res = run_check("compare_banded", where, 300 if where == "simulator" else 20000)
    assert res["bad"] == []
    assert res["aligned"] > res["n"] // 3 and res["wide"] >= 1


# ------------------------------------------------------------------------------------- selection

def simulated_hits(rng, n_reads):
    """select_hits' inputs for n_reads reads of 36-150 bases (every fifth a poly-A or CA repeat),
    0-6 hits each sorted by (read, strand, start): loci of several nearby starts (merged), equal
    bests (the seeded pick), clipped parts (periodic ones, chimeric halves), a read without hits."""
    lengths = rng.choice([36, 60, 100, 150], n_reads)
    reads = []
    for i, L in enumerate(lengths):
        r = rng.integers(0, 4, L).astype(np.uint8)
        if i % 5 == 0:
            r[L // 3:] = 0 if i % 10 == 0 else np.tile(np.array([1, 0], np.uint8), L)[:L - L // 3]
        reads.append(r)
    offsets = np.zeros(n_reads + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    rows = []
    for r, L in enumerate(lengths):
        for _ in range(int(rng.integers(0, 7))):
            strand, start = int(rng.integers(0, 2)), int(rng.integers(0, 5000))
            for d in range(int(rng.integers(1, 4))):           # nearby starts: one locus
                qb = int(rng.choice([0, 0, L // 3, L // 2]))
                qe = int(rng.choice([L, L, L - L // 4, L // 2])) if qb < L // 2 else L
                score = int(rng.integers(20, 2 * L)) if rng.random() < 0.7 else 2 * L - 10
                rows.append((r, strand, start + int(rng.integers(0, 6)) * d, score, qb, max(qe, qb + 1)))
    rows = sorted(set(rows), key=lambda x: (x[0], x[1], x[2]))
    types = (np.int64, np.int8, np.int64, np.int32, np.int64, np.int64)
    cols = [np.array([x[k] for x in rows], t) for k, t in enumerate(types)]
    maxe = np.ceil(lengths * 0.1).astype(np.int64)
    return cols, np.concatenate(reads), offsets, maxe


def compare_select(n_reads):
    """Selection on the GPU (kernels.select_cuda) against the CPU's threads, for the scoring and the
    edit-distance scales: every output equal."""
    from pymap.kernels.select import NO_SHADOW, periodic_part, select_hits
    rng = np.random.default_rng(11)
    cols, codes, offsets, maxe = simulated_hits(rng, n_reads)
    bad, merged, periodic = [], 0, 0
    for match, unit in ((1, 5), (0, 1)):
        args = (*cols, codes, offsets, maxe, match, unit, 7, 3)
        cpu, gpu = select_hits(*args), select_hits(*args, device="gpu")
        bad += [name for name, a, b in zip("best n_best sub has_sub mapq primary keep shadow".split(), cpu, gpu)
                if a.dtype != b.dtype or not np.array_equal(a, b)]
        keep, shadow = cpu[6], cpu[7]
        merged = int((~keep).sum())
        periodic = sum(periodic_part(codes, offsets[r], offsets[r + 1] - offsets[r], b, e)
                       for r, b, e in zip(cols[0][keep], cols[4][keep], cols[5][keep]))
        assert (shadow[~keep] == NO_SHADOW).all()
    return {"bad": bad, "hits": int(cols[0].size), "merged": merged, "periodic": periodic}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_select_cuda_equals_cpu(where):
    res = run_check("compare_select", where, 120 if where == "simulator" else 50000)
    assert res["bad"] == []
    assert res["hits"] > 200 and res["merged"] > 10 and res["periodic"] > 0


# ------------------------------------------------------------------------------------- seeder

def sampled_reads(rng, codes, n_reads, max_subs, n_every):
    """A ReadBatch of n_reads reads of 60, 100 or 150 bases cut from codes, each with up to max_subs
    substitutions, every n_every-th with an N."""
    from pymap.batch import ReadBatch
    seqs = []
    for i in range(n_reads):
        L = int(rng.choice([60, 100, 150]))
        p = int(rng.integers(0, codes.size - L))
        r = codes[p:p + L].copy()
        k = rng.integers(0, L, int(rng.integers(0, max_subs + 1)))
        r[k] = (r[k] + 1) % 4
        if i % n_every == 0:
            r[int(rng.integers(0, L))] = 4
        seqs.append(r)
    offsets = np.zeros(n_reads + 1, np.int64)
    np.cumsum([r.size for r in seqs], out=offsets[1:])
    return ReadBatch(np.concatenate(seqs), offsets, np.zeros(0, np.uint8), np.zeros(n_reads + 1, np.int64),
                     np.zeros(0, np.uint8)).with_rc()


def compare_seeding(n_reads, e_nb):
    """The neighborhood seeder's candidates on the GPU against the CPU's: random contigs with
    repeat copies (reads there overflow the device's hit buffers and are seeded by the CPU; with
    max_occ 20 every pattern of a read inside them is over-frequent, and the read is seeded from a
    sample), reads with errors and N, lossy and lossless steps, a batch queried whole and in parts
    of 7 reads (its reads new to the device: their reverse complements made there from all of them)."""
    from pymap.reference import Reference
    from pymap.seeders import neighborhood
    from pymap.seeders.neighborhood import NeighborhoodSeeder
    rng = np.random.default_rng(7)
    unit = rng.integers(0, 4, 300).astype(np.uint8)
    parts = [rng.integers(0, 4, 20000).astype(np.uint8)] + [unit] * 40 + [rng.integers(0, 4, 20000).astype(np.uint8)]
    codes = np.concatenate(parts)
    ref = Reference(["c1", "c2"], np.array([0, 30000, codes.size], np.int64), codes, "test")
    batch = sampled_reads(rng, codes, n_reads, max_subs=5, n_every=17)
    max_e = np.full(n_reads, 8, np.int32)
    bad = []
    overflowed = 0
    whole = neighborhood.QUERY_SLOTS
    sampled = 0
    for opts, slots in (({"e_nb": e_nb}, whole), ({"e_nb": e_nb, "lossless": True, "max_occ": 2000}, whole),
                        ({"e_nb": e_nb, "max_occ": 20}, whole), ({"e_nb": e_nb}, 2 * 7 * neighborhood.DEFAULT_MAX_CANDS)):
        neighborhood.QUERY_SLOTS = slots
        batch = batch.subset(np.arange(len(batch)))     # new arrays: the device copies made by this query
        cpu_seeder = NeighborhoodSeeder(**opts)
        index = cpu_seeder.build_index(ref)
        gpu_seeder = NeighborhoodSeeder(device="gpu", **opts)
        a = cpu_seeder.candidates(index, batch, max_e)
        b = gpu_seeder.candidates(index, batch, max_e)
        for name in ("read", "strand", "pos", "mapq_cap"):
            x, y = getattr(a, name), getattr(b, name)
            if (x is None) != (y is None) or (x is not None and not np.array_equal(x, y)):
                bad.append(f"{opts} {name}")
        overflowed += gpu_seeder.timing["cpu_reads"]
        sampled += gpu_seeder.stats["sampled"]
    neighborhood.QUERY_SLOTS = whole
    return {"bad": bad, "overflowed": overflowed, "cands": int(a.read.size), "sampled": sampled}


@pytest.mark.parametrize("e_nb", [0, 1])
@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_seeding_cuda_equals_cpu(where, e_nb):
    res = run_check("compare_seeding", where, 60 if where == "simulator" else 3000, e_nb)
    assert res["bad"] == []
    assert res["overflowed"] > 0 and res["cands"] > 0 and res["sampled"] > 0


def compare_minimizer_seeding(n_reads):
    """The minimizer seeder's candidates on the GPU against the CPU's: a genome with a 300-copy repeat
    (reads there have more hits than the first device pass holds: wider passes query them, and the
    CPU past the widest, forced here by small capacities), its keys also masked (max_occ 200: reads
    seeded again with them; rescue_occ 200: reads seeded from the index's sample of them), reads
    with errors and N, both strands."""
    from pymap.kernels import minimizer_index_cuda as mic
    from pymap.reference import Reference
    from pymap.seeders.minimizer import MinimizerSeeder
    rng = np.random.default_rng(11)
    unit = rng.integers(0, 4, 300).astype(np.uint8)
    codes = np.concatenate([rng.integers(0, 4, 60000).astype(np.uint8), np.tile(unit, 300),
                            rng.integers(0, 4, 60000).astype(np.uint8)])
    ref = Reference(["c1", "c2"], np.array([0, 100000, codes.size], np.int64), codes, "test")
    batch = sampled_reads(rng, codes, n_reads, max_subs=3, n_every=13)
    max_e = np.full(n_reads, 8, np.int32)
    bad, counts = [], {}
    default = mic.HIT_CAPACITIES
    for opts, capacities in (({}, default), ({"min_frac": 0.0, "max_cands": 5}, default),
                             ({"max_occ": 200}, default), ({"max_occ": 100, "rescue_occ": 200}, default),
                             ({}, (16, 64))):
        mic.HIT_CAPACITIES = capacities
        cpu_seeder = MinimizerSeeder(**opts)
        index = cpu_seeder.build_index(ref)
        gpu_seeder = MinimizerSeeder(device="gpu", **opts)
        a = cpu_seeder.candidates(index, batch, max_e)
        b = gpu_seeder.candidates(index, batch, max_e)
        for name in ("read", "strand", "pos", "mapq_cap"):
            if not np.array_equal(getattr(a, name), getattr(b, name)):
                bad.append(f"{opts} {capacities} {name}")
        passes = "default" if capacities == default else "small"
        for key in ("wide_reads", "cpu_reads"):
            counts[f"{key}, {passes} passes"] = counts.get(f"{key}, {passes} passes", 0) + gpu_seeder.timing[key]
        counts["rescued"] = counts.get("rescued", 0) + gpu_seeder.stats["rescued"] + gpu_seeder.stats["mostly_masked"]
        counts["sampled"] = counts.get("sampled", 0) + gpu_seeder.stats["sampled"]
    mic.HIT_CAPACITIES = default
    return {"bad": bad, "counts": counts, "cands": int(a.read.size)}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_minimizer_seeding_cuda_equals_cpu(where):
    res = run_check("compare_minimizer_seeding", where, 50 if where == "simulator" else 3000)
    assert res["bad"] == []
    c = res["counts"]
    # the default passes keep every read on the device; small ones leave some to the CPU
    assert c["wide_reads, default passes"] > 0 and c["cpu_reads, default passes"] == 0
    assert c["cpu_reads, small passes"] > 0
    assert c["rescued"] > 0 and c["sampled"] > 0 and res["cands"] > 0


# ------------------------------------------------------------------------------------- mapping

def compare_lazy_copies():
    """A reference decoded on demand, partly decoded, reaches the device whole: the stages' resident
    copy and the GateKeeper filter's."""
    from pymap.kernels.cuda_support import resident
    from pymap.kernels.gatekeeper_cuda import GateKeeperCUDA
    from pymap.kernels.packed_ref import BLOCK, pack
    from pymap.kernels.packed_ref import LazyCodes
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 5, 3 * BLOCK + 5).astype(np.uint8)
    same = []
    for copy in (lambda a: resident(a).copy_to_host(),
                 lambda a: (gk.ensure_reference(a), gk.devices[0].ref_dev.copy_to_host())[1]):
        lazy = LazyCodes(*pack(codes), codes.size)
        lazy.ensure(np.array([10]), np.array([20]))
        gk = GateKeeperCUDA()
        same.append(bool(np.array_equal(copy(lazy.codes), codes)))
    return {"same": same}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_lazy_reference_reaches_the_gpu_whole(where):
    assert run_check("compare_lazy_copies", where)["same"] == [True, True]


def compare_mapping(n_reads, paired, seeder="neighborhood", lazy=False, report_all=False, query_parts=False):
    """`--device gpu` against `--device cpu` on the bundled lambda example (the first n_reads reads;
    paired: read pairs made from them), three batches side by side: the same records, and the
    summary names the GPU stages.
    lazy: the reference decoded from its index on demand, as a large genome's (the GPU copy decodes it all).
    report_all: --all, every location within e (the edit-distance extender).
    query_parts: the neighborhood seeder queries each batch in parts of 7 reads (as a large batch's)."""
    import gzip
    import shutil
    import tempfile
    from pymap import api, reference
    from pymap.options import AlignOptions
    from pymap.seeders import neighborhood
    if lazy:
        reference.EAGER_BASES = 0
    if query_parts:
        neighborhood.QUERY_SLOTS = 2 * 7 * neighborhood.DEFAULT_MAX_CANDS
    root = TESTS.parent / "examples"
    tmp = Path(tempfile.mkdtemp())
    shutil.copy(root / "lambda.fa", tmp / "lambda.fa")
    with gzip.open(root / "reads.fq.gz", "rt") as fh:
        lines = [next(fh) for _ in range(4 * n_reads)]
    (tmp / "r1.fq").write_text("".join(lines))
    mates = None
    if paired:                         # mate 2: the reverse complement of each read's last 60 bases
        comp = str.maketrans("ACGTN", "TGCAN")
        out = []
        for i in range(0, len(lines), 4):
            seq = lines[i + 1].strip()[-60:].translate(comp)[::-1]
            out += [lines[i], seq + "\n", "+\n", lines[i + 3].strip()[-60:][::-1] + "\n"]
        (tmp / "r2.fq").write_text("".join(out))
        mates = str(tmp / "r2.fq")
    if lazy:
        api.build_index(str(tmp / "lambda.fa"), seeder)       # both runs take the reference from the index
    sams, stats = {}, {}
    for device in ("cpu", "gpu"):
        out_path = tmp / f"{device}.sam"
        stats[device] = api.align(str(tmp / "lambda.fa"), str(tmp / "r1.fq"), str(out_path), mates_path=mates,
                                  options=AlignOptions(device=device, threads=2, batch_size=47, batches=3,
                                                       progress=False, seeder=seeder, report_all=report_all),
                                  summary=False)
        sams[device] = [x for x in out_path.read_text().splitlines() if not x.startswith("@PG")]
    return {"same": sams["cpu"] == sams["gpu"], "records": len(sams["cpu"]),
            "on_gpu": list(stats["gpu"].on_gpu), "on_cpu": list(stats["cpu"].on_gpu)}


@pytest.mark.parametrize("paired,seeder,lazy,report_all,query_parts",
                         [(False, "neighborhood", False, False, False), (True, "neighborhood", False, False, False),
                          (False, "minimizer", False, False, False), (True, "minimizer", True, False, False),
                          (False, "neighborhood", False, True, False), (True, "neighborhood", False, False, True)],
                         ids=["single", "pairs", "minimizer", "lazy-reference", "all-edit-distance", "query-parts"])
@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_mapping_on_gpu_equals_cpu(where, paired, seeder, lazy, report_all, query_parts):
    res = run_check("compare_mapping", where, 150 if where == "simulator" else 2000, paired, seeder, lazy,
                    report_all, query_parts)
    assert res["same"] and res["records"] > 150
    assert res["on_gpu"] == ["seed", "filter", "extend", "select"] and res["on_cpu"] == []


def compare_rescue(host_positions, spacing):
    """`--device gpu` against `--device cpu` on lambda pairs (one every `spacing` bases) whose mate 2
    carries an N every 11th base (too many to seed it: only the mate rescue places it), with rescues
    of at most host_positions window positions filtered and extended on the host twins: the same
    records. Returns which device filtered the rescue's candidates."""
    import shutil
    import tempfile
    import threading
    from pymap import api, pipeline
    from pymap.filters.gatekeeper import GateKeeperGPUFilter
    from pymap.options import AlignOptions
    pipeline.HOST_RESCUE_POSITIONS = host_positions
    tmp = Path(tempfile.mkdtemp())
    shutil.copy(TESTS.parent / "examples" / "lambda.fa", tmp / "lambda.fa")
    ref = "".join(open(tmp / "lambda.fa").read().split("\n")[1:])
    comp = str.maketrans("ACGT", "TGCA")
    r1, r2 = [], []
    for i, s in enumerate(range(500, 45000, spacing)):
        m2 = list(ref[s + 200:s + 300].translate(comp)[::-1])
        m2[5::11] = "N" * len(m2[5::11])
        r1.append(f"@p{i}/1\n{ref[s:s + 100]}\n+\n{'I' * 100}\n")
        r2.append(f"@p{i}/2\n{''.join(m2)}\n+\n{'I' * 100}\n")
    (tmp / "r1.fq").write_text("".join(r1))
    (tmp / "r2.fq").write_text("".join(r2))
    calls, real, windows, in_rescue = [], GateKeeperGPUFilter.filter_candidates, pipeline.Pipeline.rescue_windows, \
        threading.local()

    def counted(self, cands):
        calls.append((self.device, getattr(in_rescue, "on", False)))
        return real(self, cands)

    def rescue_windows(self, *args):
        in_rescue.on = True
        try:
            return windows(self, *args)
        finally:
            in_rescue.on = False
    GateKeeperGPUFilter.filter_candidates = counted
    pipeline.Pipeline.rescue_windows = rescue_windows
    sams, stats = {}, {}
    for device in ("cpu", "gpu"):
        calls.clear()
        out = tmp / f"{device}.sam"
        stats[device] = api.align(str(tmp / "lambda.fa"), str(tmp / "r1.fq"), str(out), mates_path=str(tmp / "r2.fq"),
                                  options=AlignOptions(device=device, threads=2, batch_size=40, batches=2,
                                                       progress=False, insert_size=None), summary=False)
        sams[device] = [x for x in out.read_text().splitlines() if not x.startswith("@PG")]
    rescue_on = sorted({d for d, rescue in calls if rescue})
    return {"same": sams["cpu"] == sams["gpu"], "windows": stats["gpu"].rescue_windows,
            "proper": stats["gpu"].proper_pairs, "pairs": len(r1), "rescue_on": rescue_on}


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_small_rescues_on_the_host_twins(where):
    # the simulator runs the GPU rescue's kernels in Python: fewer pairs there; five in six made proper
    # by the rescue, as the 50 of 60 this asked of all the pairs
    spacing = 1500 if where == "simulator" else 750
    for host_positions, on in ((100_000, ["cpu"]), (0, ["gpu"])):
        res = run_check("compare_rescue", where, host_positions, spacing)
        assert res["same"] and res["windows"] > 0 and 6 * res["proper"] >= 5 * res["pairs"], res
        assert res["rescue_on"] == on, res


def batch_reads_copied():
    """Device copies that a GPU mapping of one batch makes of arrays as long as its bases: its codes,
    once for seeder, filter and extender (cuda_support.resident, whose copies _device_copy makes);
    the reverse complements are made on the device (resident_reads)."""
    import gzip
    import shutil
    import tempfile
    from pymap import api
    from pymap.kernels import cuda_support as cs
    from pymap.options import AlignOptions
    root = TESTS.parent / "examples"
    tmp = Path(tempfile.mkdtemp())
    shutil.copy(root / "lambda.fa", tmp / "lambda.fa")
    with gzip.open(root / "reads.fq.gz", "rt") as fh:
        lines = [next(fh) for _ in range(4 * 120)]
    (tmp / "r.fq").write_text("".join(lines))
    bases = sum(len(lines[i].strip()) for i in range(1, len(lines), 4))
    sizes, real = [], cs._device_copy

    def counted(a, *args, **kw):
        sizes.append(int(np.asarray(a).size))
        return real(a, *args, **kw)
    cs._device_copy = counted
    api.align(str(tmp / "lambda.fa"), str(tmp / "r.fq"), str(tmp / "out.sam"),
              options=AlignOptions(device="gpu", threads=2, batch_size=1000, batches=1, progress=False),
              summary=False)
    return sizes.count(bases)


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_a_batch_reads_are_copied_to_the_device_once(where):
    assert run_check("batch_reads_copied", where) == 1


def reverse_complements_on_device():
    """resident_reads' reverse complements, made on the device, against the host's (encoding.reverse_into,
    as the FASTQ gather makes them): reads of 0 to 300 bases with N; asked again, the same arrays."""
    from pymap.kernels import cuda_support as cs
    from pymap.kernels.encoding import reverse_complement_batch
    rng = np.random.default_rng(3)
    lengths = rng.choice([0, 1, 7, 150, 151, 300], 3000)
    offsets = np.zeros(lengths.size + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    codes = rng.choice(np.arange(5, dtype=np.uint8), offsets[-1], p=[0.24, 0.24, 0.24, 0.24, 0.04])
    rc = reverse_complement_batch(codes, offsets)
    d_codes, d_rc, d_offsets = cs.resident_reads(codes, rc, offsets)
    again = cs.resident_reads(codes, rc, offsets)
    same = [bool(np.array_equal(d.copy_to_host(), h)) for d, h in ((d_rc, rc), (d_codes, codes), (d_offsets, offsets))]
    return same + [all(a is b for a, b in zip(again, (d_codes, d_rc, d_offsets)))]


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_reverse_complements_made_on_the_device(where):
    assert run_check("reverse_complements_on_device", where) == [True, True, True, True]


def test_scratch_view_strides():
    """Scratch views: C-contiguous, or thread-major (the threads' axis, last, outermost in memory) as
    NumPy lays out an array whose first axis is moved last."""
    from pymap.kernels.cuda_support import view_strides
    for shape in [(5, 7), (4, 3, 9), (1, 128)]:
        assert view_strides(shape, 8) == np.empty(shape).strides
        major = np.moveaxis(np.empty((shape[-1],) + shape[:-1], np.int32), 0, -1)
        assert view_strides(shape, 4, thread_major=True) == major.strides


def test_device_option_reaches_every_stage_that_has_one(tmp_path):
    """--device sets seeder, filter and extender alike (auto: the GPU when one is usable); a stage
    without a device option (a plugin, the edlib filter) is left alone; an explicit stage option wins."""
    import shutil
    from pymap import api
    from pymap.kernels.cuda_support import cuda_available
    from pymap.options import AlignOptions
    ref = tmp_path / "lambda.fa"
    shutil.copy(TESTS.parent / "examples" / "lambda.fa", ref)
    want = "gpu" if cuda_available() else "cpu"
    pipe = api.make_pipeline(str(ref), AlignOptions(device="auto", threads=1))
    assert (pipe.seeder.device, pipe.filt.device, pipe.extender.device) == (want, want, want)
    pipe = api.make_pipeline(str(ref), AlignOptions(device="auto", filter="edlib", threads=1,
                                                    extender_opts={"device": "cpu"}))
    assert not hasattr(pipe.filt, "device") and pipe.extender.device == "cpu" and pipe.seeder.device == want
    pipe = api.make_pipeline(str(ref), AlignOptions(threads=1))
    assert pipe.seeder.device == "cpu" and pipe.extender.device == "cpu"


def test_gpu_usable_agrees_with_numba():
    """The quick check (NVIDIA device files) gives Numba's answer; the simulator counts as a GPU."""
    from pymap.kernels.cuda_support import cuda_available
    from pymap.plugins import gpu_usable
    assert gpu_usable() == cuda_available()
    code = "from pymap.plugins import gpu_usable; print(gpu_usable())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"))
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def start_up_calls():
    """How many times make_pipeline ran cuda_support.warm_up: [all stages on the CPU, the filter alone
    on the GPU]."""
    import shutil
    import tempfile

    from pymap import api
    from pymap.kernels import cuda_support as cs
    from pymap.options import AlignOptions
    tmp = Path(tempfile.mkdtemp())
    shutil.copy(TESTS.parent / "examples" / "lambda.fa", tmp / "lambda.fa")
    calls, counts = [], []
    cs.warm_up = lambda: calls.append(1)
    api.make_pipeline(str(tmp / "lambda.fa"), AlignOptions(device="cpu", threads=1))
    counts.append(len(calls))
    api.make_pipeline(str(tmp / "lambda.fa"), AlignOptions(device="cpu", threads=1, filter_opts={"device": "gpu"}))
    counts.append(len(calls))
    return counts


def test_gpu_start_up_done_before_the_first_batch():
    """make_pipeline runs the GPU's start-up work (cuda_support.warm_up) when a stage uses a GPU."""
    assert run_check("start_up_calls", "simulator") == [0, 1]


def gpus_listed_by_threads_at_once():
    """Threads starting CUDA at once, as a pipeline's set-up does (the contexts' start on a thread of
    its own, stages asking cuda_available and then listing the GPUs), with Numba's making of each
    GPU's Device slowed so that unguarded threads would each make it: the errors they raise."""
    import threading
    import time
    from numba import cuda
    from numba.cuda.cudadrv import driver
    from pymap.kernels import cuda_support as cs
    real = driver.Device

    class SlowDevice(real):
        def __init__(self, devnum):
            time.sleep(0.2)
            super().__init__(devnum)
    driver.Device = SlowDevice
    errors, start = [], threading.Barrier(4)

    def first_use(use):
        try:
            start.wait()
            use()
        except BaseException as exc:        # noqa: BLE001
            errors.append(repr(exc))

    def stage():
        assert cs.cuda_available()
        assert len(cuda.gpus) == cs.gpu_count() > 0

    threads = [threading.Thread(target=first_use, args=(use,)) for use in (cs.warm_up, stage, stage, stage)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    driver.Device = real
    return errors


def test_threads_may_start_cuda_at_once():
    assert run_check("gpus_listed_by_threads_at_once", "gpu") == []


def test_cuda_kernels_load_without_numba_registries(tmp_path):
    """On a real GPU, with pymap's CUDA support imported, a kernel loaded from the cache runs without
    Numba's CUDA registries installed (the first run compiles, which installs them)."""
    from pymap.kernels.cuda_support import cuda_available
    if not cuda_available():
        pytest.skip("no CUDA GPU here (the cache is not used under the simulator)")
    (tmp_path / "kmod.py").write_text("from numba import cuda\n\n\n"
                                      "@cuda.jit(cache=True)\n"
                                      "def add_one(x):\n"
                                      "    i = cuda.grid(1)\n"
                                      "    if i < x.size:\n"
                                      "        x[i] += 1\n")
    script = ("import sys\nimport numpy as np\nfrom pymap.kernels.cuda_support import cuda\nfrom kmod import add_one\n"
              "x = cuda.to_device(np.arange(40))\nadd_one[2, 32](x)\n"
              "assert x.copy_to_host().tolist() == list(range(1, 41))\n"
              "print('registries' if 'numba.cuda.printimpl' in sys.modules else 'none')\n")
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path, NUMBA_ENABLE_CUDASIM="0")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env,
                           cwd=tmp_path) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr[-3000:]
    assert [res.stdout.strip() for res in runs] == ["registries", "none"]


def resident_from_threads():
    """cuda_support.resident asked for one array by many threads at once: one copy, the same device
    array for all; a copy that fails raises in its thread and leaves no entry behind."""
    import threading
    from pymap.kernels import cuda_support as cs
    host = np.arange(1 << 16, dtype=np.int64)
    got, start = [], threading.Barrier(8)

    def ask():
        start.wait()
        got.append(cs.resident(host))
    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    same = len(got) == 8 and all(g is got[0] for g in got) and np.array_equal(got[0].copy_to_host(), host)
    other = np.ones(10, np.int32)
    real = cs._device_copy

    def broken(*a, **k):
        raise MemoryError("no room")
    cs._device_copy = broken
    try:
        cs.resident(other)
        failed = False
    except MemoryError:
        failed = True
    finally:
        cs._device_copy = real
    again = cs.resident(other).copy_to_host().tolist() == [1] * 10
    return [same, failed, again]


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_resident_copies_once_for_many_threads(where):
    assert run_check("resident_from_threads", where) == [True, True, True]


def call_buffers_per_thread():
    """cuda_support.call_buffers: a thread's next call with a tag reuses its buffers (grown when too
    small) and the views of the same shapes, another thread gets its own, and call_inputs copies the
    host arrays (2-D too: the views' strides) into them."""
    import threading
    from pymap.kernels import cuda_support as cs
    def ptr(x):                 # the simulator hands out host arrays
        return (getattr(x, "__cuda_array_interface__", None) or x.__array_interface__)["data"][0]
    a = cs.call_buffers("t", [((10,), np.int64), ((4, 3), np.int32)])
    b = cs.call_buffers("t", [((8,), np.int64), ((2, 3), np.int32)])
    reused = a[0].shape == (10,) and b[1].shape == (2, 3) and ptr(a[0]) == ptr(b[0])
    again = cs.call_buffers("t", [((8,), np.int64), ((2, 3), np.int32)])
    reused = reused and again[0] is b[0] and again[1] is b[1]
    c = cs.call_buffers("t", [((100,), np.int64)])
    grown = c[0].shape == (100,)
    other = []
    t = threading.Thread(target=lambda: other.append(cs.call_buffers("t", [((100,), np.int64)])[0]))
    t.start()
    t.join()
    own = ptr(other[0]) != ptr(c[0])
    host = [np.arange(7, dtype=np.int64), np.array([3, 1], np.int8), np.arange(12, dtype=np.int32).reshape(4, 3)]
    stream = cs.cuda.stream()
    d = cs.call_inputs("u", host, stream)
    copied = all(np.array_equal(x.copy_to_host(), h) for x, h in zip(d, host))
    back = cs.call_outputs("v", d, stream)                 # and back through the landing buffer
    stream.synchronize()
    landed = all(np.array_equal(x, h) and x.dtype == h.dtype for x, h in zip(back, host))
    again = cs.call_outputs("v", d[:1], stream)
    stream.synchronize()
    landed = landed and ptr(again[0]) == ptr(back[0]) and np.array_equal(again[0], host[0])
    return [reused, grown, own, copied, landed]


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_call_buffers_are_kept_per_thread(where):
    """(and call_outputs: device results land in a thread's page-locked buffer, reused by its next call)"""
    assert run_check("call_buffers_per_thread", where) == [True, True, True, True, True]


def test_threads_ask_for_the_gpu_one_at_a_time(monkeypatch):
    """cuda_available: threads that ask at once (a Dask worker's threads building their pipelines) go one
    at a time, so none goes on to CUDA calls while another is still initializing Numba's driver (which
    marks itself initialized before cuInit returns: CUDA_ERROR_NOT_INITIALIZED on the H200 host). Numba's
    list of the GPUs is made there too, one thread at a time (test_threads_may_start_cuda_at_once)."""
    import threading
    import time

    from pymap.kernels import cuda_support
    inside, most, listed = [0], [0], []
    guard = threading.Lock()

    def slow(answer):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)
        with guard:
            inside[0] -= 1
        return answer

    class SlowList:
        def __len__(self):
            listed.append(1)
            return slow(1)

    monkeypatch.setattr(cuda_support.cuda, "is_available", lambda: slow(True))
    monkeypatch.setattr(cuda_support.cuda, "gpus", SlowList())
    monkeypatch.setattr(cuda_support, "_simulator", lambda: False)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(cuda_support.cuda_available())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [True] * 4 and most[0] == 1 and len(listed) == 4


def spare_buffers():
    """cuda_support.resident: batch-sized copies go through the page-locked staging into buffers that
    are kept as spares once the copy is gone and reused by the next copy of a like size (another
    batch's reads); a copy the caller still holds keeps its buffer; copies are right at any offset,
    and where the driver refuses page-locked memory (pageable staging)."""
    import gc
    from pymap.kernels import cuda_support as cs

    def ptr(x):
        return (getattr(x, "__cuda_array_interface__", None) or x.__array_interface__)["data"][0]
    first = np.arange(5000, dtype=np.int64)
    d1 = cs.resident(first)
    p1 = ptr(d1)
    right = np.array_equal(d1.copy_to_host(), first)
    second = np.arange(4990, dtype=np.int64) * 3          # the same size class
    d2 = cs.resident(second)
    apart = ptr(d2) != p1                                  # d1 is still held: its buffer is not a spare
    right = right and np.array_equal(d2.copy_to_host(), second)
    del first, d1
    gc.collect()
    third = np.arange(4995, dtype=np.int64) + 7
    d3 = cs.resident(third)
    reused = ptr(d3) == p1
    right = right and np.array_equal(d3.copy_to_host(), third)
    odd = np.arange(1001, dtype=np.int8)                    # not a multiple of the staging alignment
    right = right and np.array_equal(cs.resident(odd).copy_to_host(), odd)
    from numba.cuda.cudadrv.driver import CudaAPIError

    def refused(*a, **k):
        raise CudaAPIError(2, "out of memory")
    pinned, cs.cuda.pinned_array = cs.cuda.pinned_array, refused
    try:                                                    # page-locked memory refused: pageable staging
        host = [np.arange(300000, dtype=np.int64), np.arange(7, dtype=np.int8)]
        d = cs.call_inputs("refused", host, cs.thread_stream())
        right = right and all(np.array_equal(x.copy_to_host(), h) for x, h in zip(d, host))
    finally:
        cs.cuda.pinned_array = pinned
    return [right, apart, reused]


@pytest.mark.parametrize("where", ["simulator", "gpu"])
def test_batch_copies_reuse_spare_buffers(where):
    assert run_check("spare_buffers", where) == [True, True, True]
