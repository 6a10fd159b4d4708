#!/usr/bin/env python3
"""Speed + accuracy harness: pymap against bwa mem, minimap2 -ax sr, bowtie2 and razers3.

For one reference and one read set with a known truth it

1. builds each mapper's index once (``pymap index``, ``bwa index``, ``minimap2 -x sr -d``,
   ``bowtie2-build``; razers3 has none), timed under ``/usr/bin/time -v``;
2. maps the reads with every mapper with the same thread count, ``--repeats`` times, each run under
   ``/usr/bin/time -v`` (wall clock, user+sys CPU, max RSS), and keeps the median;
3. scores the SAM of the last run with score.py (sensitivity, precision, wrong at MAPQ >= q);
4. reports reads/s and, when pymap is among the mappers, the ratios pymap/peer of the same run.

    python scripts/bench_mapping.py --ref /tmp/data/ecoli.fa --reads /tmp/data/r100.fq \\
        --truth /tmp/data/t100.sam -t 2 --repeats 3 --mappers pymap,bwa,minimap2,bowtie2 \\
        --workdir /tmp/eval/bench --md /tmp/eval/results/bench_r100.md

    python scripts/bench_mapping.py --ref /work/shared/data/ecoli_MG1655.fa.gz \\
        --simulate 150,high,200000 --seed 7 --workdir /tmp/eval/bench --md out.md
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import score  # noqa: E402
import simulate  # noqa: E402

ALL_MAPPERS = ("pymap", "bwa", "minimap2", "bowtie2", "razers3")
DEFAULT_MAPPERS = "pymap,bwa,minimap2,bowtie2"
TIME = "/usr/bin/time"


# ------------------------------------------------------------------ /usr/bin/time -v

def _clock(text):
    """'h:mm:ss' or 'm:ss.ss' -> seconds."""
    parts = [float(p) for p in text.strip().split(":")]
    sec = 0.0
    for p in parts:
        sec = sec * 60 + p
    return sec


def parse_time_v(text):
    """Parse GNU ``time -v`` output. Returns dict(wall_s, user_s, sys_s, cpu_s, max_rss_kb,
    exit_status, signal, cpu_percent); missing fields are None."""
    out = dict(wall_s=None, user_s=None, sys_s=None, cpu_s=None, max_rss_kb=None, exit_status=None,
               signal=None, cpu_percent=None)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Command terminated by signal"):
            try:
                out["signal"] = int(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
            continue
        if ":" not in line:
            continue
        key, _, val = line.rpartition(": ")
        if not _:
            continue
        val = val.strip()
        try:
            if key == "User time (seconds)":
                out["user_s"] = float(val)
            elif key == "System time (seconds)":
                out["sys_s"] = float(val)
            elif key.startswith("Elapsed (wall clock) time"):
                out["wall_s"] = _clock(val)
            elif key == "Maximum resident set size (kbytes)":
                out["max_rss_kb"] = int(val)
            elif key == "Exit status":
                out["exit_status"] = int(val)
            elif key == "Percent of CPU this job got":
                out["cpu_percent"] = float(val.rstrip("%")) if val.rstrip("%").replace(".", "").isdigit() else None
        except ValueError:
            pass
    if out["user_s"] is not None and out["sys_s"] is not None:
        out["cpu_s"] = out["user_s"] + out["sys_s"]
    return out


def _cpu_times():
    with open("/proc/stat") as fh:
        f = [int(x) for x in fh.readline().split()[1:]]
    idle = f[3] + (f[4] if len(f) > 4 else 0)
    return sum(f[:8]), idle


def cpu_busy(interval=0.5):
    """Cores busy over ``interval`` seconds, from /proc/stat (None where unavailable): what other
    processes use of the machine just before a timed run."""
    try:
        t0, i0 = _cpu_times()
        time.sleep(interval)
        t1, i1 = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    if t1 == t0:
        return 0.0
    return (1 - (i1 - i0) / (t1 - t0)) * (os.cpu_count() or 1)


def wait_idle(max_busy, max_wait=120.0, interval=1.0):
    """Wait until fewer than ``max_busy`` cores are busy (at most ``max_wait`` s). Returns
    (busy cores when starting, seconds waited)."""
    t0 = time.time()
    busy = cpu_busy(interval)
    while busy is not None and max_busy is not None and busy >= max_busy and time.time() - t0 < max_wait:
        busy = cpu_busy(interval)
    return busy, time.time() - t0


def timed(cmd, stdout_path=None, log_path=None, timeout=None, env=None):
    """Run ``cmd`` (a list) under /usr/bin/time -v; stdout to ``stdout_path`` (or the log), stderr to the
    log. Returns the parse_time_v dict plus ``ok``, ``cmd``, ``log`` and ``elapsed_py`` (Python's own
    wall clock around the call, a cross-check)."""
    tfile = (log_path or "run") + ".time"
    full = [TIME, "-v", "-o", tfile] + [str(c) for c in cmd]
    log = open(log_path or os.devnull, "w")
    out = open(stdout_path, "wb") if stdout_path else log
    try:
        st0 = _cpu_times()
    except (OSError, ValueError, IndexError):
        st0 = None
    t0 = time.perf_counter()
    try:
        log.write("# " + " ".join(shlex.quote(str(c)) for c in cmd) + "\n")
        log.flush()
        r = subprocess.run(full, stdout=out, stderr=log, timeout=timeout, env=env)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = -9
    finally:
        elapsed = time.perf_counter() - t0
        if stdout_path:
            out.close()
        log.close()
    try:
        with open(tfile) as fh:
            res = parse_time_v(fh.read())
    except OSError:
        res = parse_time_v("")
    if res["wall_s"] is None:
        res["wall_s"] = elapsed
    # CPU used by everything else on the machine while this ran, in cores (contention check)
    res["others_cores"] = None
    if st0 is not None:
        try:
            st1 = _cpu_times()
            hz = os.sysconf("SC_CLK_TCK")
            busy_s = ((st1[0] - st0[0]) - (st1[1] - st0[1])) / hz
            res["others_cores"] = max(0.0, busy_s - (res["cpu_s"] or 0)) / elapsed if elapsed > 0 else None
        except (OSError, ValueError, IndexError):
            pass
    res.update(ok=(rc == 0), returncode=rc, cmd=" ".join(shlex.quote(str(c)) for c in cmd), log=log_path,
               elapsed_py=round(elapsed, 3), load1_after=os.getloadavg()[0])
    return res


# ------------------------------------------------------------------ mappers

def count_reads(path):
    """Number of records in a FASTQ (4-line records) or FASTA file, plain or gzip."""
    with simulate.open_text(path) as fh:
        first = fh.read(1)
    with simulate.open_text(path) as fh:
        if first == ">":
            return sum(1 for line in fh if line.startswith(">"))
        return sum(1 for _ in fh) // 4


def index_commands(mapper, ref_fa, idx_dir, threads):
    """(command, outputs) to build ``mapper``'s index, or None (razers3)."""
    if mapper == "pymap":
        out = os.path.join(idx_dir, "ref.pymap.idx")
        return ["pymap", "index", ref_fa, "-o", out, "-t", threads], [out]
    if mapper == "bwa":
        return ["bwa", "index", ref_fa], [ref_fa + ".bwt", ref_fa + ".sa"]
    if mapper == "minimap2":
        out = os.path.join(idx_dir, "ref.sr.mmi")
        return ["minimap2", "-x", "sr", "-d", out, ref_fa], [out]
    if mapper == "bowtie2":
        prefix = os.path.join(idx_dir, "ref.bt2")
        return ["bowtie2-build", "--threads", threads, "-q", ref_fa, prefix], [prefix + ".1.bt2"]
    return None


