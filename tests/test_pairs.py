"""Paired-end mapping end to end: pairing, flags, RNEXT/PNEXT/TLEN, MC/MQ, the insert-size model,
interleaved input, determinism, and samtools' acceptance."""
import dataclasses
import shutil
import subprocess

import numpy as np
import pysam
import pytest

from pymap import api, cli, insert
from pymap.errors import UsageError
from pymap.options import AlignOptions

from conftest import revcomp


def rand_seq(rng, n):
    return "".join(rng.choice(list("ACGT"), n))


def mutate(rng, s, p=0.01):
    s = list(s)
    for i in np.flatnonzero(rng.random(len(s)) < p):
        s[i] = "ACGT"[("ACGT".index(s[i]) + int(rng.integers(1, 4))) % 4]
    return "".join(s)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two contigs with a 600 bp repeat copied three times; 300 pairs (insert 300 +- 30, FR) with
    truth, some mates inside the repeat copies, and 5 pairs whose read 2 is random."""
    rng = np.random.default_rng(17)
    rep = rand_seq(rng, 600)
    a = list(rand_seq(rng, 40000))
    for p in (5000, 15000, 25000):
        a[p:p + 600] = rep
    ctg = {"c1": "".join(a), "c2": rand_seq(rng, 20000)}
    d = tmp_path_factory.mktemp("pairs")
    ref = d / "ref.fa"
    ref.write_text("".join(f">{n}\n{s}\n" for n, s in ctg.items()))
    r1, r2, truth = [], [], {}
    for i in range(300):
        name = list(ctg)[i % 2]
        s = ctg[name]
        ins = int(rng.normal(300, 30))
        start = int(rng.integers(0, len(s) - ins))
        if i % 10 == 0 and name == "c1":          # mate 1 inside a repeat copy, mate 2 outside
            start = max(15000, 15700 - ins + int(rng.integers(0, 100)))
        frag = s[start:start + ins]
        m1, m2 = mutate(rng, frag[:100]), mutate(rng, revcomp(frag[-100:]))
        if i % 2:                                   # fragment from the other strand: mates swap roles
            m1, m2 = m2, m1
        if i >= 295:
            m2 = rand_seq(rng, 100)
        r1.append((f"p{i}/1", m1))
        r2.append((f"p{i}/2", m2))
        truth[f"p{i}"] = (name, start, start + ins)
    for path, recs in ((d / "r1.fq", r1), (d / "r2.fq", r2)):
        path.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in recs))
    inter = d / "inter.fq"
    inter.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for pair in zip(r1, r2) for n, s in pair))
    return ref, d / "r1.fq", d / "r2.fq", inter, truth


def run(ref, r1, r2, out, **kw):
    kw.setdefault("progress", False)
    st = api.align(str(ref), str(r1), out=str(out), options=AlignOptions(**kw), summary=False,
                   mates_path=None if r2 is None else str(r2))
    return st, open(out).read() if str(out).endswith(".sam") else None


def records(text):
    return [l.split("\t") for l in text.splitlines() if not l.startswith("@")]


def test_pairs_flags_fields_and_truth(data, tmp_path):
    ref, r1, r2, _, truth = data
    st, text = run(ref, r1, r2, tmp_path / "o.sam")
    recs = records(text)
    assert len(recs) == 600 and st.reads == 600
    placed = 0
    for a, b in zip(recs[0::2], recs[1::2]):
        fa, fb = int(a[1]), int(b[1])
        assert a[0] == b[0] and fa & 64 and fb & 128 and fa & 1 and fb & 1
        assert not (fa | fb) & 256 + 2048
        name = a[0]
        if int(name[1:]) >= 295:                    # read 2 is random: unmapped, placed at its mate
            assert fb & 4 and fa & 8 and not fa & 2
            assert (b[2], b[3], b[6], b[7]) == (a[2], a[3], "=", a[3])
            assert "MC:Z:" + a[5] in b and "MQ:i:" + a[4] in b and any(x.startswith("YU:Z:") for x in b[11:])
            continue
        assert fa & 2 and fb & 2, (a, b)
        assert bool(fa & 16) != bool(fb & 16) and bool(fa & 32) == bool(fb & 16) and bool(fb & 32) == bool(fa & 16)
        assert a[6] == b[6] == "=" and a[7] == b[3] and b[7] == a[3]
        assert int(a[8]) == -int(b[8]) != 0
        ctg, s, e = truth[name]
        lo = min(int(a[3]), int(b[3])) - 1
        assert abs(int(a[8])) == max(pysam_end(a), pysam_end(b)) - lo
        assert f"MC:Z:{b[5]}" in a and f"MQ:i:{b[4]}" in a and f"MC:Z:{a[5]}" in b
        right = a[2] == ctg and abs(lo - s) <= 5
        placed += right
        assert right or a[4] == b[4] == "0", (a, b)   # wrong only inside a repeat copy, at MAPQ 0
    assert placed >= 285                          # pairing places mates that fall in repeat copies
    assert st.proper_pairs == 295


def pysam_end(rec):
    seg = pysam.AlignedSegment.fromstring("\t".join(rec), pysam.AlignmentHeader.from_dict(
        {"SQ": [{"SN": "c1", "LN": 40000}, {"SN": "c2", "LN": 20000}]}))
    return seg.reference_end


def test_interleaved_threads_and_batches_give_the_same_output(data, tmp_path):
    ref, r1, r2, inter, _ = data
    _, a = run(ref, r1, r2, tmp_path / "a.sam", threads=1)
    _, b = run(ref, inter, None, tmp_path / "b.sam", interleaved=True, threads=2, batch_size=7)
    _, c = run(ref, r1, r2, tmp_path / "c.sam", batch_size=1)
    st_d, d = run(ref, r1, r2, tmp_path / "d.sam", threads=2, batch_size=11, batches=4)
    st_e, e = run(ref, r1, r2, tmp_path / "e.sam", threads=2, batch_size=11, batches=1)
    body = lambda t: [l for l in t.splitlines() if not l.startswith("@PG")]   # noqa: E731
    assert body(a) == body(b) == body(c) == body(d) == body(e)
    counts = [{k: v for k, v in vars(st).items() if k != "seconds"} for st in (st_d, st_e)]
    assert counts[0] == counts[1] and counts[0]["proper_pairs"] > 0


def test_model_pairs_mapped_beside_the_next_batch(data, tmp_path, monkeypatch):
    """The insert-size model waits only for its MODEL_PAIRS pairs; the rest of a larger batch goes on
    as a batch of its own, and with batches side by side its hits are computed beside the model's,
    before the model exists. Every pair's hits are computed once; same records and model as batches
    that end there."""
    import threading

    from pymap.pipeline import Pipeline
    ref, r1, r2, _, _ = data
    monkeypatch.setattr(insert, "MODEL_PAIRS", 40)
    sizes, at_learn = [], []                    # sizes: the pairs of each hits call, when it starts
    hits_of, learn = Pipeline.pair_hits_of, insert.learn
    rest_started, wait_for_rest, started_beside = threading.Event(), [True], []

    def pair_hits_of(self, a, b):
        sizes.append(len(a))
        if len(a) == 60:
            rest_started.set()
        elif len(a) == 40 and wait_for_rest[0]:
            # side by side, the rest of batch 1 starts while the model's pairs are mapped (a thread
            # that started late must not make the check below fail; one that never starts does)
            started_beside.append(rest_started.wait(30))
        return hits_of(self, a, b)
    monkeypatch.setattr(Pipeline, "pair_hits_of", pair_hits_of)
    monkeypatch.setattr(insert, "learn", lambda sample: at_learn.append(sorted(sizes)) or learn(sample))
    _, big = run(ref, r1, r2, tmp_path / "big.sam", threads=2, batches=2, batch_size=200)   # 100 pairs a batch
    assert started_beside == [True]             # the rest of batch 1 started while the model's 40 ran
    assert at_learn == [[40, 60]]
    assert sorted(sizes) == [40, 60, 100, 100]
    sizes.clear()
    at_learn.clear()
    wait_for_rest[0] = False
    _, one = run(ref, r1, r2, tmp_path / "one.sam", threads=2, batches=1, batch_size=200)
    assert at_learn == [[40]] and sizes == [40, 60, 100, 100]
    sizes.clear()
    at_learn.clear()
    _, small = run(ref, r1, r2, tmp_path / "small.sam", threads=2, batches=2, batch_size=30)  # 15 pairs a batch
    assert at_learn == [[10, 15, 15]] and sizes[3] == 5 and sum(sizes) == 300
    body = lambda t: [l for l in t.splitlines() if not l.startswith("@PG")]   # noqa: E731
    assert body(big) == body(small) == body(one)


def test_insert_size_model(data, tmp_path, capsys):
    ref, r1, r2, _, _ = data
    m = insert.learn(np.random.default_rng(1).normal(300, 30, 5000).astype(int))
    assert abs(m.mean - 300) < 3 and abs(m.std - 30) < 3 and m.low < 200 and m.high > 400
    assert insert.learn([300] * 5) == insert.DEFAULT
    # bwa mem's rule: quartiles at rounded ranks (126, 179 here), mean and std within 2 interquartile
    # ranges of them (the five 1000s are left out), proper within 3 of them (1..338) or 4 std of the
    # mean (34..265), whichever is wider
    flat = insert.learn(list(range(100, 200)) + [1000] * 5)
    assert (flat.mean, flat.pairs, flat.low, flat.high) == (149.5, 100, 1, 338)
    assert abs(flat.std - 28.866) < 0.001
    narrow = insert.learn([300] * 40 + [301] * 20)           # std at least 1: 4 std is the wider here
    assert (narrow.std, narrow.low, narrow.high) == (1.0, 296, 304)
    assert insert.learn([300] * 5).describe().endswith("(default: fewer than 20 confident pairs to learn from)")
    assert insert.parse("500,150").describe().endswith("(given)") and "learned from" in m.describe()
    g = insert.parse("250,25")
    assert (g.mean, g.std, g.low, g.high) == (250, 25, 150, 350)
    assert (insert.parse("250,25,400,100").low, insert.parse("250,25,400,100").high) == (100, 400)
    # rounded as bwa mem rounds them, (int)(x + .499): 140.5 -> 140, 400.6 -> 401, 99.7 -> 100
    assert (insert.parse("100.5,10").low, insert.parse("100.5,10").high) == (60, 140)
    assert (insert.parse("250,25,400.6,99.7").low, insert.parse("250,25,400.6,99.7").high) == (100, 401)
    short = insert.parse("250")                 # bwa mem's short form: std 10 % of the mean
    assert (short.mean, short.std, short.low, short.high) == (250, 25, 150, 350)
    for bad in ("x", "", "0", "0,5", "250,25,10,100"):
        with pytest.raises(UsageError):
            insert.parse(bad)
    with pytest.raises(UsageError, match="at most 4 numbers"):
        insert.parse("250,25,400,100,7")
    # a model that excludes the real inserts: no proper pairs
    st, _ = run(ref, r1, r2, tmp_path / "o.sam", insert_size=insert.parse("2000,10"))
    assert st.proper_pairs == 0
    assert cli.main(["align", str(ref), str(r1), str(r2), "-o", str(tmp_path / "x.sam"), "--no-progress"]) == 0
    assert "insert size" in capsys.readouterr().err


def test_batches_without_a_hit_are_written_unmapped(data, tmp_path):
    """Pairs of which no read has a hit (all N, or from another genome) fill whole batches here:
    every read unmapped, flags 77 / 141, the same records whatever the batch size."""
    ref, r1, r2, _, _ = data
    rng = np.random.default_rng(5)
    lines1, lines2 = open(r1).readlines(), open(r2).readlines()
    none = [("n0", "N" * 100, "N" * 100), ("f1", rand_seq(rng, 100), rand_seq(rng, 100))]
    for k, mates in ((1, lines1), (2, lines2)):
        with open(tmp_path / f"m{k}.fq", "w") as fh:
            fh.writelines(mates[:4])
            fh.writelines(f"@{name}/{k}\n{seqs[k - 1]}\n+\n{'I' * 100}\n" for name, *seqs in none)
            fh.writelines(mates[4:8])
    m1, m2 = tmp_path / "m1.fq", tmp_path / "m2.fq"
    _, one = run(ref, m1, m2, tmp_path / "one.sam", batch_size=1)
    _, whole = run(ref, m1, m2, tmp_path / "whole.sam")
    body = lambda t: [l for l in t.splitlines() if not l.startswith("@PG")]   # noqa: E731
    assert body(one) == body(whole)
    flags = {(r[0], int(r[1])) for r in records(one) if r[0] in ("n0", "f1")}
    assert flags == {("n0", 77), ("n0", 141), ("f1", 77), ("f1", 141)}
    _, alone = run(ref, tmp_path / "m1.fq", tmp_path / "m2.fq", tmp_path / "alone.sam", batch_size=1, threads=2)
    assert body(alone) == body(whole)


def test_align_leaves_the_callers_options_alone(data, tmp_path):
    """The defaults a run fills in (extender, seeder, batches) stay in its own copy: the caller's
    options map the next run as given. Two read files and interleaved=True: one usage error."""
    ref, r1, r2, _, _ = data
    opts = AlignOptions(report_all=True, max_edits=3, progress=False)
    given = dataclasses.asdict(opts)
    api.align(str(ref), str(r1), out=str(tmp_path / "a.sam"), options=opts, summary=False)
    api.make_pipeline(str(ref), opts)
    assert dataclasses.asdict(opts) == given
    with pytest.raises(UsageError, match="interleaved"):
        api.align(str(ref), str(r1), out=str(tmp_path / "b.sam"), mates_path=str(r2),
                  options=AlignOptions(interleaved=True, progress=False), summary=False)
    assert not (tmp_path / "b.sam").exists()


def test_mismatched_mates_are_one_error_and_no_output(data, tmp_path, capsys):
    ref, r1, r2, _, _ = data
    short = tmp_path / "short.fq"
    short.write_text("".join(open(r2).readlines()[:400]))
    out = tmp_path / "o.bam"
    assert cli.main(["align", str(ref), str(r1), str(short), "-o", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("pymap: error:") == 1 and "short.fq" in err
    assert not out.exists()
    assert cli.main(["align", str(ref), str(r1), str(r2), "-p", "-o", str(out)]) == 2


@pytest.mark.skipif(shutil.which("samtools") is None, reason="samtools absent")
def test_samtools_accepts_pairs(data, tmp_path):
    ref, r1, r2, _, _ = data
    out = tmp_path / "o.bam"
    run(ref, r1, r2, out)
    subprocess.run(["samtools", "quickcheck", str(out)], check=True)
    fs = subprocess.run(["samtools", "flagstat", str(out)], capture_output=True, text=True, check=True).stdout
    assert "600 + 0 paired in sequencing" in fs and "590 + 0 properly paired" in fs
    subprocess.run(f"samtools sort -n {out} | samtools fixmate -m - {tmp_path}/fm.bam", shell=True, check=True)


def test_mate_rescue_through_the_filter(tmp_path):
    """Mates with a mismatch every 11 bases have no exact 16-mer to seed from; their partners map
    uniquely, and the rescue finds them in the window the insert-size model allows."""
    rng = np.random.default_rng(23)
    genome = rand_seq(rng, 30000)
    ref = tmp_path / "ref.fa"
    ref.write_text(f">g\n{genome}\n")
    r1, r2, truth = [], [], {}
    for i in range(40):
        start = 500 + 700 * i
        ins = 280 + int(rng.integers(0, 40))
        frag = genome[start:start + ins]
        m2 = list(revcomp(frag[-100:]))
        for j in range(5, 100, 11):
            m2[j] = "ACGT"[("ACGT".index(m2[j]) + 1) % 4]
        r1.append((f"q{i}", frag[:100]))
        r2.append((f"q{i}", "".join(m2)))
        truth[f"q{i}"] = start + ins - 100
    for path, recs in ((tmp_path / "a.fq", r1), (tmp_path / "b.fq", r2)):
        path.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in recs))
    st, text = run(ref, tmp_path / "a.fq", tmp_path / "b.fq", tmp_path / "o.sam", insert_size=insert.parse("300,20"))
    recs = records(text)
    assert st.rescue_windows == 40 and st.rescued_pairs == 40 and st.proper_pairs == 40
    assert st.rescue_candidates == 40 * 161 and st.rescue_accepted < st.rescue_candidates // 4
    assert 40 <= st.rescue_extended <= 80          # one candidate per run of accepted neighbours
    for b in recs[1::2]:
        assert int(b[1]) & 2 and int(b[3]) - 1 == truth[b[0]] and b[5] == "100M", b


def test_mate_rescue_from_hits_of_repeat_copies(tmp_path, monkeypatch):
    """Pairs from an array of 40 copies of a 1 kb unit, 2 % apart: read 2 exact, read 1 with 5 %
    errors. With two candidates a read (max_cands=2) read 1 is often seeded at other copies only;
    neither mate is confident, but the rescue from read 2's best hit (bwa mem's rule: every hit near
    the read's best whose mate has no partner hit) finds read 1 at its own copy."""
    rng = np.random.default_rng(41)
    unit = rand_seq(rng, 1000)
    genome = rand_seq(rng, 5000) + "".join(mutate(rng, unit, 0.02) for _ in range(40)) + rand_seq(rng, 5000)
    ref = tmp_path / "ref.fa"
    ref.write_text(f">g\n{genome}\n")
    r1, r2 = [], []
    for i in range(40):
        start = 5000 + 1000 * i + 200
        frag = genome[start:start + 400]
        r1.append((f"q{i}", mutate(rng, frag[:100], 0.05)))
        r2.append((f"q{i}", revcomp(frag[-100:])))
    for path, recs in ((tmp_path / "a.fq", r1), (tmp_path / "b.fq", r2)):
        path.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in recs))
    st, text = run(ref, tmp_path / "a.fq", tmp_path / "b.fq", tmp_path / "o.sam",
                   insert_size=insert.parse("400,30"), seeder_opts={"max_cands": 2})
    recs = records(text)
    at_own = [sum(int(r[3]) - 1 == 5200 + 1000 * int(r[0][1:]) + 300 * m for r in recs[m::2]) for m in (0, 1)]
    assert at_own[0] >= 36 and at_own[1] >= 37, at_own
    assert st.rescue_windows >= 30 and st.proper_pairs == 40
    # the windows filtered a read at a time instead of all at once: the same records
    from pymap import pipeline
    monkeypatch.setattr(pipeline, "RESCUE_POSITIONS", 1)
    assert records(run(ref, tmp_path / "a.fq", tmp_path / "b.fq", tmp_path / "p.sam",
                       insert_size=insert.parse("400,30"), seeder_opts={"max_cands": 2})[1]) == recs
    parts = pipeline.read_parts(np.array([0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 5]), 4)
    assert parts.tolist() == [5, 10]


