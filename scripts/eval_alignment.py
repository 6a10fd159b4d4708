#!/usr/bin/env python3
"""Alignment evaluation: the alignments that real reads and variant callers need.

Compares ``pymap align`` with ``bwa mem`` on reads whose truth is known (or, for real reads, with
each other). Every subcommand simulates (or takes) a read set, maps it with every tool, prints
Markdown tables and, with ``--json FILE``, writes the figures as JSON.

    indels     reads with exactly one 1-10 bp insertion/deletion (>= 25 bp from both read ends):
               is it one I/D op of the right type and length, at the left-normalised position?
    variants   mason_variator + mason_simulator -iv at 30x on a reference segment, samtools sort,
               bcftools mpileup | call -mv | norm: SNP and indel recall / precision per tool
    clipping   adapter read-through, low-quality tails, reads overhanging contig ends, chimeras:
               mapped, correctly placed, clipped where the reference ends, SA tags
    real       read 1 of each real set under /work/shared/data/real, single-end: mapped per tool
    mason      Mason E. coli sets (scripts/simulate.py + scripts/score.py): sensitivity, wrong at
               MAPQ >= 20, and a Q-line table (MAPQ >= 60, 50, 40, 30, 20, 10, 1, 0)
    speed      wall time and reads/s at -t 2 on one read set, indexes built beforehand, warm run
    pairs      Mason pairs (2 x 150, fragment 400 +- 60; --contigs K cuts the reference) mapped as
               pairs by pymap, bwa mem, bowtie2, minimap2 -ax sr (and by pymap as single reads):
               per-mate sensitivity, wrong at MAPQ >= 20, properly paired (checked against samtools
               flagstat), Q-lines, warm wall time; --real: the real pairs, mapped and properly
               paired against bwa

    python scripts/eval_alignment.py indels --reads 20000 --json /tmp/indels.json
    python scripts/eval_alignment.py clipping --extender banded          # passed to pymap align
    python scripts/eval_alignment.py mason --pymap-args "--extender banded" \\
        --variant affine="--extender affine" --variant old="/opt/old/bin/pymap align"
    python scripts/eval_alignment.py pairs --ref /tmp/synth30.fa --contigs 40 --profile high

The mapper: ``--pymap`` (default "pymap align"; any command that takes REF READS [MATES] -o OUT -t T
[--index IDX]), ``--pymap-args`` and any option this script does not know are appended to it.
``--variant LABEL=VALUE`` adds another pymap run: VALUE starting with "-" is extra arguments to
``--pymap``, anything else a whole command. ``--bwa`` / ``--bwa-args`` set the peer, ``--tools``
picks labels. Indexes are built before mapping (``pymap index``, derived from the align command
by replacing "align" with "index"; ``bwa index``; for pairs ``bowtie2-build``, ``minimap2 -x sr -d``).
Work files go under ``--workdir`` (default /tmp/eval_alignment); simulations are reused when their
parameters have not changed.
"""
import argparse
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_mapping  # noqa: E402  (timed: /usr/bin/time -v around a command)
import score  # noqa: E402
import simulate  # noqa: E402

DATA = "/work/shared/data"
ECOLI = os.path.join(DATA, "ecoli_MG1655.fa.gz")
LAMBDA = os.path.join(DATA, "lambda_virus.fa.gz")
REAL_DIR = os.path.join(DATA, "real")
ADAPTER = "AGATCGGAAGAGCACACGTCTGAACTCCAGTCAC"
Q_THRESHOLDS = (60, 50, 40, 30, 20, 10, 1, 0)
NON_ACGT = re.compile("[^ACGT]")
COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")
BASES = "ACGT"


def log(msg):
    print(f"[eval] {msg}", file=sys.stderr, flush=True)


def revcomp(s):
    return s.translate(COMP)[::-1]


def pct(x, n, digits=2):
    return f"{100.0 * x / n:.{digits}f}" if n else "-"


def ratio(x, n):
    return x / n if n else 0.0


def md_table(headers, rows):
    """Markdown table; the first column left-aligned, the rest right-aligned."""
    out = ["| " + " | ".join(headers) + " |",
           "| --- |" + " ---: |" * (len(headers) - 1)]
    for row in rows:
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


# ------------------------------------------------------------------ sequences and files

def read_fasta(path):
    """[(name, upper-case sequence)] from a FASTA file, plain or gzip."""
    out, name, chunks = [], None, []
    with simulate.open_text(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if name is not None:
                    out.append((name, "".join(chunks).upper()))
                name, chunks = line[1:].split()[0], []
            else:
                chunks.append(line.strip())
    if name is not None:
        out.append((name, "".join(chunks).upper()))
    return out


def write_fasta(path, contigs, width=70):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        for name, seq in contigs:
            fh.write(f">{name}\n")
            for i in range(0, len(seq), width):
                fh.write(seq[i:i + width] + "\n")
    os.replace(tmp, path)
    for ext in (".fai",):
        if os.path.exists(path + ext):
            os.remove(path + ext)


def write_fastq(path, records):
    """records: iterable of (name, seq, qual). Returns the count."""
    n = 0
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        for name, seq, qual in records:
            fh.write(f"@{name}\n{seq}\n+\n{qual}\n")
            n += 1
    os.replace(tmp, path)
    return n


def prepared_ref(src, workdir, name=None):
    """A re-wrapped copy of ``src`` under WORKDIR/refs (Mason and razers3 want constant line width)."""
    d = os.path.join(workdir, "refs")
    os.makedirs(d, exist_ok=True)
    base = name or re.sub(r"\.(fa|fasta|fna)(\.gz)?$", "", os.path.basename(src))
    dst = os.path.join(d, base + ".fa")
    simulate.prepare_reference(src, dst)
    return dst


def cached(out_dir, params, outputs):
    """True when ``out_dir``/params.json equals ``params`` and every output exists (reuse them)."""
    p = os.path.join(out_dir, "params.json")
    if not all(os.path.exists(o) for o in outputs) or not os.path.exists(p):
        return False
    with open(p) as fh:
        return json.load(fh) == json.loads(json.dumps(params))


def save_params(out_dir, params):
    with open(os.path.join(out_dir, "params.json"), "w") as fh:
        json.dump(params, fh, indent=1)


def sh(cmd, log_path):
    """Run a shell pipeline (bash, pipefail); stderr to ``log_path``. Raises on failure."""
    with open(log_path, "a") as fh:
        fh.write("# " + cmd + "\n")
        fh.flush()
        r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], stdout=fh, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"command failed (exit {r.returncode}): {cmd}\n{tail(log_path)}")


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as fh:
            return fh.read()[-n:]
    except OSError:
        return ""


def open_sam(path):
    import pysam
    save = pysam.set_verbosity(0)
    try:
        return pysam.AlignmentFile(path, check_sq=False)
    finally:
        pysam.set_verbosity(save)


def unclipped_start0(r):
    clip = 0
    for op, n in r.cigartuples or ():
        if op in (4, 5):
            clip += n
        else:
            break
    return r.reference_start - clip


def has_soft_clip(r):
    return any(op == 4 for op, _ in (r.cigartuples or ()))


def primaries(path):
    """Yield (name, record or None if unmapped) for primary records (mate suffix /1 /2 dropped)."""
    with open_sam(path) as sam:
        for r in sam:
            if r.flag & 0x900:
                continue
            yield score._strip_mate(r.query_name), (None if r.is_unmapped else r)


def placed(t_contig, t_start0, t_unclipped0, t_strand, contig, start0, unclipped0, strand, tol):
    """score.py's rule: contig and strand right, alignment start or unclipped start within tol."""
    return (contig == t_contig and strand == t_strand
            and min(abs(start0 - t_start0), abs(unclipped0 - t_unclipped0)) <= tol)


# ------------------------------------------------------------------ mappers