def align_command(mapper, ref_fa, idx_dir, reads, out_sam, threads, pymap_args="", razers3_args=""):
    """(command, stdout file or None)."""
    if mapper == "pymap":
        return (["pymap", "align", ref_fa, reads, "-o", out_sam, "-t", threads, "--index",
                 os.path.join(idx_dir, "ref.pymap.idx"), "--no-progress"] + shlex.split(pymap_args), None)
    if mapper == "bwa":
        return ["bwa", "mem", "-t", threads, ref_fa, reads], out_sam
    if mapper == "minimap2":
        return ["minimap2", "-ax", "sr", "-t", threads, "-o", out_sam, os.path.join(idx_dir, "ref.sr.mmi"), reads], None
    if mapper == "bowtie2":
        return ["bowtie2", "-p", threads, "-x", os.path.join(idx_dir, "ref.bt2"), "-U", reads, "-S", out_sam], None
    if mapper == "razers3":
        return ([simulate.tool("razers3"), "-tc", threads] + shlex.split(razers3_args) +
                ["-o", out_sam, ref_fa, reads], None)
    raise ValueError(f"unknown mapper {mapper!r} (known: {', '.join(ALL_MAPPERS)})")


def build_indexes(mappers, ref, idx_dir, threads, rebuild=False, timeout=None):
    """Prepare ``idx_dir``/ref.fa from ``ref`` and build the indexes. Timings are kept in
    ``idx_dir``/index_times.json and reused when the index files are already there."""
    os.makedirs(idx_dir, exist_ok=True)
    ref_fa = os.path.join(idx_dir, "ref.fa")
    simulate.prepare_reference(ref, ref_fa)
    times_path = os.path.join(idx_dir, "index_times.json")
    times = {}
    if os.path.exists(times_path):
        with open(times_path) as fh:
            times = json.load(fh)
    for m in mappers:
        spec = index_commands(m, ref_fa, idx_dir, str(threads))
        if spec is None:
            continue
        cmd, outputs = spec
        fresh = all(os.path.exists(o) and os.path.getmtime(o) >= os.path.getmtime(ref_fa) for o in outputs)
        if fresh and not rebuild and times.get(m, {}).get("ok"):
            times[m]["reused"] = True
            continue
        print(f"[bench] index {m}: {' '.join(map(str, cmd))}", file=sys.stderr, flush=True)
        res = timed(cmd, log_path=os.path.join(idx_dir, f"index_{m}.log"), timeout=timeout)
        res["reused"] = False
        times[m] = res
        if not res["ok"]:
            print(f"[bench] index {m} FAILED (exit {res['returncode']}), see {res['log']}", file=sys.stderr)
        with open(times_path, "w") as fh:
            json.dump(times, fh, indent=1)
    return ref_fa, times


