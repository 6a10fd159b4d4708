"""Pruning of a read's further candidates (Pipeline._extend_pruned) is exact: with it and without it
(a margin so wide that no candidate is skipped) the records are the same apart from XS, for single
reads and pairs in a repeat family; and it does skip work there."""
import numpy as np
import pytest

from pymap import api
from pymap import insert, pipeline
from pymap.options import AlignOptions

from test_pairs import mutate, rand_seq
from conftest import revcomp


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """60 kb with 40 copies of a 400 bp element at 1-12 % divergence; 300 reads of 150 bp and 150
    pairs (insert 350), half of them starting inside the copies, with 1 % substitutions."""
    rng = np.random.default_rng(5)
    element = rand_seq(rng, 400)
    seq = list(rand_seq(rng, 60000))
    for k in range(40):
        p = 1000 + k * 1450
        seq[p:p + 400] = mutate(rng, element, 0.01 + 0.11 * k / 39)
    seq = "".join(seq)
    d = tmp_path_factory.mktemp("pruning")
    ref = d / "ref.fa"
    ref.write_text(f">fam\n{seq}\n")
    starts = [1000 + int(rng.integers(0, 40)) * 1450 + int(rng.integers(0, 250)) if i % 2 else
              int(rng.integers(0, len(seq) - 400)) for i in range(300)]
    single = [mutate(rng, seq[s:s + 150]) for s in starts]
    single = [revcomp(s) if i % 3 == 0 else s for i, s in enumerate(single)]
    (d / "se.fq").write_text("".join(f"@r{i}\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(single)))
    m1 = [mutate(rng, seq[s:s + 150]) for s in starts[:150]]
    m2 = [mutate(rng, revcomp(seq[s + 200:s + 350])) for s in starts[:150]]
    (d / "r1.fq").write_text("".join(f"@p{i}/1\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(m1)))
    (d / "r2.fq").write_text("".join(f"@p{i}/2\n{s}\n+\n{'I' * 150}\n" for i, s in enumerate(m2)))
    return d


def mapped(d, tmp_path, paired):
    out = tmp_path / "out.sam"
    st = api.align(str(d / "ref.fa"), str(d / ("r1.fq" if paired else "se.fq")), out=str(out),
                   mates_path=str(d / "r2.fq") if paired else None,
                   options=AlignOptions(progress=False, threads=2, insert_size=insert.parse("350,35")), summary=False)
    recs = [[f for f in line.split("\t") if not f.startswith("XS:i:")]
            for line in out.read_text().splitlines() if not line.startswith("@")]
    return st.aligned, recs


@pytest.mark.parametrize("paired", [False, True], ids=["single", "pairs"])
def test_pruning_changes_nothing_but_xs(family, tmp_path, monkeypatch, paired):
    aligned, recs = mapped(family, tmp_path, paired)
    monkeypatch.setattr(pipeline, "PRUNE_UNITS", 10 ** 6)      # every candidate reaches its bar
    monkeypatch.setattr(pipeline, "PRUNE_ROUNDS", (1,))
    aligned_all, recs_all = mapped(family, tmp_path, paired)
    assert aligned < aligned_all                                # pruning skipped some candidates
    assert recs == recs_all