def test_mates_of_proper_pairs_are_kept_below_the_single_read_minimum(tmp_path):
    """A mate that aligns over 26 bases only (score 26 < -T 30) is reported when its partner places
    the pair properly, and unmapped when mapped as a single read."""
    rng = np.random.default_rng(31)
    genome = rand_seq(rng, 20000)
    ref = tmp_path / "ref.fa"
    ref.write_text(f">g\n{genome}\n")
    frag = genome[5000:5300]
    m1 = frag[:100]
    m2 = revcomp(frag[-26:]) + rand_seq(rng, 74)
    (tmp_path / "a.fq").write_text(f"@x\n{m1}\n+\n{'I' * 100}\n")
    (tmp_path / "b.fq").write_text(f"@x\n{m2}\n+\n{'I' * 100}\n")
    st, text = run(ref, tmp_path / "a.fq", tmp_path / "b.fq", tmp_path / "o.sam", insert_size=insert.parse("300,20"))
    a, b = records(text)
    assert int(a[1]) & 2 and int(b[1]) & 2 and b[5].endswith("S26M") and "AS:i:26" in b
    st, text = run(ref, tmp_path / "b.fq", None, tmp_path / "s.sam")
    assert st.mapped == 0


@pytest.mark.parametrize("kw", [dict(report_all=True, max_edits=4), dict(max_hits=3)])
def test_secondaries_and_all_for_pairs(data, tmp_path, kw):
    ref, r1, r2, _, _ = data
    st, text = run(ref, r1, r2, tmp_path / "o.sam", **kw)
    recs = records(text)
    prim = [r for r in recs if not int(r[1]) & (256 | 2048)]
    assert [r[0] for r in prim] == [f"p{i}" for i in range(300) for _ in (0, 1)]
    assert [int(r[1]) & 192 for r in prim] == [64, 128] * 300
    sec = [r for r in recs if int(r[1]) & 256]
    assert sec and all(int(r[1]) & 1 and r[4] == "0" for r in sec)
    # TLEN of a secondary record: against its mate's primary, as bwa mem does
    prim_of = {(r[0], int(r[1]) & 192): r for r in prim}
    for r in sec:
        m = prim_of[(r[0], 192 - (int(r[1]) & 192))]
        if int(m[1]) & 4 or m[2] != r[2]:
            assert r[8] == "0"
            continue
        lo, hi = min(int(r[3]), int(m[3])) - 1, max(pysam_end(r), pysam_end(m))
        left = int(r[3]) < int(m[3]) or (r[3] == m[3] and int(r[1]) & 64)
        assert int(r[8]) == (hi - lo if left else lo - hi), (r, m)
    if "max_hits" in kw:
        per = {}
        for r in sec:
            per[(r[0], int(r[1]) & 192)] = per.get((r[0], int(r[1]) & 192), 0) + 1
        assert max(per.values()) <= 2


