"""Property-based tests of the whole mapping path on random references and reads (hypothesis).

For every generated reference (1-5 contigs, a few kb, with N runs, IUPAC codes, soft-masked
stretches and sometimes repeats) and read set (30-200 bp, 0..e random edits, N runs, lowercase,
both strands, plus unrelated random reads), the SAM written by `pymap.api.align` must satisfy:

- every input read appears exactly once as a primary or unmapped record, in input order;
- every alignment's CIGAR (M/I/D only) consumes exactly the read and stays inside its contig;
- NM and MD agree with the reference (recomputed here), AS == -NM, XS <= AS;
- NM equals Edlib's NW distance between the read (as in SEQ) and the reference span it covers,
  and NM <= e of that read (N never matches, like the mapper's scoring);
- SEQ/QUAL: forward records carry the read uppercased (non-ACGT as N), reverse ones its reverse
  complement and the reversed qualities;
- secondaries (report_all) carry flag 256, are never duplicated and are within e as well;
- an exact, N-free read of the reference is mapped with NM 0;
- the filter `none` maps every read the default filter maps, at least as well;
- the output is identical for threads 1 vs 2 and batch_size 1 vs 1000.

These are the edit-distance model's properties (extender `banded`). With the default extender
`affine` the same run checks hold except: CIGARs may soft-clip either end, AS is bwa-mem's score
recomputed from the alignment (at least 30), NM is not bounded by e, and a clipped read may have a
supplementary record (flag 2048, SA tags on it and on its primary) after its primary.

The helpers (`parse_sam`, `check_sam`, ...) are shared with tests/test_inputs.py.
"""
import os
import re
import tempfile

import edlib
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from pymap import api, plugins
from pymap.options import AlignOptions

COMP = str.maketrans("ACGTN", "TGCAN")
IUPAC = "RYKMSWBDHVN"
REASONS = {"no_seed_hit", "over_max_edits", "too_short", "too_long", "too_many_n", "below_min_score"}
MD_RE = re.compile(r"^[0-9]+(([A-Z]|\^[A-Z]+)[0-9]+)*$")
CIGAR_RE = re.compile(r"(\d+)([MIDNSHP=X])")


def default_filter_available():
    try:
        plugins.load_class("filter", AlignOptions().filter)
        return True
    except Exception:
        return False


DEFAULT_FILTER = AlignOptions().filter
needs_default_filter = pytest.mark.skipif(
    not default_filter_available(), reason=f"default filter {DEFAULT_FILTER!r} is not installed (yet)")


# ---- shared helpers ---------------------------------------------------------------------------

def norm(seq):
    """A read or reference as the mapper sees it: uppercase, anything but ACGT as N."""
    s = seq.upper()
    return "".join(c if c in "ACGT" else "N" for c in s)


def revcomp(seq):
    return norm(seq).translate(COMP)[::-1]


