"""The insert-size model of paired reads: given (-I, as bwa mem) or learned from the first pairs.

Learned deterministically: from the first MODEL_PAIRS pairs of the input whatever the batch size,
thread count or number of workers, using the pairs whose two mates have a unique, confident hit on
one contig in FR orientation. bwa mem's rule, with its thread-dependent sample replaced by a fixed
one: mean and standard deviation of the inserts within the quartiles +- OUTLIER_IQRS interquartile
ranges; pairs are proper within the quartiles +- PROPER_IQRS interquartile ranges, widened to at
least mean +- PROPER_STDS standard deviations (a normal sample: about mean +- 4.7 std).
"""
from dataclasses import dataclass

import numpy as np

from pymap.errors import UsageError

MODEL_PAIRS = 10000
MIN_SAMPLE = 20          # fewer usable pairs: the model falls back to DEFAULT
OUTLIER_IQRS = 2.0       # bwa mem's OUTLIER_BOUND
PROPER_IQRS = 3.0        # bwa mem's MAPPING_BOUND
PROPER_STDS = 4.0        # bwa mem's MAX_STDDEV


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
    4 std from the mean (min at least 1); every bound rounded as bwa rounds (_bwa_int)."""
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
    high = _bwa_int(parts[2] if len(parts) > 2 else mean + PROPER_STDS * std)
    low = _bwa_int(parts[3]) if len(parts) > 3 else max(1, _bwa_int(mean - PROPER_STDS * std))
    if low > high:
        raise UsageError(f"-I: the minimum insert {low} is above the maximum {high}")
    return InsertModel(mean, std, low, high)


def learn(inserts):
    """A model from observed insert sizes of confident FR pairs (DEFAULT when too few); quartiles
    taken at the sorted sample's rounded ranks, as bwa mem takes them."""
    x = np.sort(np.asarray(inserts, np.int64))
    n = x.size
    if n < MIN_SAMPLE:
        return DEFAULT
    q1, q3 = (int(x[_bwa_int(f * n)]) for f in (0.25, 0.75))
    iqr = q3 - q1
    kept = x[(x >= max(1, _bwa_int(q1 - OUTLIER_IQRS * iqr))) & (x <= _bwa_int(q3 + OUTLIER_IQRS * iqr))]
    mean = float(kept.mean())
    std = max(float(kept.std()), 1.0)
    low = min(_bwa_int(q1 - PROPER_IQRS * iqr), _bwa_int(mean - PROPER_STDS * std))
    high = max(_bwa_int(q3 + PROPER_IQRS * iqr), _bwa_int(mean + PROPER_STDS * std))
    return InsertModel(mean, std, max(1, low), high, int(kept.size))


def _bwa_int(v):
    """bwa mem's (int)(v + .499): rounded, truncated toward zero."""
    return int(v + 0.499)