def test_secondaries_point_at_the_mates_placement(data, tmp_path):
    """Secondary records of a read in a repeat copy: flagged 0x2 only where they make a proper pair
    with the mate's primary (which their RNEXT, PNEXT and TLEN give), not at the copies 10 kb away;
    where the mate is unmapped, RNEXT and PNEXT give its placement (the read's primary), as the
    primary's do."""
    ref, _, _, _, _ = data
    c1 = open(ref).read().split(">c1\n")[1].split("\n")[0]
    rng = np.random.default_rng(3)
    m1 = c1[15450:15550]                    # inside the second of three identical 600 bp copies
    reads = [("near", m1, revcomp(c1[15650:15750])), ("lone", m1, rand_seq(rng, 100))]
    for k in (1, 2):
        (tmp_path / f"a{k}.fq").write_text("".join(f"@{r[0]}/{k}\n{r[k]}\n+\n{'I' * 100}\n" for r in reads))
    _, text = run(ref, tmp_path / "a1.fq", tmp_path / "a2.fq", tmp_path / "o.sam", max_hits=3,
                  insert_size=insert.parse("300,30"))
    recs = records(text)
    prim = {(r[0], int(r[1]) & 192): r for r in recs if not int(r[1]) & 2304}
    sec = [r for r in recs if int(r[1]) & 256]
    assert {r[0] for r in sec} == {"near", "lone"} and all(int(r[1]) & 64 for r in sec)
    near = prim[("near", 64)]
    assert int(near[1]) & 2 and near[3] == "15451" and int(near[8]) == 300
    for r in sec:
        own = prim[(r[0], 64)]
        assert not int(r[1]) & 2 and r[3] in {"5451", "15451", "25451"} - {own[3]}, r
        if r[0] == "near":
            assert (r[6], r[7]) == ("=", "15651") and abs(int(r[8])) > 9000
        else:
            mate = prim[("lone", 128)]
            assert int(mate[1]) & 4 and (mate[2], mate[3]) == (own[2], own[3])
            assert (r[6], r[7], r[8]) == ("=", own[3], "0"), r


