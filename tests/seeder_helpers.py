"""References, read batches and mutated reads built from code arrays, for the seeder tests."""
import hashlib

import numpy as np

from pymap.batch import ReadBatch
from pymap.reference import Reference


def make_reference(seqs, names=None):
    """Reference from code arrays (uint8, 0..4)."""
    names = names or [f"c{i}" for i in range(len(seqs))]
    offsets = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=offsets[1:])
    codes = np.concatenate(seqs).astype(np.uint8)
    digest = hashlib.sha1(codes.tobytes() + "|".join(names).encode()).hexdigest()
    return Reference(list(names), offsets, codes, digest)


def make_batch(reads):
    """A ReadBatch of code arrays (no names, no qualities)."""
    offsets = np.zeros(len(reads) + 1, np.int64)
    np.cumsum([len(r) for r in reads], out=offsets[1:])
    codes = np.concatenate(reads).astype(np.uint8) if reads else np.zeros(0, np.uint8)
    return ReadBatch(codes=codes, offsets=offsets, names=np.zeros(0, np.uint8),
                     name_offsets=np.zeros(len(reads) + 1, np.int64), quals=np.zeros(0, np.uint8))


def revcomp(codes):
    out = codes[::-1].copy()
    ok = out < 4
    out[ok] = 3 - out[ok]
    return out


def mutate(rng, seq, n_sub, n_indel):
    """seq with n_sub substitutions and n_indel single-base insertions or deletions (not within 5
    bases of an end)."""
    seq = list(seq)
    for _ in range(n_sub):
        i = rng.integers(len(seq))
        seq[i] = (seq[i] + rng.integers(1, 4)) % 4
    for _ in range(n_indel):
        i = rng.integers(5, len(seq) - 5)
        if rng.random() < 0.5:
            del seq[i]
        else:
            seq.insert(i, rng.integers(4))
    return np.array(seq, np.uint8)