def run_mapper(mapper, ref_fa, idx_dir, reads, run_dir, threads, repeats, pymap_args="", razers3_args="",
               timeout=None, idle=None, idle_wait=120.0):
    os.makedirs(run_dir, exist_ok=True)
    out_sam = os.path.join(run_dir, f"{mapper}.sam")
    runs = []
    for i in range(repeats):
        cmd, stdout = align_command(mapper, ref_fa, idx_dir, reads, out_sam, str(threads), pymap_args,
                                    razers3_args)
        busy, waited = wait_idle(idle, idle_wait)
        print(f"[bench] {mapper} run {i + 1}/{repeats}: {' '.join(map(str, cmd))}", file=sys.stderr, flush=True)
        res = timed(cmd, stdout_path=stdout, log_path=os.path.join(run_dir, f"{mapper}.{i + 1}.log"),
                    timeout=timeout)
        res.update(busy_before=busy, waited_s=round(waited, 1))
        runs.append(res)
        print(f"[bench]   wall {res['wall_s']:.2f}s cpu {res['cpu_s'] or 0:.2f}s "
              f"rss {(res['max_rss_kb'] or 0) / 1024:.0f} MiB exit {res['returncode']} "
              f"(other load: {busy if busy is None else round(busy, 2)} cores before, "
              f"{res['others_cores'] if res['others_cores'] is None else round(res['others_cores'], 2)} during)",
              file=sys.stderr, flush=True)
        if not res["ok"]:
            break
    return out_sam, runs