class Mapper:
    """One tool to compare: kind 'pymap' (REF READS [MATES] -o OUT -t T [--index IDX]), or a peer
    writing SAM on stdout: 'bwa' (bwa mem), 'bowtie2', 'minimap2' (-ax sr). ``reads`` is a path or,
    for pairs, a (read 1, read 2) tuple."""

    def __init__(self, label, kind, cmd, args=()):
        self.label, self.kind = label, kind
        self.cmd = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        self.args = list(args)
        self.index_path = {}
        self.rebuild = False   # True: build the pymap index again even when one is saved

    def describe(self):
        return " ".join(shlex.quote(c) for c in self.cmd + self.args)

    def _index_cmd(self):
        """'pymap align' -> 'pymap index' plus the seeder options of the arguments (they shape the index)."""
        if "align" not in self.cmd:
            return None
        i = len(self.cmd) - 1 - self.cmd[::-1].index("align")
        extra, a = [], self.cmd[i + 1:] + self.args
        for j, x in enumerate(a):
            if x in ("--seeder", "--seeder-opt") and j + 1 < len(a):
                extra += [x, a[j + 1]]
            elif x.startswith(("--seeder=", "--seeder-opt=")):
                extra.append(x)
        return self.cmd[:i] + ["index"] + extra

    def _peer_index(self, ref_fa, threads):
        """(command, files it writes, prefix to pass) of a peer's index next to ``ref_fa``."""
        if self.kind == "bwa":
            return (f"bwa index {shlex.quote(ref_fa)}",
                    [ref_fa + e for e in (".bwt", ".sa", ".pac", ".ann", ".amb")], ref_fa)
        if self.kind == "bowtie2":
            return (f"bowtie2-build --threads {threads} {shlex.quote(ref_fa)} {shlex.quote(ref_fa)}",
                    [ref_fa + e for e in (".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2",
                                          ".rev.2.bt2")], ref_fa)
        mmi = ref_fa + ".sr.mmi"   # minimap2
        return f"minimap2 -x sr -d {shlex.quote(mmi)} {shlex.quote(ref_fa)}", [mmi], mmi

    def build_index(self, ref_fa, threads):
        """Build the index once per reference (and per pymap command). Returns seconds (None: reused)."""
        if self.kind != "pymap":
            cmd, files, prefix = self._peer_index(ref_fa, threads)
            self.index_path[ref_fa] = prefix
            if all(os.path.exists(f) and os.path.getmtime(f) >= os.path.getmtime(ref_fa) for f in files):
                return None
            t0 = time.perf_counter()
            sh(cmd, f"{ref_fa}.{self.kind}_index.log")
            return time.perf_counter() - t0
        icmd = self._index_cmd()
        if icmd is None:
            return None  # unknown command shape: pymap align builds (and saves) its own index
        tag = hashlib.sha1(" ".join(icmd).encode()).hexdigest()[:8]
        idx = f"{ref_fa}.{tag}.pymap.idx"
        if (not self.rebuild and os.path.exists(idx)
                and os.path.getmtime(idx) >= os.path.getmtime(ref_fa)):
            self.index_path[ref_fa] = idx
            return None
        logp = f"{ref_fa}.{tag}.index.log"
        t0 = time.perf_counter()
        cmd = icmd + [ref_fa, "-o", idx, "-t", str(threads)]
        with open(logp, "w") as fh:
            fh.write("# " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            fh.flush()
            r = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
        if r.returncode or not os.path.exists(idx):
            log(f"{self.label}: index command failed ({logp}); pymap align will build its own")
            return None
        self.index_path[ref_fa] = idx
        return time.perf_counter() - t0

    def align_cmd(self, ref_fa, reads, out_sam, threads):
        """(command list, stdout path or None). ``reads`` is a path or a pair of paths."""
        rr = list(reads) if isinstance(reads, (list, tuple)) else [reads]
        if self.kind == "bwa":
            return self.cmd + self.args + ["-t", str(threads), ref_fa] + rr, out_sam
        if self.kind == "bowtie2":
            files = ["-1", rr[0], "-2", rr[1]] if len(rr) == 2 else ["-U", rr[0]]
            return (self.cmd + self.args + ["-p", str(threads), "-x", self.index_path.get(ref_fa, ref_fa)]
                    + files, out_sam)
        if self.kind == "minimap2":
            idx = self.index_path.get(ref_fa, ref_fa)
            return self.cmd + self.args + ["-t", str(threads), idx] + rr, out_sam
        cmd = self.cmd + self.args + [ref_fa] + rr + ["-o", out_sam, "-t", str(threads)]
        if ref_fa in self.index_path:
            cmd += ["--index", self.index_path[ref_fa]]
        return cmd, None

    def run(self, ref_fa, reads, out_sam, threads, log_path):
        """Map; returns bench_mapping.timed's dict (wall_s, cpu_s, max_rss_kb, ok, ...)."""
        cmd, stdout = self.align_cmd(ref_fa, reads, out_sam, threads)
        if os.path.exists(out_sam):
            os.remove(out_sam)
        shown = " ".join(shlex.quote(str(c)) for c in cmd)
        log(f"{self.label}: {shown}" + (f" > {out_sam}" if stdout else ""))
        res = bench_mapping.timed(cmd, stdout_path=stdout, log_path=log_path)
        if not res["ok"] or not os.path.exists(out_sam):
            res["ok"] = False
            log(f"{self.label}: FAILED (exit {res['returncode']}), log {log_path}:\n{tail(log_path)}")
        else:
            log(f"{self.label}: {res['wall_s']:.2f} s wall, {res['cpu_s'] or 0:.2f} s CPU")
        return res


def make_mappers(a, peers=()):
    pymap_args = shlex.split(a.pymap_args) + list(a.passthrough)
    mappers = [Mapper(a.label, "pymap", a.pymap, pymap_args)]
    for v in a.variant or ():
        if "=" not in v:
            raise SystemExit(f"eval_alignment: --variant wants LABEL=ARGS or LABEL=COMMAND, got {v!r}")
        label, val = v.split("=", 1)
        if val.strip().startswith("-"):
            mappers.append(Mapper(label, "pymap", a.pymap, shlex.split(val)))
        else:
            mappers.append(Mapper(label, "pymap", val))
    mappers.append(Mapper("bwa", "bwa", a.bwa, shlex.split(a.bwa_args)))
    mappers += peers
    if a.tools:
        want = [t.strip() for t in a.tools.split(",") if t.strip()]
        known = {m.label: m for m in mappers}
        for t in want:
            if t not in known:
                raise SystemExit(f"eval_alignment: --tools: unknown label {t!r} (known: {', '.join(known)})")
        mappers = [known[t] for t in want]
    for m in mappers:
        m.rebuild = a.rebuild_index
    labels = [m.label for m in mappers]
    if len(set(labels)) != len(labels):
        raise SystemExit(f"eval_alignment: duplicate tool labels {labels}")
    return mappers


def map_all(mappers, ref_fa, reads, out_dir, threads):
    """Index and map with every tool, one after the other. Returns {label: (sam path or None, timing)}."""
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for m in mappers:
        secs = m.build_index(ref_fa, threads)
        if secs is not None:
            log(f"{m.label}: index built in {secs:.1f} s")
        sam = os.path.join(out_dir, f"{m.label}.sam")
        res = m.run(ref_fa, reads, sam, threads, os.path.join(out_dir, f"{m.label}.log"))
        out[m.label] = (sam if res["ok"] else None, res)
    return out


def timing_json(res):
    keys = ("ok", "returncode", "wall_s", "cpu_s", "max_rss_kb", "others_cores", "cmd", "log")
    return {k: res.get(k) for k in keys}


# ------------------------------------------------------------------ genome sampling

class Genome:
    def __init__(self, contigs):
        self.names = [n for n, _ in contigs]
        self.seqs = [s for _, s in contigs]
        self.lens = [len(s) for s in self.seqs]

    def window(self, rng, length, exclude=None, tries=1000):
        """(contig index, 0-based start, sequence) of a random ACGT-only window of ``length``."""
        ok = [i for i, n in enumerate(self.lens) if n > length and i != exclude]
        if not ok:
            raise SystemExit(f"eval_alignment: no contig longer than {length} bp")
        weights = [self.lens[i] for i in ok]
        for _ in range(tries):
            ci = rng.choices(ok, weights)[0]
            p = rng.randrange(0, self.lens[ci] - length + 1)
            w = self.seqs[ci][p:p + length]
            if not NON_ACGT.search(w):
                return ci, p, w
        raise SystemExit("eval_alignment: could not find an ACGT-only window")


def substitute(seq, positions, rng):
    s = list(seq)
    for i in positions:
        s[i] = rng.choice([b for b in BASES if b != s[i]])
    return "".join(s)


def random_errors(seq, rate, rng, lo=0, hi=None):
    """Substitutions at ``rate`` per base in seq[lo:hi]."""
    hi = len(seq) if hi is None else hi
    if rate <= 0:
        return seq, 0
    pos = [i for i in range(lo, hi) if rng.random() < rate]
    return substitute(seq, pos, rng), len(pos)


def high_quals(rng, n):
    return "".join(chr(33 + rng.randint(30, 40)) for _ in range(n))


# ------------------------------------------------------------------ 1. indels

def left_normalise_del(seq, s, k):
    """Leftmost start of the deletion of seq[s:s+k] (0-based), as bcftools norm shifts it."""
    while s > 0 and seq[s - 1] == seq[s + k - 1]:
        s -= 1
    return s


def left_normalise_ins(seq, s, ins):
    """Leftmost position (insertion before seq[s]) and inserted sequence of an insertion."""
    while s > 0 and seq[s - 1] == ins[-1]:
        ins = seq[s - 1] + ins[:-1]
        s -= 1
    return s, ins


def simulate_indels(genome, n, length, rng, min_end=25, max_len=10, mismatches=0):
    """Reads with exactly one insertion or deletion of 1..max_len bp whose left-normalised position
    lies >= min_end bp from both read ends. Yields (name, seq, qual, truth dict)."""
    i = 0
    while i < n:
        typ = "D" if rng.random() < 0.5 else "I"
        k = rng.randint(1, max_len)
        span = length + k if typ == "D" else length - k
        ci, p, w = genome.window(rng, span)
        contig = genome.seqs[ci]
        if typ == "D":
            a = rng.randint(min_end, length - min_end)        # read bases before the deletion
            read = w[:a] + w[a + k:]
            s0 = p + a
            s = left_normalise_del(contig, s0, k)
            allele = contig[s:s + k]
            read_end = a                                        # read coord just after the original event
        else:
            ins = "".join(rng.choice(BASES) for _ in range(k))
            a = rng.randint(min_end, length - min_end - k)
            read = w[:a] + ins + w[a:]
            s0 = p + a
            s, allele = left_normalise_ins(contig, s0, ins)
            read_end = a + k
        lo = s - p                                              # read coord of the normalised event
        if lo < min_end:
            continue
        if mismatches:
            allowed = [j for j in range(length) if j < lo - 10 or j >= read_end + 10]
            read = substitute(read, rng.sample(allowed, min(mismatches, len(allowed))), rng)
        strand = "-" if rng.random() < 0.5 else "+"
        if strand == "-":
            read = revcomp(read)
        name = f"ind{i}"
        t = dict(contig=genome.names[ci], pos0=p, strand=strand, type=typ, len=k, norm0=s, orig0=s0,
                 allele=allele)
        yield name, read, "I" * length, t
        i += 1


def indel_ops(r):
    """[(op 'I'/'D', length, 0-based reference position where the op starts)]."""
    out, pos = [], r.reference_start
    for op, n in r.cigartuples or ():
        if op == 1:
            out.append(("I", n, pos))
        elif op == 2:
            out.append(("D", n, pos))
            pos += n
        elif op in (0, 3, 7, 8):
            pos += n
    return out


def score_indels(truth, sam, tol):
    keys = ("reads", "mapped", "placed", "one_right", "at_norm", "at_orig_not_norm", "one_wrong",
            "multi", "none_clipped", "none_unclipped")
    c = dict.fromkeys(keys, 0)
    by_class = {}
    c["reads"] = len(truth)
    for name, r in primaries(sam):
        t = truth.get(name)
        if t is None:
            continue
        cls = f"{t['type']} {'1-3' if t['len'] <= 3 else '4-6' if t['len'] <= 6 else '7-10'}"
        b = by_class.setdefault(cls, dict(reads=0, one_right=0, at_norm=0))
        if r is None:
            continue
        c["mapped"] += 1
        strand = "-" if r.is_reverse else "+"
        if placed(t["contig"], t["pos0"], t["pos0"], t["strand"], r.reference_name, r.reference_start,
                  unclipped_start0(r), strand, tol):
            c["placed"] += 1
        ops = indel_ops(r)
        if not ops:
            c["none_clipped" if has_soft_clip(r) else "none_unclipped"] += 1
        elif len(ops) > 1:
            c["multi"] += 1
        elif ops[0][0] == t["type"] and ops[0][1] == t["len"]:
            c["one_right"] += 1
            b["one_right"] += 1
            if r.reference_name == t["contig"] and ops[0][2] == t["norm0"]:
                c["at_norm"] += 1
                b["at_norm"] += 1
            elif r.reference_name == t["contig"] and ops[0][2] == t["orig0"]:
                c["at_orig_not_norm"] += 1
        else:
            c["one_wrong"] += 1
    for name, t in truth.items():
        cls = f"{t['type']} {'1-3' if t['len'] <= 3 else '4-6' if t['len'] <= 6 else '7-10'}"
        by_class.setdefault(cls, dict(reads=0, one_right=0, at_norm=0))["reads"] += 1
    c["by_class"] = by_class
    return c


def cmd_indels(a, mappers):
    ref_src = a.ref or ECOLI
    ref_fa = prepared_ref(ref_src, a.workdir)
    d = os.path.join(a.workdir, "indels")
    os.makedirs(d, exist_ok=True)
    reads, truth_path = os.path.join(d, "reads.fq"), os.path.join(d, "truth.json")
    params = dict(ref=os.path.abspath(ref_src), n=a.reads, length=a.length, seed=a.seed, min_end=a.min_end,
                  max_len=a.max_indel, mismatches=a.mismatches, version=1)
    if cached(d, params, [reads, truth_path]):
        with open(truth_path) as fh:
            truth = json.load(fh)
        log(f"indels: reusing {len(truth)} reads in {d}")
    else:
        rng = random.Random(a.seed)
        genome = Genome(read_fasta(ref_fa))
        truth = {}

        def gen():
            for name, s, q, t in simulate_indels(genome, a.reads, a.length, rng, a.min_end, a.max_indel,
                                                 a.mismatches):
                truth[name] = t
                yield name, s, q
        write_fastq(reads, gen())
        with open(truth_path, "w") as fh:
            json.dump(truth, fh)
        save_params(d, params)
        shifted = sum(1 for t in truth.values() if t["norm0"] != t["orig0"])
        log(f"indels: simulated {len(truth)} reads ({shifted} with an indel that left-normalisation moves)")
    runs = map_all(mappers, ref_fa, reads, os.path.join(d, "runs"), a.threads)
    results = {}
    for m in mappers:
        sam, res = runs[m.label]
        results[m.label] = dict(timing=timing_json(res), command=m.describe(),
                                score=score_indels(truth, sam, a.tolerance) if sam else None)
    n = len(truth)
    rows = []
    for label, e in results.items():
        s = e["score"]
        if s is None:
            rows.append([label, "FAILED"] + [""] * 8)
            continue
        rows.append([label, pct(s["mapped"], n), pct(s["placed"], n), pct(s["one_right"], n),
                     pct(s["at_norm"], n), pct(s["at_orig_not_norm"], n), pct(s["multi"], n),
                     pct(s["one_wrong"], n), pct(s["none_clipped"], n), pct(s["none_unclipped"], n)])
    print(f"\n### indels: {n} reads of {a.length} bp, one 1-{a.max_indel} bp indel each "
          f"(>= {a.min_end} bp from the ends), {a.mismatches} extra mismatches; "
          f"{os.path.basename(ref_src)}\n")
    print(md_table(["tool", "mapped %", "placed %", "one I/D, right type+len %", "... at left-norm pos %",
                    "... at unnormalised pos %", "several I/D ops %", "one I/D, wrong type/len %",
                    "no I/D, clipped %", "no I/D, unclipped %"], rows))
    classes = sorted({k for e in results.values() if e["score"] for k in e["score"]["by_class"]},
                     key=lambda x: (x[0], int(x.split()[1].split("-")[0])))
    if classes:
        rows = []
        for cls in classes:
            row = [cls]
            for label, e in results.items():
                b = (e["score"] or {}).get("by_class", {}).get(cls)
                row.append(f"{pct(b['one_right'], b['reads'], 1)} / {pct(b['at_norm'], b['reads'], 1)}"
                           if b else "-")
            rows.append(row)
        print("\nBy type and length (% of those reads: one I/D right type+len / "
              "at left-normalised position):\n")
        print(md_table(["indel"] + list(results), rows))
    return dict(subcommand="indels", reads=n, params=params, results=results)


# ------------------------------------------------------------------ 2. variants

def parse_vcf(path, min_qual=None):
    """{(chrom, pos, ref, alt): (qual, genotype tuple or None)} of a normalised, split VCF."""
    out = {}
    with simulate.open_text(path) as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            f = line.rstrip("\n").split("\t")
            chrom, pos, ref, alts, qual = f[0], int(f[1]), f[3].upper(), f[4].upper(), f[5]
            q = float(qual) if qual not in (".", "") else None
            if min_qual is not None and q is not None and q < min_qual:
                continue
            gt = None
            if len(f) > 9:
                fmt = f[8].split(":")
                if "GT" in fmt:
                    g = f[9].split(":")[fmt.index("GT")]
                    gt = tuple(sorted(x for x in re.split(r"[/|]", g)))
            for k, alt in enumerate(alts.split(",")):
                if alt in ("*", ".") or alt.startswith("<"):
                    continue
                if gt is not None and str(k + 1) not in gt:
                    continue  # this allele is not carried by the sample
                out[(chrom, pos, ref, alt)] = (q, gt)
    return out


def fix_mason_vcf(src, dst):
    """Mason writes FORMAT '.' with a genotype in the sample column (e.g. '1|2'), which bcftools
    reads as no genotype; write a copy with FORMAT 'GT' and its header line."""
    with open(src) as fin, open(dst, "w") as fout:
        for line in fin:
            if line.startswith("#CHROM"):
                fout.write('##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">\n')
            elif not line.startswith("#"):
                f = line.rstrip("\n").split("\t")
                if len(f) > 9 and f[8] == ".":
                    f[8] = "GT"
                line = "\t".join(f) + "\n"
            fout.write(line)


def var_class(key):
    _, _, ref, alt = key
    if len(ref) == 1 and len(alt) == 1:
        return "snp"
    if len(ref) != len(alt):
        return "indel"
    return "other"


def compare_vcf(truth, calls):
    res = {}
    for cls in ("snp", "indel", "other"):
        t = {k for k in truth if var_class(k) == cls}
        c = {k for k in calls if var_class(k) == cls}
        tp = t & c
        gt_ok = sum(1 for k in tp if truth[k][1] is not None and calls[k][1] is not None
                    and truth[k][1] == calls[k][1])
        res[cls] = dict(truth=len(t), calls=len(c), tp=len(tp), fp=len(c - t), fn=len(t - c),
                        recall=ratio(len(tp), len(t)), precision=ratio(len(tp), len(c)), gt_match=gt_ok)
    return res


def seg_name(name, start, end):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + f"_{start}_{end}"


def cmd_variants(a, mappers):
    mason = simulate.tool("mason_variator")
    mason_sim = simulate.tool("mason_simulator")
    ref_src = a.ref or ECOLI
    d = os.path.join(a.workdir, "variants", f"p{a.ploidy}" + ("_pe" if a.paired else ""))
    os.makedirs(d, exist_ok=True)
    seg_fa = os.path.join(d, "segment.fa")
    truth_vcf, truth_norm = os.path.join(d, "truth.vcf"), os.path.join(d, "truth.norm.vcf")
    r1, r2 = os.path.join(d, "reads_1.fq"), os.path.join(d, "reads_2.fq")
    reads_se = os.path.join(d, "reads.fq")
    params = dict(ref=os.path.abspath(ref_src), start=a.seg_start, length=a.seg_length, ploidy=a.ploidy,
                  paired=a.paired, coverage=a.coverage, reads=a.reads, read_length=a.length, seed=a.seed,
                  snp_rate=a.snp_rate, indel_rate=a.indel_rate, max_indel=a.max_indel, version=2)
    log_path = os.path.join(d, "commands.log")
    if cached(d, params, [seg_fa, truth_norm, reads_se]):
        log(f"variants: reusing the simulation in {d}")
    else:
        open(log_path, "w").close()
        contigs = read_fasta(ref_src)
        name, seq = contigs[0]
        end = min(len(seq), a.seg_start + a.seg_length)
        write_fasta(seg_fa, [(seg_name(name, a.seg_start, end), seq[a.seg_start:end])])
        seg_len = end - a.seg_start
        sh(f"samtools faidx {shlex.quote(seg_fa)}", log_path)
        sh(" ".join(shlex.quote(x) for x in [
            mason, "-ir", seg_fa, "-ov", truth_vcf, "-s", str(a.seed), "-n", str(a.ploidy),
            "--snp-rate", str(a.snp_rate), "--small-indel-rate", str(a.indel_rate),
            "--min-small-indel-size", "1", "--max-small-indel-size", str(a.max_indel),
            "--sv-indel-rate", "0", "--sv-inversion-rate", "0", "--sv-translocation-rate", "0",
            "--sv-duplication-rate", "0"]), log_path)
        fix_mason_vcf(truth_vcf, truth_vcf + ".gt.vcf")
        sh(f"bcftools norm -f {shlex.quote(seg_fa)} -m -any -c w -Ov -o {shlex.quote(truth_norm)} "
           f"{shlex.quote(truth_vcf + '.gt.vcf')}", log_path)
        per_frag = a.length * (2 if a.paired else 1)
        n_frag = a.reads or max(1, int(round(a.coverage * seg_len / per_frag)))
        cmd = [mason_sim, "-ir", seg_fa, "-iv", truth_vcf, "-n", str(n_frag), "--illumina-read-length",
               str(a.length), "--seed", str(a.seed), "--num-threads", "1", "-o", r1]
        if a.paired:
            cmd += ["-or", r2, "--fragment-mean-size", str(max(300, 2 * a.length + 100))]
        elif a.length > 200:
            cmd += ["--fragment-mean-size", str(2 * a.length)]
        sh(" ".join(shlex.quote(x) for x in cmd), log_path)
        # one single-end file (mates renamed NAME_1 / NAME_2): what every tool maps
        recs = []
        for fq, suffix in ((r1, "_1"), (r2, "_2")) if a.paired else ((r1, ""),):
            recs.append(((simulate.strip_mate(h) + suffix, s, q) for h, s, q in simulate.fastq_records(fq)))
        write_fastq(reads_se, (x for g in recs for x in g))
        save_params(d, params)
    truth = parse_vcf(truth_norm)
    n_reads = sum(1 for _ in simulate.fastq_records(reads_se))
    log(f"variants: {len(truth)} true variants, {n_reads} reads")
    run_dir = os.path.join(d, "runs")
    os.makedirs(run_dir, exist_ok=True)
    jobs = [(m, reads_se) for m in mappers]
    if a.paired and a.bwa_pe:
        jobs += [(Mapper("bwa-pe", "bwa", a.bwa, shlex.split(a.bwa_args)), (r1, r2))]
    results = {}
    ploidy = "--ploidy 1" if a.ploidy == 1 else ""
    for m, rd in jobs:
        secs = m.build_index(seg_fa, a.threads)
        if secs is not None:
            log(f"{m.label}: index built in {secs:.1f} s")
        sam = os.path.join(run_dir, f"{m.label}.sam")
        res = m.run(seg_fa, rd, sam, a.threads, os.path.join(run_dir, f"{m.label}.log"))
        entry = dict(timing=timing_json(res), command=m.describe(), score=None)
        results[m.label] = entry
        if not res["ok"]:
            continue
        bam = os.path.join(run_dir, f"{m.label}.bam")
        calls = os.path.join(run_dir, f"{m.label}.calls.norm.vcf")
        clog = os.path.join(run_dir, f"{m.label}.calls.log")
        open(clog, "w").close()
        try:
            sh(f"samtools sort -@ {a.threads} -o {shlex.quote(bam)} {shlex.quote(sam)} && "
               f"samtools index {shlex.quote(bam)}", clog)
            t0 = time.perf_counter()
            sh(f"bcftools mpileup -f {shlex.quote(seg_fa)} -Ou {shlex.quote(bam)} | "
               f"bcftools call -mv {ploidy} -Ou | "
               f"bcftools norm -f {shlex.quote(seg_fa)} -m -any -Ov -o {shlex.quote(calls)}", clog)
            log(f"{m.label}: called in {time.perf_counter() - t0:.1f} s")
        except RuntimeError as e:
            log(f"{m.label}: calling FAILED: {e}")
            continue
        os.remove(sam)
        entry["score"] = {f"QUAL>={q:g}": compare_vcf(truth, parse_vcf(calls, q)) for q in (0, a.min_qual)}
    print(f"\n### variants: {a.seg_length} bp of {os.path.basename(ref_src)}, mason_variator "
          f"(SNP {a.snp_rate}, indels {a.indel_rate} of 1-{a.max_indel} bp, ploidy {a.ploidy}), "
          f"{n_reads} reads of {a.length} bp{' (pairs mapped as single reads)' if a.paired else ''}, "
          f"{a.coverage}x\n")
    tc = {cls: sum(1 for k in truth if var_class(k) == cls) for cls in ("snp", "indel", "other")}
    rows = []
    for label, e in results.items():
        if e["score"] is None:
            rows.append([label, "FAILED"] + [""] * 9)
            continue
        for filt, s in e["score"].items():
            sn, ind = s["snp"], s["indel"]
            row = [label, filt, f"{100 * sn['recall']:.2f}", f"{100 * sn['precision']:.2f}",
                   f"{sn['tp']} / {sn['fp']} / {sn['fn']}", f"{100 * ind['recall']:.2f}",
                   f"{100 * ind['precision']:.2f}", f"{ind['tp']} / {ind['fp']} / {ind['fn']}"]
            if a.ploidy == 2:
                row.append(f"{pct(sn['gt_match'], sn['tp'], 1)} / {pct(ind['gt_match'], ind['tp'], 1)}")
            rows.append(row)
    hdr = ["tool", "calls", "SNP recall %", "SNP precision %", "SNP TP / FP / FN", "indel recall %",
           "indel precision %", "indel TP / FP / FN"]
    if a.ploidy == 2:
        hdr.append("genotype right % of TP, SNP / indel")
    print(f"Truth after bcftools norm: {tc['snp']} SNPs, {tc['indel']} indels, {tc['other']} other.\n")
    print(md_table(hdr, rows))
    return dict(subcommand="variants", params=params, truth_counts=tc, reads=n_reads, results=results)


# ------------------------------------------------------------------ 3. clipping

def unique_region(seq, rc, lo, hi, k=32, step=16):
    """True when every k-mer of seq[lo:hi] (step ``step``) occurs once in seq and its reverse
    complement together: no repeat copy elsewhere that would take the reads of this region."""
    lo, hi = max(0, lo), min(len(seq), hi)
    for i in range(lo, hi - k + 1, step):
        km = seq[i:i + k]
        if NON_ACGT.search(km) or seq.count(km) + rc.count(km) != 1:
            return False
    return True


def split_contigs(seq, n_contigs, gap, flank, rng, name="ctg", tries=40):
    """Cut ``seq`` into n contigs with ``gap`` bases dropped before, between and after them. Each
    gap is moved (up to a quarter contig) until the ``flank`` bp on both sides of every contig end
    are unique in ``seq`` (so that the reads overhanging an end have one true place). Returns
    [(name, start, end)] in ``seq`` coordinates."""
    usable = len(seq) - (n_contigs + 1) * gap
    if usable < n_contigs * max(1000, 4 * flank):
        raise SystemExit("eval_alignment: reference too short for --contigs/--gap")
    size = usable // n_contigs
    rc = revcomp(seq)
    gaps = []
    for i in range(n_contigs + 1):
        nominal = i * (size + gap) if i < n_contigs else len(seq) - gap
        for t in range(tries):
            g = nominal if t == 0 else nominal + rng.randint(-size // 4, size // 4)
            g = min(max(g, 0), len(seq) - gap)
            if i == 0 and t > 0:
                g = rng.randint(0, size // 4)
            if i == n_contigs and t > 0:
                g = len(seq) - gap - rng.randint(0, size // 4)
            ok = (i == 0 or unique_region(seq, rc, g - flank, g + flank)) and \
                 (i == n_contigs or unique_region(seq, rc, g + gap - flank, g + gap + flank))
            if ok:
                break
        else:
            log(f"clipping: no unique place for gap {i} after {tries} tries; keeping a repeated contig end")
        gaps.append(g)
    return [(f"{name}{i + 1:02d}", gaps[i] + gap, gaps[i + 1]) for i in range(n_contigs)]


def piece_truth(contig, start0, plen, offset, strand, length):
    """Truth of one aligned piece: reference interval [start0, start0+plen), and the unclipped start
    the alignment would have (read bases before the piece in SAM orientation extend it leftwards)."""
    before = offset if strand == "+" else length - offset - plen
    return dict(contig=contig, start0=start0, end0=start0 + plen, strand=strand,
                unclipped0=start0 - before)


def simulate_clipping(seq, layout, n, length, rng, a):
    """Reads of four classes from ``seq`` (the whole sequence, gaps included) with a reference made
    of the contigs in ``layout``. Yields (name, read, qual, truth)."""
    ctg = Genome([(nm, seq[s:e]) for nm, s, e in layout])
    classes = ("adapter", "lowqual", "overhang", "chimera")
    per = [n // 4 + (1 if i < n % 4 else 0) for i in range(4)]
    for cls, count in zip(classes, per):
        i = 0
        while i < count:
            strand = "-" if rng.random() < 0.5 else "+"
            name = f"{cls}{i}"
            if cls == "adapter":
                f = rng.randint(a.min_fragment, length - 10)
                ci, p, w = ctg.window(rng, f)
                w, _ = random_errors(w, a.error_rate, rng)
                frag = w if strand == "+" else revcomp(w)
                tail_len = length - f
                junk = (ADAPTER + "".join(rng.choice(BASES) for _ in range(max(0, tail_len - len(ADAPTER)))))
                read = frag + junk[:tail_len]
                qual = high_quals(rng, length)
                t = dict(cls=cls, a=piece_truth(ctg.names[ci], p, f, 0, strand, length), clean=True)
            elif cls == "lowqual":
                ci, p, w = ctg.window(rng, length)
                tl = rng.randint(10, 40)
                body = w if strand == "+" else revcomp(w)
                body, _ = random_errors(body, a.error_rate, rng, 0, length - tl)
                body, _ = random_errors(body, a.tail_error, rng, length - tl, length)
                read = body
                qual = high_quals(rng, length - tl) + "".join(chr(33 + rng.randint(2, 10)) for _ in range(tl))
                t = dict(cls=cls, a=piece_truth(ctg.names[ci], p, length, 0, strand, length), clean=False,
                         tail=tl)
            elif cls == "overhang":
                k = rng.randrange(len(layout))
                nm, cs, ce = layout[k]
                o = rng.randint(a.min_overhang, a.max_overhang)   # bases outside the contig
                at_start = rng.random() < 0.5
                g0 = cs - o if at_start else ce - (length - o)        # read start in seq coordinates
                w = seq[g0:g0 + length]
                if NON_ACGT.search(w):
                    continue
                w, _ = random_errors(w, a.error_rate, rng)
                read = w if strand == "+" else revcomp(w)
                inside = length - o
                p = 0 if at_start else (ce - cs) - inside              # contig coordinates of the inside part
                # offset of the inside part in the read (read orientation)
                fwd_offset = o if at_start else 0
                offset = fwd_offset if strand == "+" else length - fwd_offset - inside
                qual = high_quals(rng, length)
                t = dict(cls=cls, a=piece_truth(nm, p, inside, offset, strand, length), clean=True,
                         side="start" if at_start else "end")
            else:  # chimera
                la = a.chimera_long if a.chimera_long < length else (2 * length) // 3
                lb = length - la
                ci, p, w = ctg.window(rng, la)
                cj, q, v = ctg.window(rng, lb, exclude=ci)
                sb = "-" if rng.random() < 0.5 else "+"
                w, _ = random_errors(w, a.error_rate, rng)
                v, _ = random_errors(v, a.error_rate, rng)
                pa = w if strand == "+" else revcomp(w)
                pb = v if sb == "+" else revcomp(v)
                long_first = rng.random() < 0.5
                read = pa + pb if long_first else pb + pa
                off_a, off_b = (0, la) if long_first else (lb, 0)
                qual = high_quals(rng, length)
                t = dict(cls=cls, a=piece_truth(ctg.names[ci], p, la, off_a, strand, length),
                         b=piece_truth(ctg.names[cj], q, lb, off_b, sb, length), clean=True)
            yield name, read, qual, t
            i += 1


def match_piece(pc, contig, start0, end0, unclipped0, strand, tol):
    return placed(pc["contig"], pc["start0"], pc["unclipped0"], pc["strand"], contig, start0, unclipped0,
                  strand, tol) or (contig == pc["contig"] and strand == pc["strand"]
                                   and abs(end0 - pc["end0"]) <= tol)


def cigar_ref_len(cigar):
    return sum(int(n) for n, op in re.findall(r"(\d+)([MIDNSHP=X])", cigar) if op in "MDN=X")


def cigar_lead_clip(cigar):
    m = re.match(r"^(\d+)[SH]", cigar)
    return int(m.group(1)) if m else 0


def score_clipping(truth, sam, tol, clip_tol):
    keys = ("reads", "mapped", "placed", "clean", "soft_clipped", "primary_short", "sa", "sa_other",
            "mapq20", "wrong_mapq20")
    per = {}
    for t in truth.values():
        per.setdefault(t["cls"], dict.fromkeys(keys, 0))["reads"] += 1
    for name, r in primaries(sam):
        t = truth.get(name)
        if t is None or r is None:
            continue
        c = per[t["cls"]]
        c["mapped"] += 1
        strand = "-" if r.is_reverse else "+"
        args = (r.reference_name, r.reference_start, r.reference_end, unclipped_start0(r), strand, tol)
        on_a = match_piece(t["a"], *args)
        on_b = "b" in t and not on_a and match_piece(t["b"], *args)
        if has_soft_clip(r):
            c["soft_clipped"] += 1
        if r.mapping_quality >= 20:
            c["mapq20"] += 1
            if not (on_a or on_b):
                c["wrong_mapq20"] += 1
        if on_a:
            c["placed"] += 1
            # the non-reference bases soft-clipped: the reference interval is the piece's and no
            # more read bases than the piece's are aligned (not as insertions, not as mismatches)
            if (t["clean"] and abs(r.reference_start - t["a"]["start0"]) <= clip_tol
                    and abs(r.reference_end - t["a"]["end0"]) <= clip_tol
                    and r.query_alignment_length <= t["a"]["end0"] - t["a"]["start0"] + clip_tol):
                c["clean"] += 1
        elif on_b:
            c["primary_short"] += 1
        if r.has_tag("SA"):
            c["sa"] += 1
            other = t.get("b") if on_a else t.get("a") if on_b else None
            if other is not None:
                for ent in r.get_tag("SA").rstrip(";").split(";"):
                    f = ent.split(",")
                    if len(f) < 4:
                        continue
                    s0 = int(f[1]) - 1
                    e0 = s0 + cigar_ref_len(f[3])
                    if match_piece(other, f[0], s0, e0, s0 - cigar_lead_clip(f[3]), f[2], tol):
                        c["sa_other"] += 1
                        break
    return per


def cmd_clipping(a, mappers):
    ref_src = a.ref or ECOLI
    d = os.path.join(a.workdir, "clipping")
    os.makedirs(d, exist_ok=True)
    ref_fa = os.path.join(d, "contigs.fa")
    reads, truth_path = os.path.join(d, "reads.fq"), os.path.join(d, "truth.json")
    params = dict(ref=os.path.abspath(ref_src), n=a.reads, length=a.length, seed=a.seed, contigs=a.contigs,
                  gap=a.gap, error_rate=a.error_rate, tail_error=a.tail_error, min_fragment=a.min_fragment,
                  overhang=[a.min_overhang, a.max_overhang], chimera_long=a.chimera_long, version=2)
    if cached(d, params, [ref_fa, reads, truth_path]):
        with open(truth_path) as fh:
            truth = json.load(fh)
        log(f"clipping: reusing {len(truth)} reads in {d}")
    else:
        seq = read_fasta(ref_src)[0][1]
        rng = random.Random(a.seed)
        layout = split_contigs(seq, a.contigs, a.gap, a.length + 10, rng)
        write_fasta(ref_fa, [(nm, seq[s:e]) for nm, s, e in layout])
        truth = {}

        def gen():
            for name, s, q, t in simulate_clipping(seq, layout, a.reads, a.length, rng, a):
                truth[name] = t
                yield name, s, q
        write_fastq(reads, gen())
        with open(truth_path, "w") as fh:
            json.dump(truth, fh)
        save_params(d, params)
        log(f"clipping: {len(truth)} reads; reference of {a.contigs} contigs, {a.gap} bp dropped around each")
    runs = map_all(mappers, ref_fa, reads, os.path.join(d, "runs"), a.threads)
    results = {}
    for m in mappers:
        sam, res = runs[m.label]
        sc = score_clipping(truth, sam, a.tolerance, a.clip_tolerance) if sam else None
        results[m.label] = dict(timing=timing_json(res), command=m.describe(), score=sc)
    desc = dict(adapter=f"adapter read-through (fragment {a.min_fragment}-{a.length - 10} bp)",
                lowqual=f"low-quality tail (10-40 bp, {a.tail_error:.0%} errors)",
                overhang=f"contig-end overhang ({a.min_overhang}-{a.max_overhang} bp)",
                chimera="chimera (long + short piece, other contig)")
    rows = []
    for cls in ("adapter", "lowqual", "overhang", "chimera"):
        for label, e in results.items():
            s = (e["score"] or {}).get(cls)
            if s is None:
                rows.append([desc[cls], label, "FAILED"] + [""] * 7)
                continue
            n = s["reads"]
            rows.append([desc[cls], label, pct(s["mapped"], n), pct(s["placed"], n),
                         pct(s["clean"], n) if cls != "lowqual" else "-",
                         pct(s["soft_clipped"], n), f"{s['wrong_mapq20']}",
                         pct(s["primary_short"], n) if cls == "chimera" else "-",
                         pct(s["sa"], n), pct(s["sa_other"], n) if cls == "chimera" else "-"])
    n_all = len(truth)
    print(f"\n### clipping: {n_all} reads of {a.length} bp in four classes; reference: "
          f"{os.path.basename(ref_src)} cut into {a.contigs} contigs\n")
    print(md_table(["class", "tool", "mapped %", "placed %",
                    f"placed, clipped at the truth +-{a.clip_tolerance} %",
                    "soft-clipped %", "wrong MAPQ>=20", "primary on short piece %", "with SA %",
                    "SA at the other piece %"], rows))
    print("\nplaced = primary on the true contig and strand, start (or unclipped start, or end) within "
          f"{a.tolerance} bp of the (longer) piece's.")
    return dict(subcommand="clipping", reads=n_all, params=params, results=results)


# ------------------------------------------------------------------ 4. real

def real_sets(names=None):
    out = []
    for f in sorted(os.listdir(REAL_DIR)):
        m = re.match(r"(.+)_1\.f(ast)?q(\.gz)?$", f)
        if not m:
            continue
        base = m.group(1)
        ref = [os.path.join(REAL_DIR, base + e) for e in (".fa.gz", ".fa", ".fasta.gz", ".fasta")]
        ref = [r for r in ref if os.path.exists(r)]
        if ref and (not names or base in names):
            out.append((base, ref[0], os.path.join(REAL_DIR, f)))
    return out


def cmd_real(a, mappers):
    sets = real_sets([s for s in a.sets.split(",") if s] if a.sets else None)
    if not sets:
        raise SystemExit(f"eval_alignment: no real read sets under {REAL_DIR}")
    base_label = "bwa" if any(m.label == "bwa" for m in mappers) else mappers[0].label
    results = {}
    rows, agree_rows = [], []
    for name, ref_src, r1 in sets:
        d = os.path.join(a.workdir, "real", name)
        os.makedirs(d, exist_ok=True)
        ref_fa = prepared_ref(ref_src, a.workdir)
        reads = os.path.join(d, "reads_1.fq")
        params = dict(src=r1, n=a.reads, version=1)
        if not cached(d, params, [reads]):
            recs = simulate.fastq_records(r1)
            if a.reads:
                recs = (x for i, x in zip(range(a.reads), recs))
            write_fastq(reads, ((h.split()[0], s, q) for h, s, q in recs))
            save_params(d, params)
        n = sum(1 for _ in simulate.fastq_records(reads))
        runs = map_all(mappers, ref_fa, reads, os.path.join(d, "runs"), a.threads)
        per, places = {}, {}
        for m in mappers:
            sam, res = runs[m.label]
            if not sam:
                per[m.label] = dict(timing=timing_json(res), command=m.describe(), counts=None)
                continue
            c = dict(reads=0, mapped=0, mapq20=0, soft_clipped=0, supplementary=0)
            pl = {}
            with open_sam(sam) as fh:
                for r in fh:
                    if r.is_supplementary:
                        c["supplementary"] += 1
                        continue
                    if r.is_secondary:
                        continue
                    c["reads"] += 1
                    if r.is_unmapped:
                        continue
                    c["mapped"] += 1
                    c["mapq20"] += r.mapping_quality >= 20
                    c["soft_clipped"] += has_soft_clip(r)
                    pl[r.query_name] = (r.reference_name, "-" if r.is_reverse else "+", unclipped_start0(r))
            places[m.label] = pl
            per[m.label] = dict(timing=timing_json(res), command=m.describe(), counts=c)
        base = per.get(base_label, {}).get("counts")
        for label, e in per.items():
            c = e["counts"]
            if c is None:
                rows.append([name, label, "FAILED"] + [""] * 5)
                continue
            diff = "-"
            if base and label != base_label:
                diff = f"{100.0 * (c['mapped'] - base['mapped']) / n:+.2f}"
            rows.append([name, label, n, c["mapped"], pct(c["mapped"], n), diff, pct(c["mapq20"], n),
                         pct(c["soft_clipped"], c["mapped"]), c["supplementary"]])
            if label != base_label and base:
                pb, pt = places[base_label], places[label]
                both = set(pb) & set(pt)
                same = sum(1 for k in both
                           if pb[k][:2] == pt[k][:2] and abs(pb[k][2] - pt[k][2]) <= a.tolerance)
                ag = dict(both=len(both), same=same, only_tool=len(set(pt) - set(pb)),
                          only_base=len(set(pb) - set(pt)))
                e["agreement_with_" + base_label] = ag
                agree_rows.append([name, label, ag["both"], pct(same, len(both)), ag["only_tool"],
                                   ag["only_base"]])
        results[name] = dict(reads=n, ref=ref_src, reads_file=r1, tools=per)
    print(f"\n### real: read 1 of each set under {REAL_DIR}, single-end\n")
    print(md_table(["set", "tool", "reads", "mapped", "mapped %", f"diff vs {base_label}, % of reads",
                    "MAPQ>=20 %", "soft-clipped % of mapped", "supplementary records"], rows))
    if agree_rows:
        print(f"\nAgreement with {base_label} (same contig and strand, unclipped start within "
              f"{a.tolerance} bp):\n")
        print(md_table(["set", "tool", "mapped by both", "same place %", "mapped only by tool",
                        f"mapped only by {base_label}"], agree_rows))
    return dict(subcommand="real", results=results, baseline=base_label)


# ------------------------------------------------------------------ 5. mason

def mason_set(a, ref_src, length, profile, n, seed):
    stem = os.path.basename(ref_src).split(".")[0]           # one directory per reference
    d = os.path.join(a.workdir, "sim", f"mason_{stem}_{profile}{length}_n{n}_s{seed}")
    info_path = os.path.join(d, "simulate.json")
    if os.path.exists(info_path):
        with open(info_path) as fh:
            info = json.load(fh)
        if (info.get("ref") == os.path.abspath(ref_src) and info.get("n_reads") == n
                and info.get("seed") == seed and info.get("length") == length
                and info.get("profile") == profile
                and os.path.exists(info["reads"]) and os.path.exists(info["truth"])):
            log(f"mason: reusing {d}")
            return info
    log(f"mason: simulating {n} reads, {length} bp, profile {profile}, seed {seed}")
    return simulate.simulate(ref_src, d, length, profile, n, seed)


def cmd_mason(a, mappers):
    ref_src = a.ref or ECOLI
    ref_fa = prepared_ref(ref_src, a.workdir)
    results = {}
    summary_rows, q_blocks = [], []
    for profile in [p for p in a.profiles.split(",") if p]:
        info = mason_set(a, ref_src, a.length, profile, a.reads, a.seed)
        truth = score.load_truth(info["truth"])
        set_name = f"{profile}{a.length}"
        runs = map_all(mappers, ref_fa, info["reads"], os.path.join(a.workdir, "mason", set_name), a.threads)
        per = {}
        for m in mappers:
            sam, res = runs[m.label]
            s = score.score_sam(truth, sam, a.tolerance, m.label) if sam else None
            ql = score.mapq_table(s["mapq_hist"], s["wrong_hist"], s["reads"], Q_THRESHOLDS) if s else None
            per[m.label] = dict(timing=timing_json(res), command=m.describe(),
                                score=score.strip_hist(s) if s else None, qlines=ql)
            if s is None:
                summary_rows.append([set_name, m.label, "FAILED"] + [""] * 6)
                continue
            q20 = score.mapq_table(s["mapq_hist"], s["wrong_hist"], s["reads"], (20,))[0]
            summary_rows.append([set_name, m.label, pct(s["mapped"], s["reads"]),
                                 f"{100 * s['sensitivity']:.2f}", f"{100 * s['optimal']:.3f}", q20["wrong"],
                                 score._rate(q20["wrong_rate"]),
                                 pct(q20["mapped"], s["reads"]), score._violations_text(s)])
        qrows = []
        for i, q in enumerate(Q_THRESHOLDS):
            row = [q]
            for label, e in per.items():
                ql = e["qlines"]
                row.append("-" if ql is None else
                           f"{ql[i]['mapped']} / {ql[i]['wrong']} / {score._rate(ql[i]['wrong_rate'])}")
            qrows.append(row)
        q_blocks.append((set_name, list(per), qrows))
        results[set_name] = dict(simulation=info, reads=len(truth), tools=per)
    print(f"\n### mason: {a.reads} Mason reads per set, {os.path.basename(ref_src)}; correct = true contig, "
          f"strand, start within {a.tolerance} bp\n")
    print(md_table(["set", "tool", "mapped %", "sensitivity %", "optimal %", "wrong MAPQ>=20",
                    "wrong rate MAPQ>=20", "MAPQ>=20 % of reads", "violations"], summary_rows))
    for set_name, labels, qrows in q_blocks:
        print(f"\nQ-lines, {set_name} (primary alignments with MAPQ >= Q: count / wrong / error rate):\n")
        print(md_table(["MAPQ >="] + labels, qrows))
    return dict(subcommand="mason", results=results)


# ------------------------------------------------------------------ 6. speed

def cmd_speed(a, mappers):
    ref_src = a.ref or ECOLI
    ref_fa = prepared_ref(ref_src, a.workdir)
    info = mason_set(a, ref_src, a.length, a.profile, a.reads, a.seed)
    n = info["n_reads"]
    d = os.path.join(a.workdir, "speed")
    os.makedirs(d, exist_ok=True)
    index_s = {}
    for m in mappers:  # indexes first: not part of the timings
        index_s[m.label] = m.build_index(ref_fa, a.threads)
    results, rows = {}, []
    for m in mappers:
        runs = []
        for i in range(a.runs):
            if a.wait_idle is not None:
                busy, waited = bench_mapping.wait_idle(a.wait_idle, a.wait_max)
                log(f"{m.label}: {busy:.2f} cores busy before run {i + 1} (waited {waited:.0f} s)")
            sam = os.path.join(d, f"{m.label}.sam")
            res = m.run(ref_fa, info["reads"], sam, a.threads, os.path.join(d, f"{m.label}.{i + 1}.log"))
            runs.append(res)
            if not res["ok"]:
                break
        ok = runs and runs[-1]["ok"]
        warm = runs[-1] if ok else None
        mapped = None
        if ok:
            mapped = sum(1 for _, r in primaries(os.path.join(d, f"{m.label}.sam")) if r is not None)
        results[m.label] = dict(command=m.describe(), runs=[timing_json(r) for r in runs], reads=n,
                                index_s=index_s[m.label], mapped=mapped,
                                reads_per_s=n / warm["wall_s"] if warm and warm["wall_s"] else None)
        if not ok:
            rows.append([m.label, "FAILED"] + [""] * 6)
            continue
        others = warm.get("others_cores")
        rows.append([m.label, f"{runs[0]['wall_s']:.2f}", f"{warm['wall_s']:.2f}",
                     f"{n / warm['wall_s']:,.0f}", f"{warm['cpu_s'] or 0:.2f}",
                     f"{(warm['max_rss_kb'] or 0) / 1024:.0f}", pct(mapped, n),
                     "-" if others is None else f"{others:.2f}"])
    print(f"\n### speed: {n} Mason reads ({a.profile} profile, {a.length} bp), {os.path.basename(ref_src)}, "
          f"-t {a.threads}; {a.runs} runs per tool, the last (warm) one shown; indexes built beforehand\n")
    print(md_table(["tool", "first run s", "warm wall s", "reads/s", "CPU s", "peak RSS MiB", "mapped %",
                    "other load, cores"], rows))
    base = results.get("bwa")
    if base and base["reads_per_s"]:
        for label, e in results.items():
            if label != "bwa" and e["reads_per_s"]:
                print(f"\n{label} / bwa reads/s: {e['reads_per_s'] / base['reads_per_s']:.2f}")
    return dict(subcommand="speed", simulation=info, results=results)


# ------------------------------------------------------------------ 7. pairs

PEERS = ("bowtie2", "minimap2")


def make_peers(a):
    """bowtie2 and minimap2 -ax sr (``--peers``) for the pairs subcommand, where installed."""
    if getattr(a, "command", None) != "pairs":
        return []
    out = []
    for name in [x.strip() for x in a.peers.split(",") if x.strip() and x.strip() != "none"]:
        if name not in PEERS:
            raise SystemExit(f"eval_alignment: --peers: unknown peer {name!r} (known: {', '.join(PEERS)})")
        need = ("bowtie2", "bowtie2-build") if name == "bowtie2" else ("minimap2",)
        missing = [x for x in need if shutil.which(x) is None]
        if missing:
            log(f"pairs: {name} left out, not installed ({', '.join(missing)}; apt-get install {name})")
            continue
        if name == "bowtie2":
            out.append(Mapper("bowtie2", "bowtie2", "bowtie2", shlex.split(a.bowtie2_args)))
        else:
            out.append(Mapper("minimap2", "minimap2", ["minimap2", "-ax", "sr"],
                              shlex.split(a.minimap2_args)))
    return out


def allot_contigs(lengths, k):
    """How many of ``k`` contigs each sequence is cut into: by length (largest remainder), >= 1 each."""
    if k < len(lengths):
        raise SystemExit(f"eval_alignment: --contigs {k} is fewer than the reference's {len(lengths)} "
                         "sequences")
    total = sum(lengths)
    share = [k * n / total for n in lengths]
    alloc = [max(1, int(x)) for x in share]
    while sum(alloc) < k:
        alloc[max(range(len(alloc)), key=lambda j: share[j] - alloc[j])] += 1
    while sum(alloc) > k:
        alloc[max((j for j in range(len(alloc)) if alloc[j] > 1), key=lambda j: alloc[j] - share[j])] -= 1
    return alloc


def pairs_reference(a, ref_src):
    """The reference to simulate from and map to: ``ref_src`` re-wrapped, or with ``--contigs K`` every
    sequence cut into contigs (K in all, shared by length) by the clipping subcommand's split_contigs,
    ``--gap`` bp dropped around each. Contig ends need no unique flanks here (Mason draws every
    fragment inside one contig, no read overhangs an end). Returns (path, number of contigs)."""
    if not a.contigs:
        ref_fa = prepared_ref(ref_src, a.workdir)
        return ref_fa, len(simulate.read_lengths(ref_fa))
    base = re.sub(r"\.(fa|fasta|fna)(\.gz)?$", "", os.path.basename(ref_src))
    d = os.path.join(a.workdir, "refs", f"{base}_c{a.contigs}_g{a.gap}_s{a.seed}")
    os.makedirs(d, exist_ok=True)
    ref_fa = os.path.join(d, "ref.fa")
    params = dict(ref=os.path.abspath(ref_src), contigs=a.contigs, gap=a.gap, seed=a.seed, version=1)
    if cached(d, params, [ref_fa]) and os.path.getmtime(ref_fa) >= os.path.getmtime(ref_src):
        return ref_fa, a.contigs
    seqs = read_fasta(ref_src)
    rng = random.Random(a.seed)
    out = []
    for (name, seq), k in zip(seqs, allot_contigs([len(s) for _, s in seqs], a.contigs)):
        if k == 1:
            out.append((name, seq))
            continue
        for nm, s, e in split_contigs(seq, k, a.gap, 0, rng, name=name + "_"):
            out.append((nm, seq[s:e]))
    write_fasta(ref_fa, out)
    save_params(d, params)
    log(f"pairs: {os.path.basename(ref_src)} ({len(seqs)} sequences) cut into {len(out)} contigs, "
        f"{a.gap} bp dropped around each cut: {ref_fa}")
    return ref_fa, len(out)


def mason_pairs(a, ref_fa, tag):
    """Mason pairs: (read 1 FASTQ, read 2 FASTQ, single-end FASTQ of both, truth SAM, pairs)."""
    d = os.path.join(a.workdir, "pairs", tag)
    os.makedirs(d, exist_ok=True)
    r1, r2 = os.path.join(d, "reads_1.fq"), os.path.join(d, "reads_2.fq")
    se, truth = os.path.join(d, "reads_se.fq"), os.path.join(d, "truth.sam")
    params = dict(ref=os.path.abspath(ref_fa), ref_size=os.path.getsize(ref_fa), n=a.pairs, length=a.length,
                  fragment=[a.fragment_mean, a.fragment_std], profile=a.profile, seed=a.seed, version=1)
    if cached(d, params, [r1, r2, se, truth]):
        log(f"pairs: reusing the simulation in {d}")
        return r1, r2, se, truth
    log(f"pairs: simulating {a.pairs} pairs, 2 x {a.length} bp, fragment {a.fragment_mean} +- "
        f"{a.fragment_std}, {a.profile} profile, seed {a.seed}")
    cmd = [simulate.tool("mason_simulator"), "-ir", ref_fa, "-n", str(a.pairs), "-o", r1, "-or", r2,
           "-oa", truth, "--illumina-read-length", str(a.length),
           "--fragment-mean-size", str(a.fragment_mean), "--fragment-size-std-dev", str(a.fragment_std),
           "--seed", str(a.seed), "--num-threads", "1"]
    cmd += simulate.MASON_PROFILES[a.profile]
    log_path = os.path.join(d, "mason.log")
    open(log_path, "w").close()
    sh(" ".join(shlex.quote(x) for x in cmd), log_path)
    write_single_end(r1, r2, se)
    save_params(d, params)
    return r1, r2, se, truth


def write_single_end(r1, r2, se):
    """Both mates as single reads, NAME_1 and NAME_2 (every mapper keeps these names as they are)."""
    recs = ((simulate.strip_mate(h) + sfx, s, q)
            for fq, sfx in ((r1, "_1"), (r2, "_2")) for h, s, q in simulate.fastq_records(fq))
    return write_fastq(se, recs)


def pair_truth(path):
    """{(name, mate): (contig, start0, strand)} from Mason's -oa SAM; mate 1 / 2 from flag 0x40 / 0x80."""
    truth = {}
    with simulate.open_text(path) as fh:
        for line in fh:
            if line.startswith("@"):
                continue
            f = line.split("\t", 4)
            flag = int(f[1])
            if flag & 0x900:
                continue
            key = (simulate.strip_mate(f[0]), 1 if flag & 0x40 else 2 if flag & 0x80 else 0)
            truth[key] = ("*", -1, "*") if flag & 4 else (f[2], int(f[3]) - 1, "-" if flag & 16 else "+")
    return truth


def read_key(r, single):
    """(name, mate) of a SAM record: mate from the flags of a paired record; from the _1/_2 suffix
    of write_single_end's names in a single-end run."""
    if r.flag & 1:
        return score._strip_mate(r.query_name), 1 if r.flag & 0x40 else 2 if r.flag & 0x80 else 0
    name = r.query_name
    if single and len(name) > 2 and name[-2] == "_" and name[-1] in "12":
        return name[:-2], int(name[-1])
    return score._strip_mate(name), 0


def score_pairs(truth, sam, tol, single=False):
    """Every mate scored on its own (scripts/score.py's rule: primary on the true contig and strand,
    start or unclipped start within ``tol``), plus properly paired (mapped primaries with 0x2),
    pairs with both mates correct, the MAPQ histograms and violations (a read missing, twice
    primary, or not in the truth). ``correct``: the set of correct (name, mate) keys."""
    seen = {}
    mapq_hist, wrong_hist = [0] * 256, [0] * 256
    c = dict(reads=len(truth), mapped=0, correct=0, proper=0, duplicate=0, unknown=0)
    with open_sam(sam) as fh:
        for r in fh:
            if r.flag & 0x900:
                continue
            key = read_key(r, single)
            t = truth.get(key)
            if t is None:
                c["unknown"] += 1
                continue
            if key in seen:
                c["duplicate"] += 1
                continue
            if r.is_unmapped:
                seen[key] = False
                continue
            c["mapped"] += 1
            c["proper"] += bool(r.flag & 2)
            ok = placed(t[0], t[1], t[1], t[2], r.reference_name, r.reference_start, unclipped_start0(r),
                        "-" if r.is_reverse else "+", tol)
            seen[key] = ok
            q = min(max(r.mapping_quality, 0), 255)
            mapq_hist[q] += 1
            if ok:
                c["correct"] += 1
            else:
                wrong_hist[q] += 1
    c["missing"] = len(truth) - len(seen)
    names = {k[0] for k in truth}
    c["pairs"] = len(names)
    c["pairs_both_correct"] = sum(1 for n in names if seen.get((n, 1)) and seen.get((n, 2)))
    c["sensitivity"] = ratio(c["correct"], c["reads"])
    c["mapq_hist"], c["wrong_hist"] = mapq_hist, wrong_hist
    return c, {k for k, v in seen.items() if v}


def count_pairs(sam, single=False):
    """Real reads: primaries, mapped, properly paired (mapped with 0x2), MAPQ >= 20, violations."""
    c = dict(reads=0, mapped=0, proper=0, mapq20=0, duplicate=0)
    keys = set()
    with open_sam(sam) as fh:
        for r in fh:
            if r.flag & 0x900:
                continue
            key = read_key(r, single)
            if key in keys:
                c["duplicate"] += 1
                continue
            keys.add(key)
            c["reads"] += 1
            if r.is_unmapped:
                continue
            c["mapped"] += 1
            c["proper"] += bool(r.flag & 2)
            c["mapq20"] += r.mapping_quality >= 20
    return c


def flagstat_proper(sam):
    """samtools flagstat's 'properly paired' count (QC-passed + failed) and its line, or (None, why)."""
    try:
        r = subprocess.run(["samtools", "flagstat", sam], capture_output=True, text=True)
    except OSError as e:
        return None, f"samtools: {e}"
    for line in r.stdout.splitlines():
        m = re.match(r"(\d+) \+ (\d+) properly paired", line)
        if m:
            return int(m.group(1)) + int(m.group(2)), line.strip()
    return None, (r.stderr.strip().splitlines() or ["no 'properly paired' line"])[-1]


def insert_model(m, log_path):
    """The insert-size model a tool reports on stderr: pymap's summary line, bwa's FR estimate."""
    text = tail(log_path, 200000)
    if m.kind == "pymap":
        proper = re.findall(r"(\d+) proper pairs", text)
        model = [ln.strip().replace("[pymap] ", "") for ln in text.splitlines() if "insert size" in ln]
        parts = ([f"{proper[-1]} proper pairs in its summary"] if proper else []) + model[-1:]
        return "; ".join(parts) or None
    if m.kind == "bwa":
        fr = re.search(r"orientation FR\.\.\..*?\] mean and std\.dev: \(([\d.]+), ([\d.]+)\)"
                       r".*?boundaries for proper pairs: \((\d+), (\d+)\)", text, re.S)
        return (f"FR insert size {fr.group(1)} +- {fr.group(2)}, proper within [{fr.group(3)}, "
                f"{fr.group(4)}] (its first batch)") if fr else None
    return None


def check_summary(entry, proper_reads):
    """pymap's summary counts proper pairs, the SAM flags reads: append whether 2 x the one is the other."""
    m = re.match(r"(\d+) proper pairs in its summary", entry.get("insert_model") or "")
    if m:
        n = int(m.group(1))
        entry["insert_model"] += (f" (x 2 = the {proper_reads} reads flagged 0x2)" if 2 * n == proper_reads
                                  else f" (BUT {proper_reads} reads flagged 0x2 in its SAM)")


def pair_jobs(a, mappers):
    """[(label, mapper, single)]: every tool on the pairs, then the ``--single`` ones on the mates as
    single reads (label LABEL-se), next to their paired run."""
    single = [x.strip() for x in (a.single if a.single is not None else a.label).split(",")
              if x.strip() and x.strip() != "none"]
    known = {m.label for m in mappers}
    if a.single is None:
        single = [s for s in single if s in known]   # the default: pymap, where --tools keeps it
    for s in single:
        if s not in known:
            raise SystemExit(f"eval_alignment: --single: unknown or unselected label {s!r} (known: "
                             f"{', '.join(sorted(known))})")
    jobs = []
    for m in mappers:
        jobs.append((m.label, m, False))
        if m.label in single:
            jobs.append((m.label + "-se", m, True))
    return jobs


def run_pair_jobs(a, jobs, ref_fa, pe, se, run_dir):
    """Indexes first (not timed), then each job ``--runs`` times; the last run's SAM and timing
    count. Returns {label: dict(sam or None, runs, log, insert model)}."""
    os.makedirs(run_dir, exist_ok=True)
    for m in {id(m): m for _, m, _ in jobs}.values():
        secs = m.build_index(ref_fa, a.threads)
        if secs is not None:
            log(f"{m.label}: index built in {secs:.1f} s")
    out = {}
    for label, m, single in jobs:
        sam = os.path.join(run_dir, f"{label}.sam")
        runs = []
        for i in range(a.runs):
            if a.wait_idle is not None:
                busy, waited = bench_mapping.wait_idle(a.wait_idle, a.wait_max)
                log(f"{label}: {busy:.2f} cores busy before run {i + 1} (waited {waited:.0f} s)")
            lp = os.path.join(run_dir, f"{label}.{i + 1}.log")
            log(f"{label}: run {i + 1} of {a.runs}")
            runs.append(m.run(ref_fa, se if single else pe, sam, a.threads, lp))
            if not runs[-1]["ok"]:
                break
        ok = runs[-1]["ok"]
        out[label] = dict(sam=sam if ok else None, runs=runs, single=single, mapper=m,
                          insert=None if single or not ok else insert_model(m, runs[-1]["log"]))
    return out


def _warm(e):
    w = e["runs"][-1]
    return w if w["ok"] else None


def _flagstat_cell(fs, own):
    n, line = fs
    if n is None:
        return f"- ({line})"
    return f"{n} (agrees)" if n == own else f"{n} (script: {own})"


def cmd_pairs(a, mappers):
    if a.real:
        return cmd_pairs_real(a, mappers)
    a.pairs = a.pairs or 20000
    ref_src = a.ref or ECOLI
    ref_fa, n_contigs = pairs_reference(a, ref_src)
    base = re.sub(r"\.(fa|fasta|fna)(\.gz)?$", "", os.path.basename(ref_src))
    tag = (f"{base}_{'c%d' % a.contigs if a.contigs else 'whole'}_{a.profile}{a.length}"
           f"_f{a.fragment_mean}-{a.fragment_std}_n{a.pairs}_s{a.seed}")
    r1, r2, se, truth_sam = mason_pairs(a, ref_fa, tag)
    truth = pair_truth(truth_sam)
    n_reads = len(truth)
    log(f"pairs: {n_reads} reads ({n_reads // 2} pairs), reference {ref_fa} ({n_contigs} contigs)")
    jobs = pair_jobs(a, mappers)
    runs = run_pair_jobs(a, jobs, ref_fa, (r1, r2), se, os.path.join(a.workdir, "pairs", tag, "runs"))
    per, correct_sets, rows, qcols = {}, {}, [], []
    for label, m, single in jobs:
        e = runs[label]
        entry = dict(mode="single-end" if single else "paired", command=m.describe(),
                     runs=[timing_json(r) for r in e["runs"]], score=None, insert_model=e["insert"])
        per[label] = entry
        if not e["sam"]:
            rows.append([label, entry["mode"], "FAILED"] + [""] * 12)
            continue
        s, correct_sets[label] = score_pairs(truth, e["sam"], a.tolerance, single)
        fs = flagstat_proper(e["sam"])
        ql = score.mapq_table(s["mapq_hist"], s["wrong_hist"], s["reads"], Q_THRESHOLDS)
        q20 = score.mapq_table(s["mapq_hist"], s["wrong_hist"], s["reads"], (20,))[0]
        w = _warm(e)
        check_summary(entry, s["proper"])
        entry.update(score=score.strip_hist(s), qlines=ql, flagstat_proper=fs[0], flagstat_line=fs[1],
                     flagstat_agrees=fs[0] == s["proper"], warm_wall_s=w["wall_s"],
                     reads_per_s=ratio(n_reads, w["wall_s"]))
        viol = s["missing"] + s["duplicate"] + s["unknown"]
        rows.append([label, entry["mode"], s["reads"], pct(s["mapped"], s["reads"]),
                     pct(s["correct"], s["reads"]), pct(s["pairs_both_correct"], s["pairs"]),
                     q20["wrong"], score._rate(q20["wrong_rate"]), pct(q20["mapped"], s["reads"]),
                     pct(s["proper"], s["reads"]) if not single else "-", _flagstat_cell(fs, s["proper"]),
                     f"{w['wall_s']:.2f}", f"{n_reads / w['wall_s']:,.0f}",
                     "-" if w.get("others_cores") is None else f"{w['others_cores']:.2f}",
                     "0" if not viol else
                     f"{s['missing']} missing, {s['duplicate']} dup, {s['unknown']} unknown"])
        qcols.append((label, ql))
    ref_name = os.path.basename(ref_src) + (f" cut into {n_contigs} contigs" if a.contigs else
                                            f" ({n_contigs} contig{'s' if n_contigs > 1 else ''})")
    print(f"\n### pairs: {n_reads // 2} Mason pairs (2 x {a.length} bp, fragment {a.fragment_mean} +- "
          f"{a.fragment_std}, {a.profile} profile, seed {a.seed}), {ref_name}, -t {a.threads}\n")
    print(md_table(["tool", "mode", "reads", "mapped %", "sensitivity %", "both mates correct, % of pairs",
                    "wrong MAPQ>=20", "wrong rate MAPQ>=20", "MAPQ>=20 % of reads", "properly paired %",
                    "flagstat properly paired", "warm wall s", "reads/s", "other load, cores", "violations"],
                   rows))
    print(f"\nEvery mate scored on its own: correct = primary on the true contig and strand, start or "
          f"unclipped start within {a.tolerance} bp of Mason's. Properly paired = mapped primaries with "
          f"flag 0x2, % of reads (samtools flagstat's count beside it). Times: run {a.runs} of {a.runs} "
          f"({'warm' if a.runs > 1 else 'cold: use --runs 2'}), indexes built beforehand; reads/s counts "
          f"both mates; other load = CPU other processes used meanwhile (use --wait-idle on a shared "
          f"machine).")
    if qcols:
        qrows = []
        for i, q in enumerate(Q_THRESHOLDS):
            qrows.append([q] + [f"{ql[i]['mapped']} / {ql[i]['wrong']} / {score._rate(ql[i]['wrong_rate'])}"
                                for _, ql in qcols])
        print("\nQ-lines (primary alignments with MAPQ >= Q: count / wrong / error rate):\n")
        print(md_table(["MAPQ >="] + [lb for lb, _ in qcols], qrows))
    gain_rows = []
    for label, m, single in jobs:
        if single and label in correct_sets and m.label in correct_sets:
            pe_ok, se_ok = correct_sets[m.label], correct_sets[label]
            sp, ss = per[m.label]["score"], per[label]["score"]
            qp = per[m.label]["qlines"][Q_THRESHOLDS.index(20)]
            qs = per[label]["qlines"][Q_THRESHOLDS.index(20)]
            gain = dict(correct_only_paired=len(pe_ok - se_ok), correct_only_single=len(se_ok - pe_ok),
                        sensitivity_points=100.0 * (sp["sensitivity"] - ss["sensitivity"]))
            per[m.label]["pairing_gain"] = gain
            gain_rows.append([m.label, gain["correct_only_paired"], gain["correct_only_single"],
                              f"{gain['sensitivity_points']:+.2f}", f"{qp['wrong']} / {qs['wrong']}",
                              f"{pct(qp['mapped'], n_reads)} / {pct(qs['mapped'], n_reads)}"])
    if gain_rows:
        print("\nWhat pairing adds (the same reads mapped as pairs and as single reads):\n")
        print(md_table(["tool", "correct only as pairs", "correct only single-end", "sensitivity, points",
                        "wrong MAPQ>=20 paired / single", "MAPQ>=20 % paired / single"], gain_rows))
    models = [(lb, e["insert_model"]) for lb, e in per.items() if e.get("insert_model")]
    if models:
        print("\nInsert-size models reported (stderr of the warm run):\n")
        for lb, text in models:
            print(f"* {lb}: {text}")
    if any(m.kind == "bowtie2" and not any(x in ("-X", "--maxins") or x.startswith("--maxins=")
                                           for x in m.args) for m in mappers):
        print(f"\nbowtie2 runs with its default -X 500 (longest concordant fragment): pairs with a longer "
              f"fragment (about 5 % at {a.fragment_mean} +- {a.fragment_std}) are not properly paired; "
              f"--bowtie2-args \"-X 1000\" lifts that.")
    params = dict(ref=os.path.abspath(ref_src), ref_fa=ref_fa, contigs=n_contigs, pairs=n_reads // 2,
                  length=a.length, profile=a.profile, fragment=[a.fragment_mean, a.fragment_std], seed=a.seed,
                  runs=a.runs)
    return dict(subcommand="pairs", params=params,
                results={tag: dict(reads=n_reads, tools=per)})


def cmd_pairs_real(a, mappers):
    sets = real_sets([s for s in a.sets.split(",") if s] if a.sets else None)
    if not sets:
        raise SystemExit(f"eval_alignment: no real read sets under {REAL_DIR}")
    jobs = pair_jobs(a, mappers)
    base_label = "bwa" if any(m.label == "bwa" for m in mappers) else mappers[0].label
    results, rows = {}, []
    for name, ref_src, f1 in sets:
        f2 = re.sub(r"_1(\.f(ast)?q(\.gz)?)$", r"_2\1", f1)
        if not os.path.exists(f2):
            log(f"pairs: {name}: no read 2 file {f2}, skipped")
            continue
        d = os.path.join(a.workdir, "pairs_real", name)
        os.makedirs(d, exist_ok=True)
        ref_fa = prepared_ref(ref_src, a.workdir)
        r1, r2, se = (os.path.join(d, x) for x in ("reads_1.fq", "reads_2.fq", "reads_se.fq"))
        params = dict(src=[f1, f2], n=a.pairs, version=1)
        if not cached(d, params, [r1, r2, se]):
            for src, dst in ((f1, r1), (f2, r2)):
                recs = simulate.fastq_records(src)
                if a.pairs:
                    recs = (x for _, x in zip(range(a.pairs), recs))
                write_fastq(dst, ((h.split()[0], s, q) for h, s, q in recs))
            write_single_end(r1, r2, se)
            save_params(d, params)
        n = sum(1 for _ in simulate.fastq_records(r1)) * 2
        runs = run_pair_jobs(a, jobs, ref_fa, (r1, r2), se, os.path.join(d, "runs"))
        per = {}
        for label, m, single in jobs:
            e = runs[label]
            entry = dict(mode="single-end" if single else "paired", command=m.describe(),
                         runs=[timing_json(r) for r in e["runs"]], counts=None, insert_model=e["insert"])
            per[label] = entry
            if e["sam"]:
                c = count_pairs(e["sam"], single)
                fs = flagstat_proper(e["sam"])
                w = _warm(e)
                check_summary(entry, c["proper"])
                entry.update(counts=c, flagstat_proper=fs[0], flagstat_line=fs[1],
                             flagstat_agrees=fs[0] == c["proper"], warm_wall_s=w["wall_s"])
        b = per.get(base_label, {}).get("counts")
        for label, m, single in jobs:
            e, c = per[label], per[label]["counts"]
            if c is None:
                rows.append([name, label, e["mode"], "FAILED"] + [""] * 7)
                continue
            dm = dp = "-"
            if b and label != base_label:
                dm = f"{100.0 * (c['mapped'] - b['mapped']) / n:+.2f}"
                if not single:
                    dp = f"{100.0 * (c['proper'] - b['proper']) / n:+.2f}"
            note = ("" if c["reads"] == n and not c["duplicate"] else
                    f" ({c['reads']} primaries, {c['duplicate']} dup)")
            rows.append([name, label, e["mode"], f"{n}{note}", pct(c["mapped"], n), dm,
                         pct(c["proper"], n) if not single else "-", dp,
                         _flagstat_cell((e["flagstat_proper"], e["flagstat_line"]), c["proper"]),
                         pct(c["mapq20"], n), f"{e['warm_wall_s']:.2f}"])
        results[name] = dict(reads=n, ref=ref_src, reads_files=[f1, f2], tools=per)
    print(f"\n### pairs --real: both mates of each set under {REAL_DIR}, mapped as pairs"
          f"{' (and as single reads: -se)' if any(s for _, _, s in jobs) else ''}, -t {a.threads}\n")
    print(md_table(["set", "tool", "mode", "reads", "mapped %", f"diff vs {base_label}, points",
                    "properly paired %", f"diff vs {base_label}, points", "flagstat properly paired",
                    "MAPQ>=20 %", "warm wall s"], rows))
    print("\n% of reads (both mates); properly paired = mapped primaries with flag 0x2.")
    models = [(f"{s} {lb}", e["insert_model"]) for s, r in results.items() for lb, e in r["tools"].items()
              if e.get("insert_model")]
    if models:
        print("\nInsert-size models reported (stderr of the warm run):\n")
        for lb, text in models:
            print(f"* {lb}: {text}")
    return dict(subcommand="pairs", real=True, baseline=base_label, results=results)


# ------------------------------------------------------------------ CLI

def main(argv=None):
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    g = common.add_argument_group("common options")
    g.add_argument("--workdir", default="/tmp/eval_alignment", help="work files (default %(default)s)")
    g.add_argument("--ref", help="reference FASTA (default: E. coli MG1655 from /work/shared/data)")
    g.add_argument("--seed", type=int, default=1, help="simulation seed (default %(default)s)")
    g.add_argument("-t", "--threads", type=int, default=2, help="threads per tool (default %(default)s)")
    g.add_argument("--pymap", default="pymap align", help="pymap command (default %(default)r)")
    g.add_argument("--pymap-args", default="", help="extra pymap arguments, one string")
    g.add_argument("--label", default="pymap", help="label of the --pymap run (default %(default)s)")
    g.add_argument("--variant", action="append", metavar="LABEL=ARGS|COMMAND",
                   help="another pymap run: '-...' arguments added to --pymap, or a whole command; "
                        "repeatable")
    g.add_argument("--bwa", default="bwa mem", help="bwa command (default %(default)r)")
    g.add_argument("--bwa-args", default="", help="extra bwa mem arguments, one string")
    g.add_argument("--tools", help="comma list of labels to run (default: all: pymap, variants, bwa; "
                                   "pairs: bowtie2, minimap2 too)")
    g.add_argument("--tolerance", type=int, default=10,
                   help="placement tolerance in bp (default %(default)s)")
    g.add_argument("--json", help="write the results as JSON here")
    g.add_argument("--rebuild-index", action="store_true",
                   help="build the pymap indexes again (after a change of the index format)")

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("indels", parents=[common], allow_abbrev=False,
                       help="one 1-10 bp indel per read: CIGAR type, length, left-normalised position")
    p.add_argument("--reads", type=int, default=20000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--max-indel", type=int, default=10)
    p.add_argument("--min-end", type=int, default=25, help="indel distance from both read ends (default 25)")
    p.add_argument("--mismatches", type=int, default=0,
                   help="random mismatches per read, >= 10 bp from the indel")

    p = sub.add_parser("variants", parents=[common], allow_abbrev=False,
                       help="mason_variator + mason_simulator, bcftools calls: SNP/indel recall, precision")
    p.add_argument("--seg-start", type=int, default=0, help="segment start in the first contig (default 0)")
    p.add_argument("--seg-length", type=int, default=1_500_000)
    p.add_argument("--ploidy", type=int, choices=(1, 2), default=1)
    p.add_argument("--coverage", type=float, default=30.0)
    p.add_argument("--reads", type=int, default=None,
                   help="reads (pairs with --paired); default from --coverage")
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--paired", action="store_true",
                   help="simulate pairs (each tool maps the mates as single reads)")
    p.add_argument("--bwa-pe", action="store_true", help="with --paired: also run bwa mem in paired mode")
    p.add_argument("--snp-rate", type=float, default=0.001)
    p.add_argument("--indel-rate", type=float, default=0.0002)
    p.add_argument("--max-indel", type=int, default=12)
    p.add_argument("--min-qual", type=float, default=20.0, help="second row: calls with QUAL >= this")

    p = sub.add_parser("clipping", parents=[common], allow_abbrev=False,
                       help="adapters, low-quality tails, contig ends, chimeras")
    p.add_argument("--reads", type=int, default=20000, help="reads in all, a quarter per class")
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--contigs", type=int, default=20, help="contigs the reference is cut into (default 20)")
    p.add_argument("--gap", type=int, default=2000, help="bases dropped around each contig (default 2000)")
    p.add_argument("--error-rate", type=float, default=0.002, help="substitutions per genomic base")
    p.add_argument("--tail-error", type=float, default=0.25, help="error rate of the low-quality tails")
    p.add_argument("--min-fragment", type=int, default=50, help="shortest adapter-class fragment")
    p.add_argument("--min-overhang", type=int, default=10)
    p.add_argument("--max-overhang", type=int, default=75)
    p.add_argument("--chimera-long", type=int, default=100, help="length of the longer chimera piece")
    p.add_argument("--clip-tolerance", type=int, default=5)

    p = sub.add_parser("real", parents=[common], allow_abbrev=False,
                       help="read 1 of the real sets: mapped reads per tool")
    p.add_argument("--reads", type=int, default=None, help="only the first N reads of each set")
    p.add_argument("--sets", default="", help="comma list of set names (default: all)")

    p = sub.add_parser("mason", parents=[common], allow_abbrev=False,
                       help="Mason sets: sensitivity, wrong at MAPQ>=20, Q-lines")
    p.add_argument("--reads", type=int, default=20000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--profiles", default="low,high", help="scripts/simulate.py profiles (default low,high)")

    p = sub.add_parser("speed", parents=[common], allow_abbrev=False,
                       help="wall time and reads/s, indexes built first, warm run")
    p.add_argument("--reads", type=int, default=100000)
    p.add_argument("--length", type=int, default=150)
    p.add_argument("--profile", default="low")
    p.add_argument("--runs", type=int, default=2, help="runs per tool; the last is reported (default 2)")
    p.add_argument("--wait-idle", type=float, default=None, metavar="CORES",
                   help="before each run wait until fewer than CORES other cores are busy")
    p.add_argument("--wait-max", type=float, default=120.0)

    p = sub.add_parser("pairs", parents=[common], allow_abbrev=False,
                       help="Mason pairs (or --real pairs): per-mate sensitivity, properly paired, Q-lines, "
                            "speed; bowtie2 and minimap2 too")
    p.add_argument("--pairs", "--reads", dest="pairs", type=int, default=None,
                   help="pairs to simulate (default 20000); with --real the first N pairs of each set "
                        "(default all)")
    p.add_argument("--length", type=int, default=150, help="read length (default %(default)s)")
    p.add_argument("--fragment-mean", type=int, default=400, help="Mason --fragment-mean-size (default 400)")
    p.add_argument("--fragment-std", type=int, default=60, help="Mason --fragment-size-std-dev (default 60)")
    p.add_argument("--profile", choices=sorted(simulate.MASON_PROFILES), default="low",
                   help="scripts/simulate.py's Mason profile: high = 3x mismatches, 0.1 %% indels "
                        "(default low)")
    p.add_argument("--contigs", type=int, default=0,
                   help="cut the reference into K contigs (split by length over its sequences, as clipping "
                        "does; default: as it is)")
    p.add_argument("--gap", type=int, default=2000, help="with --contigs: bases dropped around each cut "
                                                         "(default %(default)s)")
    p.add_argument("--peers", default="bowtie2,minimap2",
                   help="other peers besides bwa, where installed (default %(default)s; 'none')")
    p.add_argument("--bowtie2-args", default="", help="extra bowtie2 arguments, one string (e.g. '-X 1000')")
    p.add_argument("--minimap2-args", default="", help="extra minimap2 arguments, one string")
    p.add_argument("--single", default=None, metavar="LABELS",
                   help="tools that also map the mates as single reads, labelled LABEL-se (default: the "
                        "--label run, i.e. pymap; 'none')")
    p.add_argument("--runs", type=int, default=2,
                   help="runs per tool; the last is scored and timed (default 2)")
    p.add_argument("--wait-idle", type=float, default=None, metavar="CORES",
                   help="before each run wait until fewer than CORES other cores are busy")
    p.add_argument("--wait-max", type=float, default=120.0)
    p.add_argument("--real", action="store_true",
                   help="the real pairs under /work/shared/data/real instead: mapped and properly paired "
                        "per tool, against bwa")
    p.add_argument("--sets", default="", help="with --real: comma list of set names (default: all)")

    a, extra = ap.parse_known_args(argv)
    a.passthrough = [x for x in extra if x != "--"]
    if a.passthrough:
        log(f"passing to {a.pymap!r}: {' '.join(a.passthrough)}")
    os.makedirs(a.workdir, exist_ok=True)
    mappers = make_mappers(a, make_peers(a))
    fn = dict(indels=cmd_indels, variants=cmd_variants, clipping=cmd_clipping, real=cmd_real,
              mason=cmd_mason, speed=cmd_speed, pairs=cmd_pairs)[a.command]
    t0 = time.time()
    out = fn(a, mappers)
    out.update(tools={m.label: m.describe() for m in mappers}, threads=a.threads,
               seconds=round(time.time() - t0, 1), date=time.strftime("%Y-%m-%d %H:%M"),
               host=bench_mapping._host())
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1, default=str)
        log(f"wrote {a.json}")
    failed = [label for label, e in _iter_results(out) if not e]
    return 1 if failed else 0


def _iter_results(out):
    """(label, ok) for every tool run in a result dict (used for the exit status)."""
    res = out.get("results", {})
    for key, e in res.items():
        if "tools" in e:
            for label, t in e["tools"].items():
                yield label, bool(t.get("score") or t.get("counts"))
        elif "runs" in e:
            yield key, bool(e.get("reads_per_s"))
        else:
            yield key, e.get("score") is not None


if __name__ == "__main__":
    sys.exit(main())