def test_pair_mapq_against_the_mates_apart():
    """A pair's MAPQ counts the mates placed apart, one at another hit than the pair's (less the
    unpaired penalty), as a runner-up, as bwa mem's subo: a pair scoring 290 whose mates each have a
    hit of 150 elsewhere is hardly better than those (283), not a sure placement."""
    from pymap.kernels.pairing import PAIR_OFFSET, PAIR_ONE_EDIT_MAPQ, pair_hits
    # pair 0: mate 1 at 1000 (+, 150) or 50000 (+, 150); mate 2 at 1200 (-, 140) or 90000 (-, 150)
    # pair 1: the same without the hits elsewhere; pair 2: as pair 0 with mate 2 at 1200 scoring 136
    h_read = np.array([0, 0, 1, 1, 2, 3, 4, 4, 5, 5], np.int64)
    h_strand = np.array([0, 0, 1, 1, 0, 1, 0, 0, 1, 1], np.int8)
    h_start = np.array([1000, 50000, 1200, 90000, 1000, 1200, 1000, 50000, 1200, 90000], np.int64)
    h_end = h_start + 150
    h_score = np.array([150, 150, 140, 150, 150, 140, 150, 150, 136, 150], np.int32)
    shadow = np.full(10, np.iinfo(np.int64).min, np.int64)
    keep = np.ones(10, np.bool_)
    pick1, pick2, q = pair_hits(h_read, h_strand, h_start, h_end, np.zeros(10, np.int64), h_score, shadow, keep,
                                3, 350.0, 50.0, 100, 600, 1, 5, 17, 0, 0)
    assert pick1.tolist() == [0, 4, 6] and pick2.tolist() == [2, 5, 8]
    # pair 0: a margin of 290 - 283 = 7 score points, more than an edit (5 points): 13 phred an edit
    # less 5, at least PAIR_ONE_EDIT_MAPQ; pair 1: its mates apart would sit where the pair has them,
    # no other placement: 60; pair 2: a margin of 3 points, less than an edit: the rule alone
    assert q.tolist() == [max(13 * 7 // 5 - PAIR_OFFSET, PAIR_ONE_EDIT_MAPQ), 60, 13 * 3 // 5 - PAIR_OFFSET]
    assert q[0] == PAIR_ONE_EDIT_MAPQ and q[2] == 2


def test_pair_mapq_of_a_pair_ahead_by_its_insert_alone():
    """A pair an edit ahead of another proper pair only by the likelier insert (two copies of a
    segmental duplication, both mates aligning as well in each) keeps the rule's MAPQ (8); one an edit
    ahead in its alignments gets at least PAIR_ONE_EDIT_MAPQ."""
    from pymap.kernels.pairing import PAIR_OFFSET, PAIR_ONE_EDIT_MAPQ, insert_penalty, pair_hits
    # pair 0: mate 1 at 1000 and 50000 (+), mate 2 at 1200 (-, insert 350, the mean) and 50370 (-,
    # insert 520), all four scoring 150; pair 1: mate 2's second copy at 50200 (insert 350) scores 145
    assert insert_penalty(520, 350.0, 50.0, 1) == 5
    h_read = np.repeat(np.arange(4), 2)
    h_strand = np.array([0, 0, 1, 1] * 2, np.int8)
    h_start = np.array([1000, 50000, 1200, 50370, 1000, 50000, 1200, 50200], np.int64)
    h_score = np.array([150, 150, 150, 150, 150, 150, 150, 145], np.int32)
    shadow = np.full(8, np.iinfo(np.int64).min, np.int64)
    pick1, pick2, q = pair_hits(h_read, h_strand, h_start, h_start + 150, np.zeros(8, np.int64), h_score, shadow,
                                np.ones(8, np.bool_), 2, 350.0, 50.0, 100, 600, 1, 5, 17, 0, 0)
    assert pick1.tolist() == [0, 4] and pick2.tolist() == [2, 6]
    # both 300 against 295, a margin of an edit (5 points): pair 0's rival as well aligned (300, less
    # 5 for its insert), pair 1's 5 below in its alignments
    assert q.tolist() == [13 * 5 // 5 - PAIR_OFFSET, PAIR_ONE_EDIT_MAPQ]


def test_insert_penalties_are_the_penalty_of_each_insert(monkeypatch):
    """The pairing's table of insert-size penalties holds insert_penalty of each insert from low on;
    past the table's end (a model wider than PENALTY_TABLE) pair_hits computes them, the same picks."""
    from pymap.kernels import pairing
    table = pairing.insert_penalties(100, 900, 350.0, 50.0, 1)
    assert table.tolist() == [pairing.insert_penalty(np.int64(x), 350.0, 50.0, 1) for x in range(100, 901)]
    h_read = np.repeat(np.arange(4), 2)
    h_strand = np.array([0, 0, 1, 1] * 2, np.int8)
    h_start = np.array([1000, 50000, 1200, 50370, 1000, 50000, 1300, 50200], np.int64)
    h_score = np.array([150, 150, 150, 150, 150, 150, 150, 148], np.int32)
    args = (h_read, h_strand, h_start, h_start + 150, np.zeros(8, np.int64), h_score,
            np.full(8, np.iinfo(np.int64).min, np.int64), np.ones(8, np.bool_), 2, 350.0, 50.0, 100, 600, 1, 5, 17,
            0, 0)
    whole = pairing.pair_hits(*args)
    monkeypatch.setattr(pairing, "PENALTY_TABLE", 300)        # inserts of 400 and more computed
    assert all(np.array_equal(a, b) for a, b in zip(pairing.pair_hits(*args), whole))


def test_rescue_anchors():
    """The hits a mate is searched from: none for a pair at both mates' best hits; else a read's
    hits within the unpaired penalty of its best whose mate has no partner hit (a partner far below
    the mate's best does not count), best first, up to the cap, those searched already left out,
    and only while the hit could reach the pair's score."""
    from pymap.kernels.pairing import pair_hits, rescue_anchors
    from pymap.kernels.segments import group_starts
    # pair 0: mate 1 at 1000 (+, 150), mate 2 at 1200 (-, 150): placed at both best
    # pair 1: mate 1 at 1000 (+, 140) and 5000 (+, 150, no partner), 9000 (+, 148, no partner),
    #         20000 (+, 120: too far below its best); mate 2 at 1200 (-, 140)
    # pair 2: mate 1 at 30000 (+, 150); mate 2 at 30200 (-, 80: a partner, but poor) and 60000 (-, 150)
    h_read = np.array([0, 1, 2, 2, 2, 2, 3, 4, 5, 5], np.int64)
    h_strand = np.array([0, 1, 0, 0, 0, 0, 1, 0, 1, 1], np.int8)
    h_start = np.array([1000, 1200, 1000, 5000, 9000, 20000, 1200, 30000, 30200, 60000], np.int64)
    h_end = h_start + 150
    h_score = np.array([150, 150, 140, 150, 148, 120, 140, 150, 80, 150], np.int32)
    ctg = np.zeros(10, np.int64)
    keep = np.ones(10, np.bool_)
    shadow = np.full(10, np.iinfo(np.int64).min, np.int64)
    args = (350.0, 50.0, 100, 600)
    pick1, pick2, _ = pair_hits(h_read, h_strand, h_start, h_end, ctg, h_score, shadow, keep, 3, *args, 1, 5, 17,
                                0, 0)
    assert pick1.tolist() == [0, 2, -1] and pick2.tolist() == [1, 6, -1]
    first = group_starts(h_read, 6)
    rescuable = np.ones(6, np.bool_)
    best_score = np.full(6, 150, np.int64)

    def anchors(cap, searched=np.zeros(10, np.bool_), found_only=False, rescuable=rescuable):
        return rescue_anchors(first, h_strand, h_start, h_end, ctg, h_score, keep, pick1, pick2, best_score,
                              found_only, rescuable, searched, *args, 1, 17, cap).tolist()

    assert anchors(50) == [3, 4, 7, 9]            # pair 1's mate 2 is paired at its best: no anchor
    assert anchors(1) == [3, 7, 9]
    assert anchors(2, searched=np.isin(np.arange(10), [3])) == [4, 7, 9]
    assert anchors(50, rescuable=np.array([1, 1, 1, 0, 1, 1], np.bool_)) == [7, 9]
    # with the mate at its best found (140): 148 + 140 reaches the pair's 280 less its insert penalty
    assert anchors(50, found_only=True) == [3, 4, 7, 9]
    h_score[4] = 135                              # 135 + 140 does not; 135 is within 17 of 150
    assert anchors(50, found_only=True) == [3, 7, 9] and anchors(50) == [3, 4, 7, 9]


def test_a_mate_lifts_its_partner_unless_the_seeder_capped_it_at_0():
    """A read placed by its mate gets the pair's MAPQ, at most 40 above its own; one whose copies the
    seeder only sampled (cap 0: a repeat array, where it also fits shifted by its period) keeps its own."""
    from pymap.pipeline import mate_lifted_mapq
    own = np.array([0, 0, 10, 50, 0])
    pair = np.array([60, 25, 60, 30, 60])
    cap = np.array([60, 60, 60, 60, 0])
    assert mate_lifted_mapq(own, pair, cap).tolist() == [40, 25, 50, 50, 0]
