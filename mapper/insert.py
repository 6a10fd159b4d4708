"""The insert-size model of paired reads: given (-I, as bwa mem) or learned from the first pairs.

Learned deterministically: from the first MODEL_PAIRS pairs of the input whatever the batch size,
thread count or number of workers, using the pairs whose two mates have a unique, confident hit on
one contig in FR orientation; outliers beyond the quartiles +- 3 interquartile ranges are dropped
(bwa mem's rule, with its thread-dependent sample replaced by a fixed one), then mean and standard
deviation; pairs are accepted up to mean +- 4 standard deviations.
"""
from dataclasses import dataclass

import numpy as np

from pymap.errors import UsageError

MODEL_PAIRS = 10000
MIN_SAMPLE = 20          # fewer usable pairs: the model falls back to DEFAULT


@dataclass
class InsertModel:
    mean: float
    std: float
    low: int
    high: int
    pairs: int = 0           # pairs the model was learned from (0: given, or the fallback)
    fallback: bool = False   # DEFAULT: too few pairs to learn from

    def describe(self):
        if self.pairs:
            how = f"learned from {self.pairs} pairs"
        elif self.fallback:
            how = f"default: fewer than {MIN_SAMPLE} confident pairs to learn from"
        else:
            how = "given"
        return f"insert size {self.mean:.1f} +- {self.std:.1f}, proper within [{self.low}, {self.high}] ({how})"


DEFAULT = InsertModel(500.0, 150.0, 1, 1100, fallback=True)


def parse(text):
    """-I mean[,std[,max[,min]]] as bwa mem takes it: std 10 % of the mean when not given, max and min
    4 std from the mean."""
    try:
        parts = [float(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"-I takes mean[,std[,max[,min]]], got {text!r}") from None
    if len(parts) > 4:
        raise UsageError(f"-I takes mean[,std[,max[,min]]]: at most 4 numbers, got {text!r}")
    if len(parts) == 1 and parts[0] > 0:
        parts.append(parts[0] / 10)
    if parts[0] <= 0 or parts[1] <= 0:
        raise UsageError(f"-I takes mean[,std[,max[,min]]] with mean and std > 0, got {text!r}")
    mean, std = parts[0], parts[1]
    high = int(parts[2]) if len(parts) > 2 else int(mean + 4 * std + 0.5)
    low = int(parts[3]) if len(parts) > 3 else max(1, int(mean - 4 * std + 0.5))
    if low > high:
        raise UsageError(f"-I: the minimum insert {low} is above the maximum {high}")
    return InsertModel(mean, std, low, high)


def learn(inserts):
    """A model from observed insert sizes of confident FR pairs (DEFAULT when too few)."""
    x = np.sort(np.asarray(inserts, np.float64))
    if x.size < MIN_SAMPLE:
        return DEFAULT
    q1, q3 = np.percentile(x, [25, 75])
    iqr = q3 - q1
    x = x[(x >= q1 - 3 * iqr) & (x <= q3 + 3 * iqr)]
    mean = float(x.mean())
    std = max(float(x.std()), 1.0)
    return InsertModel(mean, std, max(1, int(mean - 4 * std + 0.5)), int(mean + 4 * std + 0.5), int(x.size))
