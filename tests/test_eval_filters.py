"""scripts/eval_filters.py on a small generated pair file."""
import csv
import importlib.util
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, os.pardir, "scripts", "eval_filters.py")


def _load():
    spec = importlib.util.spec_from_file_location("eval_filters", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pairs(rng, length, n):
    bases = np.array(list("ACGT"))
    out = []
    for i in range(n):
        src = list(bases[rng.integers(0, 4, length + 10)])
        read = list(src)
        for _ in range(int(rng.integers(0, length // 8))):
            pos = int(rng.integers(0, len(read) - 1))
            kind = rng.integers(0, 3)
            if kind == 0:
                read[pos] = bases[(list(bases).index(read[pos]) + 1) % 4]
            elif kind == 1:
                read.insert(pos, "A")
            else:
                del read[pos]
        a, b = "".join(read[:length]), "".join(src[:length])
        if i % 25 == 0:
            a = a[:5] + "N" + a[6:]
        out.append(f"{a}\t{b}\n")
    return out


def test_eval_filters(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "pairs.txt"
    lines = _pairs(rng, 60, 150) + _pairs(rng, 100, 150)
    rng.shuffle(lines)
    path.write_text("".join(lines))
    out = tmp_path / "out"
    mod = _load()
    rc = mod.main([str(path), "--filters", "edlib,shouji,sneakysnake,no-such-filter",
                   "--out", str(out), "--quiet"])
    assert rc == 0
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0].keys()) == mod.COLUMNS
    names = {r["filter"] for r in rows}
    assert names == {"edlib", "shouji", "sneakysnake"}                 # the unknown one is skipped
    for r in rows:
        L, e = int(r["read_length"]), int(r["threshold"])
        assert 0 <= e <= L // 10
        assert int(r["pairs"]) == 150 and int(r["undefined"]) == 6
        defined = int(r["pairs"]) - int(r["undefined"])
        assert int(r["edlib_accepted"]) + int(r["edlib_rejected"]) == defined
        assert int(r["filter_accepted"]) + int(r["filter_rejected"]) == defined
        assert int(r["false_rejects"]) == 0
        if r["filter"] == "edlib":
            assert int(r["false_accepts"]) == 0
            assert r["filter_accepted"] == r["edlib_accepted"]
        assert float(r["throughput_pairs_per_s"]) > 0
    assert len([r for r in rows if r["filter"] == "shouji"]) == (60 // 10 + 1) + (100 // 10 + 1)
    md = (out / "results.md").read_text()
    assert "no-such-filter" in md and "| Error threshold |" in md
    assert (out / "false_accepts.png").stat().st_size > 1000

    rc = mod.main([str(path), "--filters", "sneakysnake", "--thresholds", "0,3",
                   "--out", str(out), "--quiet"])
    assert rc == 0
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    got = [(r["read_length"], r["threshold"]) for r in rows]
    assert got == [("60", "0"), ("60", "3"), ("100", "0"), ("100", "3")]


def test_filter_entries_with_options_and_undefined_accepts(tmp_path):
    """One plugin under several settings in one run (entry NAME:KEY=VALUE is the label), --opt for every
    entry of a plugin, the undefined_accepted column and the per-length comparison table."""
    rng = np.random.default_rng(11)
    path = tmp_path / "pairs.txt"
    path.write_text("".join(_pairs(rng, 100, 200)))
    out = tmp_path / "out"
    mod = _load()
    rc = mod.main([str(path), "--filters",
                   "gatekeeper-gpu,gatekeeper-gpu:ends=full,gatekeeper-gpu:ends=bogus,sneakysnake,edlib",
                   "--opt", "gatekeeper-gpu:device=cpu", "--thresholds", "0,5,10", "--name", "toy",
                   "--repeat", "2",
                   "--out", str(out), "--quiet"])
    assert rc == 0
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    labels = list(dict.fromkeys(r["filter"] for r in rows))
    assert labels == ["gatekeeper-gpu", "gatekeeper-gpu:ends=full", "sneakysnake", "edlib"]
    undef = int(rows[0]["undefined"])
    assert undef == 8
    for r in rows:
        assert int(r["false_rejects"]) == 0
        if r["filter"] != "edlib":           # the approximate filters pass undefined pairs through
            assert int(r["undefined_accepted"]) == undef
        else:
            assert 0 <= int(r["undefined_accepted"]) <= undef
    full = {r["threshold"]: r for r in rows if r["filter"] == "gatekeeper-gpu:ends=full"}
    pub = {r["threshold"]: r for r in rows if r["filter"] == "gatekeeper-gpu"}
    assert full.keys() == pub.keys() == {"0", "5", "10"}
    assert all(full[e]["edlib_rejected"] == pub[e]["edlib_rejected"] for e in full)
    md = (out / "results.md").read_text()
    assert md.startswith("# Pre-alignment filter evaluation (ground truth: Edlib global distance): toy")
    assert "## False accepts by filter, 100 bp" in md and "| E | Edlib accepted |" in md
    assert "gatekeeper-gpu:ends=bogus" in md                               # skipped, with the reason
    assert "False rejects over all thresholds: gatekeeper-gpu 0" in md


def test_parse_filter_spec():
    mod = _load()
    assert mod.parse_filter_spec("shouji") == ("shouji", {})
    assert mod.parse_filter_spec("gatekeeper-gpu:ends=full:device=cpu") == \
        ("gatekeeper-gpu", {"ends": "full", "device": "cpu"})
    assert mod.parse_filter_spec("shouji:window=3") == ("shouji", {"window": 3})
