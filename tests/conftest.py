"""Shared fixtures: a random multi-contig reference and reads simulated from it with known truth."""
import os

import numpy as np
import pytest

BASES = np.array(list("ACGT"))
COMP = str.maketrans("ACGTN", "TGCAN")


def random_seq(rng, n):
    return "".join(BASES[rng.integers(0, 4, n)])


def mutate(rng, seq, n_edits):
    s = list(seq)
    for _ in range(n_edits):
        kind = rng.integers(0, 3)
        i = int(rng.integers(1, len(s) - 1))
        if kind == 0:
            s[i] = "ACGT"[("ACGT".index(s[i]) + int(rng.integers(1, 4))) % 4] if s[i] in "ACGT" else "A"
        elif kind == 1:
            s.insert(i, "ACGT"[int(rng.integers(0, 4))])
        else:
            del s[i]
    return "".join(s)


def lambda_pairs(directory, n, seed):
    """Read 1 and read 2 files of n pairs cut from examples/lambda.fa (insert 300, FR, 100 bp mates)
    in `directory`; returns their paths."""
    ref = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "lambda.fa")
    seq = "".join(open(ref).read().split("\n")[1:])
    rng = np.random.default_rng(seed)
    r1, r2 = [], []
    for i in range(n):
        p = int(rng.integers(0, len(seq) - 300))
        r1.append(f"@p{i}\n{seq[p:p + 100]}\n+\n{'I' * 100}\n")
        r2.append(f"@p{i}\n{revcomp(seq[p + 200:p + 300])}\n+\n{'I' * 100}\n")
    (directory / "r1.fq").write_text("".join(r1))
    (directory / "r2.fq").write_text("".join(r2))
    return str(directory / "r1.fq"), str(directory / "r2.fq")


def revcomp(s):
    return s.translate(COMP)[::-1]


@pytest.fixture(scope="session")
def sim_data(tmp_path_factory):
    """(ref_path, reads_path, truth) with truth[name] = (contig, 0-based pos, strand, edits)."""
    rng = np.random.default_rng(2024)
    d = tmp_path_factory.mktemp("sim")
    contigs = {"chrA": random_seq(rng, 30000), "chrB with words": random_seq(rng, 12000), "chrC": random_seq(rng, 5000)}
    ref = d / "ref.fa"
    ref.write_text("".join(f">{n}\n" + "\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n"
                           for n, s in contigs.items()))
    names = list(contigs)
    truth = {}
    recs = []
    for i in range(600):
        c = names[int(rng.integers(0, 3))]
        seq = contigs[c]
        L = int(rng.choice([60, 100, 150]))
        pos = int(rng.integers(0, len(seq) - L - 5))
        edits = int(rng.integers(0, 4))
        r = mutate(rng, seq[pos:pos + L], edits)
        strand = "-" if rng.random() < 0.5 else "+"
        if strand == "-":
            r = revcomp(r)
        name = f"read{i}"
        truth[name] = (c.split()[0], pos, strand, edits)
        recs.append(f"@{name}\n{r}\n+\n{'I' * len(r)}\n")
    reads = d / "reads.fq"
    reads.write_text("".join(recs))
    return ref, reads, truth, {k.split()[0]: v for k, v in contigs.items()}