def summarise_runs(runs):
    ok = [r for r in runs if r["ok"]]
    if not ok or len(ok) < len(runs):
        last = runs[-1] if runs else {}
        return dict(ok=False, returncode=last.get("returncode"), log=last.get("log"), repeats=len(ok))
    walls = [r["wall_s"] for r in ok]
    cpus = [r["cpu_s"] for r in ok if r["cpu_s"] is not None]
    rss = [r["max_rss_kb"] for r in ok if r["max_rss_kb"] is not None]
    busy = [r["busy_before"] for r in ok if r.get("busy_before") is not None]
    others = [r["others_cores"] for r in ok if r.get("others_cores") is not None]
    return dict(ok=True, repeats=len(ok), wall_s=statistics.median(walls), wall_min=min(walls), wall_max=max(walls),
                busy_before=max(busy) if busy else None,
                others_cores=statistics.median(others) if others else None,
                cpu_s=statistics.median(cpus) if cpus else None,
                rss_mib=statistics.median(rss) / 1024 if rss else None,
                peak_rss_mib=max(rss) / 1024 if rss else None, cmd=ok[-1]["cmd"])


# ------------------------------------------------------------------ report

def _f(x, fmt="{:.2f}", none="-"):
    return none if x is None else fmt.format(x)


def markdown(report):
    d = report["dataset"]
    out = [f"## {report['title']}", "",
           f"Reads: {d['reads']} ({d['path']}); truth: {d['truth']}; reference: {d['ref']}; "
           f"threads: {report['threads']}; repeats: {report['repeats']} (median shown); tolerance "
           f"{report['tolerance']} bp; host: {report['host']}.", ""]
    out += ["| mapper | wall s (min-max) | reads/s | CPU s | reads/CPU-s | peak RSS MiB | index s | index RSS MiB | mapped % | "
            "sensitivity % | optimal % | precision % | wrong MAPQ>=20 | wrong rate MAPQ>=20 | mapped MAPQ>=20 % | "
            "violations | other load cores |", "| --- |" + " ---: |" * 16]
    for m in report["mappers"]:
        e = report["results"][m]
        t = e["timing"]
        ix = e.get("index") or {}
        ix_s = _f(ix.get("wall_s")) if ix else "n/a"
        ix_rss = _f((ix.get("max_rss_kb") or 0) / 1024, "{:.0f}") if ix else "n/a"
        if not t.get("ok"):
            out.append(f"| {m} | FAILED (exit {t.get('returncode')}, log {t.get('log')}) |" + " |" * 15)
            continue
        s = e["score"]
        q20 = score.row_at(s, 20)
        rpc = report["dataset"]["reads"] / t["cpu_s"] if t.get("cpu_s") else None
        out.append(f"| {m} | {t['wall_s']:.2f} ({t['wall_min']:.1f}-{t['wall_max']:.1f}) | {e['reads_per_s']:.0f} | {_f(t['cpu_s'])} | {_f(rpc, '{:.0f}')} | "
                   f"{_f(t['peak_rss_mib'], '{:.0f}')} | {ix_s} | {ix_rss} | {100 * s['mapped_frac']:.2f} | "
                   f"{100 * s['sensitivity']:.2f} | {100 * s.get('optimal', 0):.3f} | {100 * s['precision']:.3f} | "
                   f"{q20['wrong']} | "
                   f"{score._rate(q20['wrong_rate'])} | {100 * q20['mapped_frac']:.2f} | {score._violations_text(s)} | "
                   f"{_f(t.get('others_cores'), '{:.2f}')} |")
    if report.get("ratios"):
        out += ["", "pymap / peer, same run (time and memory ratios > 1: pymap is slower / larger; "
                "sensitivity difference in percentage points):", "",
                "| peer | wall ratio | reads/s ratio | CPU ratio | peak RSS ratio | sensitivity diff pp | "
                "wrong MAPQ>=20 pymap / peer |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for peer, r in report["ratios"].items():
            out.append(f"| {peer} | {_f(r['wall'])} | {_f(r['reads_per_s'], '{:.3f}')} | {_f(r['cpu'])} | "
                       f"{_f(r['rss'])} | {_f(r['sensitivity_pp'], '{:+.2f}')} | {r['wrong_q20']} |")
    scored = [report["results"][m]["score"] for m in report["mappers"] if report["results"][m].get("score")]
    if scored:
        out += ["", score.mapq_markdown(scored)]
    notes = report.get("notes") or []
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    out.append("")
    return "\n".join(out)


def ratios(results):
    p = results.get("pymap")
    if not p or not p["timing"].get("ok"):
        return {}
    pt, ps = p["timing"], p["score"]
    out = {}
    for m, e in results.items():
        if m == "pymap" or not e["timing"].get("ok"):
            continue
        t, s = e["timing"], e["score"]
        out[m] = dict(wall=pt["wall_s"] / t["wall_s"] if t["wall_s"] else None,
                      reads_per_s=p["reads_per_s"] / e["reads_per_s"] if e["reads_per_s"] else None,
                      cpu=(pt["cpu_s"] / t["cpu_s"]) if pt.get("cpu_s") and t.get("cpu_s") else None,
                      rss=(pt["peak_rss_mib"] / t["peak_rss_mib"]) if pt.get("peak_rss_mib") and t.get("peak_rss_mib") else None,
                      sensitivity_pp=100 * (ps["sensitivity"] - s["sensitivity"]),
                      wrong_q20=f"{score.row_at(ps, 20)['wrong']} / {score.row_at(s, 20)['wrong']}")
    return out


def bench(ref, reads, truth, mappers, workdir, threads=2, repeats=3, pymap_args="", razers3_args="",
          tolerance=10, title=None, index_dir=None, rebuild_index=False, timeout=None, plot_path=None,
          idle=None, idle_wait=120.0):
    idx_dir = index_dir or os.path.join(workdir, "index")
    ref_fa, index_times = build_indexes(mappers, ref, idx_dir, threads, rebuild_index, timeout)
    run_dir = os.path.join(workdir, "runs")
    n_reads = count_reads(reads)
    truth_map = score.load_truth(truth)
    notes = []
    if len(truth_map) != n_reads:
        notes.append(f"truth has {len(truth_map)} reads, the read file {n_reads}")
    results = {}
    for m in mappers:
        ix = index_times.get(m)
        if ix is not None and not ix.get("ok"):
            results[m] = dict(timing=dict(ok=False, returncode=ix.get("returncode"), log=ix.get("log")),
                              index=ix, score=None, reads_per_s=None)
            continue
        sam, runs = run_mapper(m, ref_fa, idx_dir, reads, run_dir, threads, repeats, pymap_args, razers3_args,
                               timeout, idle, idle_wait)
        t = summarise_runs(runs)
        entry = dict(timing=t, runs=runs, index=ix, score=None, reads_per_s=None)
        if t["ok"]:
            entry["reads_per_s"] = n_reads / t["wall_s"] if t["wall_s"] else None
            entry["score"] = score.score_sam(truth_map, sam, tolerance, m)
        results[m] = entry
    if "razers3" in mappers:
        notes.append("razers3 writes no SAM record for reads it cannot map (they show as 'missing') and gives "
                     f"MAPQ 255 to every alignment; arguments: `{razers3_args or '(defaults: -i 95 -m 100)'}`.")
    report = dict(title=title or f"{os.path.basename(reads)} on {os.path.basename(ref)}", threads=threads,
                  repeats=repeats, tolerance=tolerance, host=_host(), mappers=list(mappers),
                  dataset=dict(path=reads, truth=truth, ref=ref, reads=n_reads), results=results,
                  ratios=ratios(results), notes=notes, pymap_args=pymap_args, razers3_args=razers3_args)
    if plot_path:
        scored = [results[m]["score"] for m in mappers if results[m].get("score")]
        if scored:
            score.plot(scored, plot_path, report["title"])
    return report


def _host():
    try:
        cpu = os.cpu_count()
        with open("/proc/meminfo") as fh:
            mem = int(fh.readline().split()[1]) / 1024 ** 2
        return f"{cpu} cores, {mem:.0f} GiB"
    except OSError:
        return "?"


def _json_ready(report):
    out = json.loads(json.dumps(report, default=str))
    for m, e in out["results"].items():
        if e.get("score"):
            e["score"] = score.strip_hist(report["results"][m]["score"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--ref", help="reference FASTA, plain or gzip")
    ap.add_argument("--render", metavar="JSON", help="only re-render the Markdown (--md) from a saved --json")
    ap.add_argument("--reads", help="FASTQ/FASTA reads (with --truth)")
    ap.add_argument("--truth", help="truth TSV (simulate.py) or Mason -oa SAM")
    ap.add_argument("--simulate", metavar="L,PROFILE,N", help="simulate reads first, e.g. 150,high,200000")
    ap.add_argument("--simulator", choices=["mason", "dwgsim"], default="mason")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--inject-n", type=float, default=0.0, help="with --simulate: fraction of reads with N runs")
    ap.add_argument("--mappers", default=DEFAULT_MAPPERS, help=f"comma list from {','.join(ALL_MAPPERS)}")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pymap-args", default="", help="extra arguments for pymap align, one string")
    ap.add_argument("--razers3-args", default="", help="extra arguments for razers3 (default: %(default)s)")
    ap.add_argument("--tolerance", type=int, default=10)
    ap.add_argument("--workdir", default="/tmp/eval/bench")
    ap.add_argument("--index-dir", help="where indexes live (default WORKDIR/index); reused when fresh")
    ap.add_argument("--rebuild-index", action="store_true")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per command")
    ap.add_argument("--wait-idle", type=float, default=None, metavar="CORES",
                    help="before each timed run wait until fewer than CORES cores are busy (other users)")
    ap.add_argument("--wait-max", type=float, default=120.0, help="longest wait for --wait-idle, s (default 120)")
    ap.add_argument("--title")
    ap.add_argument("--md", help="write Markdown summary here")
    ap.add_argument("--json", help="write JSON here")
    ap.add_argument("--plot", help="write PNG of wrong rate against mapped fraction here")
    a = ap.parse_args(argv)
    if a.render:
        with open(a.render) as fh:
            md = markdown(json.load(fh))
        print(md)
        if a.md:
            with open(a.md, "w") as fh:
                fh.write(md)
        return 0
    if not a.ref:
        ap.error("--ref is required")
    mappers = [m.strip() for m in a.mappers.split(",") if m.strip()]
    for m in mappers:
        if m not in ALL_MAPPERS:
            ap.error(f"unknown mapper {m!r} (known: {', '.join(ALL_MAPPERS)})")
    os.makedirs(a.workdir, exist_ok=True)
    title = a.title
    if a.simulate:
        try:
            length, profile, n = a.simulate.split(",")
            length, n = int(length), int(n)
        except ValueError:
            ap.error("--simulate wants L,PROFILE,N, e.g. 100,high,200000")
        sim_dir = os.path.join(a.workdir, f"sim_{a.simulator}_{length}_{profile}_{n}_s{a.seed}"
                                          + (f"_n{a.inject_n}" if a.inject_n else ""))
        info = simulate.simulate(a.ref, sim_dir, length, profile, n, a.seed, a.simulator, a.inject_n,
                                 threads=a.threads)
        reads, truth = info["reads"], info["truth"]
        title = title or f"{a.simulator} {length} bp, {profile}-error profile, {n} reads"
    elif a.reads and a.truth:
        reads, truth = a.reads, a.truth
    else:
        ap.error("give --reads and --truth, or --simulate L,PROFILE,N")
    report = bench(a.ref, reads, truth, mappers, a.workdir, a.threads, a.repeats, a.pymap_args, a.razers3_args,
                   a.tolerance, title, a.index_dir, a.rebuild_index, a.timeout, a.plot, a.wait_idle, a.wait_max)
    md = markdown(report)
    print(md)
    if a.md:
        os.makedirs(os.path.dirname(os.path.abspath(a.md)), exist_ok=True)
        with open(a.md, "w") as fh:
            fh.write(md)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(_json_ready(report), fh, indent=1)
    failed = [m for m in mappers if not report["results"][m]["timing"].get("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