def max_edits_of(e, length, opt_min_half=True):
    """The per-read threshold of mapper.pipeline.Pipeline.read_limits (documented behaviour)."""
    m = int(e) if e >= 1 else int(np.floor(length * e + 0.5))
    return min(m, length // 2) if opt_min_half else m


def parse_sam(text):
    """(header lines, records) of SAM text; a record is a dict of the fields and tags."""
    header, recs = [], []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("@"):
            header.append(line)
            continue
        f = line.split("\t")
        assert len(f) >= 11, f"SAM record with {len(f)} fields: {line!r}"
        tags = {}
        for t in f[11:]:
            k, typ, v = t.split(":", 2)
            assert k not in tags, f"duplicate tag {k} in {line!r}"
            tags[k] = int(v) if typ == "i" else v
        recs.append(dict(qname=f[0], flag=int(f[1]), rname=f[2], pos=int(f[3]), mapq=int(f[4]),
                         cigar=f[5], rnext=f[6], pnext=int(f[7]), tlen=int(f[8]), seq=f[9], qual=f[10],
                         tags=tags, line=line))
    return header, recs


def sq_lines(header):
    out = []
    for h in header:
        if h.startswith("@SQ"):
            d = dict(p.split(":", 1) for p in h.split("\t")[1:])
            out.append((d["SN"], int(d["LN"])))
    return out


def cigar_ops(cigar):
    ops = [(int(n), op) for n, op in CIGAR_RE.findall(cigar)]
    assert "".join(f"{n}{op}" for n, op in ops) == cigar, f"malformed CIGAR {cigar!r}"
    return ops


def recompute(read, ref, start, ops):
    """(read bases consumed, reference span, NM, MD) of an alignment; N never matches."""
    q, j, nm, run, md = start, 0, 0, 0, []
    for n, op in ops:
        if op == "M":
            for k in range(n):
                r = ref[q + k]
                if r == read[j + k] and r != "N":
                    run += 1
                else:
                    nm += 1
                    md.append(f"{run}{r}")
                    run = 0
            q += n
            j += n
        elif op == "I":
            nm += n
            j += n
        elif op == "D":
            nm += n
            md.append(f"{run}^{ref[q:q + n]}")
            run = 0
            q += n
        elif op == "S":
            j += n
        else:
            raise AssertionError(f"unexpected CIGAR op {op}")
    return j, ref[start:q], nm, "".join(md) + str(run)


def affine_score(read, ref, start, ops, a=1, b=4, o=6, e=1):
    """bwa-mem's raw score (AS) of an alignment: match a, mismatch -b, N -1, a gap of k -(o + k e)."""
    q, j, score = start, 0, 0
    for n, op in ops:
        if op == "M":
            for k in range(n):
                x, y = read[j + k], ref[q + k]
                score += -1 if "N" in (x, y) else (a if x == y else -b)
            q += n
            j += n
        elif op in "IS":
            score -= (o + n * e) if op == "I" else 0
            j += n
        else:
            score -= o + n * e
            q += n
    return score


def nw_distance(read, span):
    """Edlib's global edit distance with N matching nothing (as the mapper counts it)."""
    a = read.replace("N", "X")
    b = span.replace("N", "Y")
    if not a or not b:
        return max(len(a), len(b))
    return edlib.align(a, b, mode="NW", task="distance")["editDistance"]


def check_sam(text, reads, contigs, e, report_all=False, max_hits=1, min_length=16, max_length=1000,
              extender="banded"):
    """Check every invariant of the module docstring on SAM text.

    reads: list of (name, seq as written, qual or None); contigs: {name: sequence as written}.
    e, report_all, max_hits, min_length, max_length, extender: the run's options ("banded": the
    edit-distance model; "affine": bwa-mem scores with clipping, default options).
    Returns {read index: [records, primary first]}."""
    header, recs = parse_sam(text)
    ref = {n: norm(s) for n, s in contigs.items()}
    assert sq_lines(header) == [(n, len(s)) for n, s in ref.items()], "@SQ lines differ from the contigs"
    # every read exactly once as primary or unmapped, in input order; secondaries follow their primary
    groups, i = [], -1
    # the affine extender's clipped reads may have a supplementary record (a chimeric second part)
    allowed = 4 | 16 | 256 | (2048 if extender == "affine" else 0)
    for r in recs:
        assert r["flag"] & ~allowed == 0, f"unexpected flag bits: {r['line']}"
        if r["flag"] & (256 | 2048):
            assert groups, f"secondary before any primary: {r['line']}"
            assert r["qname"] == reads[i][0], f"secondary of another read: {r['line']}"
            groups[-1].append(r)
        else:
            i += 1
            assert i < len(reads), f"more primary/unmapped records than reads ({r['line']})"
            assert r["qname"] == reads[i][0], f"record {i} is {r['qname']!r}, read {i} is {reads[i][0]!r}"
            groups.append([r])
    assert len(groups) == len(reads), f"{len(groups)} primary/unmapped records for {len(reads)} reads"
    for (name, seq, qual), grp in zip(reads, groups):
        L = len(seq)
        me = max_edits_of(e, L)
        prim = grp[0]
        fwd = norm(seq)
        # the unmapped reasons decided before seeding (Pipeline.read_limits), by precedence
        if L < min_length:
            want = "too_short"
        elif L > max_length:
            want = "too_long"
        elif fwd.count("N") > me:
            want = "too_many_n"
        else:
            want = None
        if want:
            assert prim["flag"] & 4 and prim["tags"].get("YU") == want, f"expected YU:Z:{want}: {prim['line']}"
        else:
            assert prim["tags"].get("YU") not in ("too_short", "too_long", "too_many_n"), prim["line"]
        if prim["flag"] & 4:
            assert len(grp) == 1 and prim["flag"] == 4
            assert (prim["rname"], prim["pos"], prim["cigar"], prim["mapq"]) == ("*", 0, "*", 0)
            assert prim["tags"].get("YU") in REASONS, prim["line"]
            assert prim["seq"] == (fwd if L else "*") or (L == 0 and prim["seq"] == "")
            if L:
                assert prim["qual"] == (qual if qual is not None else "*")
            continue
        assert "YU" not in prim["tags"]
        assert len([r for r in grp if not r["flag"] & 2048]) <= (10**9 if report_all else max_hits)
        seen = set()
        for k, r in enumerate(grp):
            rev = bool(r["flag"] & 16)
            oriented = revcomp(seq) if rev else fwd
            if k == 0:
                assert r["seq"] == oriented, f"SEQ of {name} ({'-' if rev else '+'}) differs: {r['line']}"
                want_q = (qual[::-1] if rev else qual) if qual is not None else "*"
                assert r["qual"] == want_q, f"QUAL of {name} differs: {r['line']}"
            elif r["flag"] & 2048:        # SA of each names the other: rname,pos,strand,CIGAR,MAPQ,NM;
                assert r["seq"] in ("*", oriented), r["line"]
                assert r["tags"]["SA"].startswith(_sa_entry(prim)), r["line"]
                assert prim["tags"]["SA"].startswith(_sa_entry(r)), prim["line"]
            else:
                assert r["flag"] & 256 and r["seq"] in ("*", oriented)
            assert r["rname"] in ref, r["line"]
            key = (r["rname"], r["pos"], rev)
            assert key not in seen, f"duplicated hit {key} of {name}"
            seen.add(key)
            ctg = ref[r["rname"]]
            ops = cigar_ops(r["cigar"])
            assert all(op in "MIDS" for _, op in ops) and all(n > 0 for n, _ in ops), r["line"]
            assert all(op != "S" for _, op in ops[1:-1]) and ops[0][1] in "MS" and ops[-1][1] in "MS", r["line"]
            start = r["pos"] - 1
            used, span, nm, md = recompute(oriented, ctg, start, ops)
            assert used == L, f"CIGAR {r['cigar']} consumes {used} of {L} read bases ({name})"
            assert 0 <= start and start + len(span) <= len(ctg), f"alignment leaves contig: {r['line']}"
            assert r["tags"]["NM"] == nm, f"NM {r['tags']['NM']} != recomputed {nm}: {r['line']}"
            assert r["tags"]["MD"] == md, f"MD {r['tags']['MD']} != recomputed {md}: {r['line']}"
            assert MD_RE.match(md)
            if extender == "affine":
                assert r["tags"]["AS"] == affine_score(oriented, ctg, start, ops) >= 30, r["line"]
                continue
            assert r["tags"]["AS"] == -nm
            assert nm <= me, f"NM {nm} > e {me} for {name} (L={L}): {r['line']}"
            # the edit extender clips only what would be an end insertion (bases past the window)
            lead = ops[0][0] if ops[0][1] == "S" else 0
            trail = ops[-1][0] if len(ops) > 1 and ops[-1][1] == "S" else 0
            assert nm + lead + trail <= me, r["line"]
            ed = nw_distance(oriented[lead:L - trail], span)
            assert ed == nm, f"NM {nm} but Edlib NW distance {ed} on the covered span: {r['line']}"
            assert 0 <= r["mapq"] <= 60
            if k:
                assert r["mapq"] == 0 and "XS" not in r["tags"]
                assert r["tags"]["AS"] <= prim["tags"]["AS"], f"secondary better than primary: {r['line']}"
        if "XS" in prim["tags"]:
            assert prim["tags"]["XS"] <= prim["tags"]["AS"]
            if prim["tags"]["XS"] == prim["tags"]["AS"]:
                assert prim["mapq"] == 0, f"equally good second hit but MAPQ > 0: {prim['line']}"
        if report_all and len(grp) > 1:
            assert prim["tags"].get("XS") == max(r["tags"]["AS"] for r in grp[1:]), prim["line"]
    return {i: g for i, g in enumerate(groups)}


def _sa_entry(r):
    """The start of the SA tag entry that names record r (rname,pos,strand,CIGAR,)."""
    return f"{r['rname']},{r['pos']},{'-' if r['flag'] & 16 else '+'},{r['cigar']},"


def body(text):
    return [l for l in text.splitlines() if not l.startswith("@PG")]


def run_align(ref_path, reads_path, out_path, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("extender", "banded")     # the edit-distance model these properties describe
    api.align(str(ref_path), str(reads_path), out=str(out_path), options=AlignOptions(**kw), summary=False)
    with open(out_path) as fh:
        return fh.read()


# ---- generated scenarios ----------------------------------------------------------------------

def mutate(rng, s, n):
    s = list(s)
    for _ in range(n):
        kind = int(rng.integers(0, 3))
        i = int(rng.integers(0, len(s)))
        if kind == 0:
            s[i] = "ACGT"[(("ACGT".index(s[i].upper()) if s[i].upper() in "ACGT" else 0) + int(rng.integers(1, 4))) % 4]
        elif kind == 1:
            s.insert(i, "ACGT"[int(rng.integers(0, 4))])
        elif len(s) > 2:
            del s[i]
    return "".join(s)


def rand_seq(rng, n):
    return "".join(np.array(list("ACGT"))[rng.integers(0, 4, n)])


@st.composite
def scenarios(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_ctg = draw(st.integers(1, 5))
    contigs = {}
    repeats = draw(st.booleans())
    unit = rand_seq(rng, int(rng.integers(60, 250)))
    for c in range(n_ctg):
        n = draw(st.integers(250, 4000))
        s = list(rand_seq(rng, n))
        if repeats and c == 0 and n > 3 * len(unit) + 60:  # copies of one unit: multi-mapping reads
            for k in range(3):
                p = int(rng.integers(0, n - len(unit)))
                s[p:p + len(unit)] = mutate(rng, unit, int(rng.integers(0, 3)))[:len(unit)].ljust(len(unit), "A")
            s = s[:n]
        if draw(st.booleans()):  # an N run
            p, m = int(rng.integers(0, n)), int(rng.integers(1, 80))
            s[p:p + m] = "N" * len(s[p:p + m])
        for _ in range(draw(st.integers(0, 3))):  # scattered IUPAC codes
            s[int(rng.integers(0, n))] = IUPAC[int(rng.integers(0, len(IUPAC)))]
        if draw(st.booleans()):  # a soft-masked stretch
            p, m = int(rng.integers(0, n)), int(rng.integers(1, 500))
            s[p:p + m] = [x.lower() for x in s[p:p + m]]
        name = f"ctg{c}" + (" some description" if c % 2 else "")
        contigs[name] = "".join(s)
    e = draw(st.sampled_from([0.06, 0.1, 0.03, 0, 1, 3, 6]))
    kinds = draw(st.lists(st.tuples(st.sampled_from(["ref", "ref", "ref", "unit", "random"]),
                                    st.integers(30, 200),        # length
                                    st.booleans(),               # reverse strand
                                    st.integers(0, 12),          # edits (capped at e below)
                                    st.sampled_from([0, 0, 0, 1, 3, 10]),  # N run
                                    st.sampled_from([0, 0, 1, 2])),        # 1: lowercase, 2: IUPAC
                          min_size=1, max_size=30))
    names = list(contigs)
    reads, meta = [], []
    for i, (kind, L, rev, edits, nrun, case) in enumerate(kinds):
        exact_src = None
        if kind in ("ref", "unit"):
            cname = names[int(rng.integers(0, len(names)))]
            cs = unit if kind == "unit" else contigs[cname]
            L = min(L, len(cs))
            p = int(rng.integers(0, len(cs) - L + 1))
            r = cs[p:p + L]
            edits = min(edits, max_edits_of(e, L))
            if edits:
                r = mutate(rng, r, edits)
            if kind == "ref" and set(norm(cs[p:p + L])) <= set("ACGT"):
                # truth: (contig, start, strand, edits at most, exact)
                exact_src = [cname.split()[0], p, rev, edits, not edits]
            if rev:
                r = r.translate(str.maketrans("ACGTacgt", "TGCAtgca"))[::-1]
        else:
            r = rand_seq(rng, L)
        if nrun and len(r) > nrun:
            q = int(rng.integers(0, len(r) - nrun))
            r = r[:q] + "N" * nrun + r[q + nrun:]
            if exact_src:
                exact_src[3] += nrun
                exact_src[4] = False
        if case == 1:
            r = r.lower()
        elif case == 2 and r:
            q = int(rng.integers(0, len(r)))
            r = r[:q] + IUPAC[int(rng.integers(0, len(IUPAC)))] + r[q + 1:]
            if exact_src:
                exact_src[3] += 1
                exact_src[4] = False
        qual = "".join(chr(int(x)) for x in rng.integers(33, 127, len(r)))
        reads.append((f"r{i}_{kind}", r, qual))
        meta.append(exact_src)
    return contigs, reads, meta, e


def write_inputs(d, contigs, reads, fasta_reads=False, width=60):
    ref = os.path.join(d, "ref.fa")
    with open(ref, "w") as fh:
        for n, s in contigs.items():
            fh.write(f">{n}\n" + "".join(s[i:i + width] + "\n" for i in range(0, len(s), width)))
    rp = os.path.join(d, "reads.fa" if fasta_reads else "reads.fq")
    with open(rp, "w") as fh:
        for name, s, q in reads:
            fh.write(f">{name}\n{s}\n" if fasta_reads else f"@{name}\n{s}\n+\n{q}\n")
    return ref, rp


def short_contigs(contigs):
    return {n.split()[0]: s for n, s in contigs.items()}


SETTINGS = settings(max_examples=25, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _describe(contigs, reads, e):
    note(f"e={e}; contigs: " + ", ".join(f"{n!r}:{len(s)}" for n, s in contigs.items()))
    for name, s, _ in reads:
        note(f"  {name}: {s}")


def _check_run(flt, scenario, report_all, extender="banded"):
    contigs, reads, meta, e = scenario
    _describe(contigs, reads, e)
    with tempfile.TemporaryDirectory() as d:
        ref, rp = write_inputs(d, contigs, reads)
        out = os.path.join(d, "out.sam")
        text = run_align(ref, rp, out, max_edits=e, filter=flt, threads=2, report_all=report_all,
                         extender=extender)
        groups = check_sam(text, [(n, s, q) for n, s, q in reads], short_contigs(contigs), e,
                           report_all=report_all, extender=extender)
        if extender == "affine":
            # the best-scoring alignment need not have the fewest edits; an exact read scores best
            for i, src in enumerate(meta):
                if src is not None and src[4] and len(reads[i][1]) >= 30:
                    prim = groups[i][0]
                    assert not prim["flag"] & 4 and prim["tags"]["NM"] == 0, prim["line"]
            return groups
        for i, src in enumerate(meta):
            if src is None or len(reads[i][1]) < AlignOptions().min_length:
                continue
            ctg, pos, rev, edits, exact = src
            L = len(reads[i][1])
            for r in groups[i]:
                # a hit at the read's origin is at least as good as the edits made there
                if (not r["flag"] & 4 and r["rname"] == ctg and bool(r["flag"] & 16) == rev
                        and abs(r["pos"] - 1 - pos) <= max_edits_of(e, L)):
                    assert r["tags"]["NM"] <= edits, f"{reads[i][0]} from {src}: {r['line']}"
            if exact:
                prim = groups[i][0]
                assert not prim["flag"] & 4, f"exact read {reads[i][0]} from {src} unmapped: {prim['line']}"
                assert prim["tags"]["NM"] == 0, f"exact read {reads[i][0]} from {src}: {prim['line']}"
        return groups


@pytest.mark.parametrize("extender", ["banded", "affine"])
@pytest.mark.parametrize("flt", [pytest.param(DEFAULT_FILTER, marks=needs_default_filter), "none"])
@SETTINGS
@given(scenario=scenarios())
def test_sam_invariants(flt, extender, scenario):
    _check_run(flt, scenario, report_all=False, extender=extender)


@pytest.mark.parametrize("flt", [pytest.param(DEFAULT_FILTER, marks=needs_default_filter), "none"])
@settings(SETTINGS, max_examples=15)
@given(scenario=scenarios())
def test_secondaries_report_all(flt, scenario):
    groups = _check_run(flt, scenario, report_all=True)
    for g in groups.values():
        assert all(r["flag"] & 256 for r in g[1:])


@needs_default_filter
@settings(SETTINGS, max_examples=15)
@given(scenario=scenarios())
def test_no_filter_maps_at_least_as_well(scenario):
    """The filter only removes candidates: without it, every read mapped with the default filter
    is mapped too, with an NM no worse."""
    contigs, reads, _, e = scenario
    _describe(contigs, reads, e)
    with tempfile.TemporaryDirectory() as d:
        ref, rp = write_inputs(d, contigs, reads)
        a = parse_sam(run_align(ref, rp, os.path.join(d, "a.sam"), max_edits=e))[1]
        b = parse_sam(run_align(ref, rp, os.path.join(d, "b.sam"), max_edits=e, filter="none"))[1]
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x["qname"] == y["qname"]
        if not x["flag"] & 4:
            assert not y["flag"] & 4, f"mapped with {DEFAULT_FILTER}, unmapped without a filter: {x['line']}"
            assert y["tags"]["NM"] <= x["tags"]["NM"], (x["line"], y["line"])


@pytest.mark.parametrize("extender", ["banded", "affine"])
@pytest.mark.parametrize("flt", [pytest.param(DEFAULT_FILTER, marks=needs_default_filter), "none"])
@settings(SETTINGS, max_examples=10)
@given(scenario=scenarios(), report_all=st.booleans(), fasta=st.booleans())
def test_threads_and_batch_size_do_not_change_output(flt, extender, scenario, report_all, fasta):
    contigs, reads, _, e = scenario
    _describe(contigs, reads, e)
    with tempfile.TemporaryDirectory() as d:
        ref, rp = write_inputs(d, contigs, reads, fasta_reads=fasta)
        kw = dict(max_edits=e, filter=flt, report_all=report_all, extender=extender)
        a = run_align(ref, rp, os.path.join(d, "a.sam"), threads=1, batch_size=1000, **kw)
        b = run_align(ref, rp, os.path.join(d, "b.sam"), threads=2, batch_size=1, **kw)
        c = run_align(ref, rp, os.path.join(d, "c.sam"), threads=2, batch_size=1000, **kw)
        d1 = run_align(ref, rp, os.path.join(d, "d.sam"), threads=1, batch_size=1, **kw)
    assert body(a) == body(b) == body(c) == body(d1)
    check_sam(a, [(n, s, None if fasta else q) for n, s, q in reads], short_contigs(contigs), e,
              report_all=report_all, extender=extender)
