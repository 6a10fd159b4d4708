"""The default extender: banded affine-gap alignment with end clipping, bwa-mem scoring (kernels.affine)."""
import numpy as np

from pymap.batch import Alignments
from pymap.plugins import Extender, resolve_device


def parse_clip(clip):
    """bwa's -L: one penalty for both read ends, or "left,right" (also a 2-tuple)."""
    bad = ValueError(f"option 'clip' must be a whole number >= 0 or two of them 'LEFT,RIGHT', not {clip!r}")
    if isinstance(clip, str):
        parts = [p.strip() for p in clip.split(",")]
        if not 1 <= len(parts) <= 2 or not all(p.isdigit() for p in parts):
            raise bad
        values = [int(p) for p in parts]
    elif isinstance(clip, (tuple, list)):
        values = list(clip) if len(clip) == 2 else []
    else:
        values = [clip]
    if not 1 <= len(values) <= 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                              and 0 <= v <= 1_000_000 for v in values):
        raise bad
    return int(values[0]), int(values[-1])


class AffineExtender(Extender):
    """Banded affine-gap alignment, soft-clipping either read end when that scores better (default).

    Options are bwa-mem's scoring: match (-A, 1), mismatch (-B, 4), gap_open (-O, 6), gap_ext (-E, 1;
    a gap of k bases costs open + k * ext), clip (-L, 5, or "left,right": the penalty of clipping a
    read end), min_score (-T: alignments scoring lower are not reported, 30), band (w; default
    max(e, 16) per candidate), device (cpu, gpu or auto: the same routine on a CUDA GPU, the same
    results). Gaps are left-aligned; a read overhanging a contig end is clipped there.
    """
    name = "affine"
    concurrent = True
    scoring = "affine"

    def __init__(self, match=1, mismatch=4, gap_open=6, gap_ext=1, clip=5, min_score=30, band=None,
                 device="cpu"):
        from pymap.kernels.affine import make_params
        left, right = parse_clip(clip)
        if band is not None and int(band) < 0:
            raise ValueError(f"band must be >= 0, got {band}")
        self.band = None if band is None else int(band)
        self.params = make_params(match=int(match), mismatch=int(mismatch), gap_open=int(gap_open),
                                  gap_ext=int(gap_ext), clip_left=left, clip_right=right,
                                  min_score=int(min_score))
        self.min_score = int(min_score)
        self.match_score = int(match)
        self.edit_cost = int(match) + int(mismatch)
        self.device = resolve_device(device)
        self.timing = {}                 # on the GPU: kernel_ms, the kernels' time (CUDA events)

    def extend(self, cands, traceback=False):
        from pymap.kernels.affine import affine_align, affine_scores
        args = cands.arrays()[:-1] + (cands.band(self.band),)
        if self.device == "gpu":
            from pymap.kernels.affine_cuda import affine_align_cuda
            out = affine_align_cuda(*args, params=self.params, min_score=cands.min_score, traceback=traceback,
                                    timing=self.timing)
            score, start, nm = out[0], out[1], out[5]
            cigar, offsets = out[6:] if traceback else (None, None)
        elif traceback:
            score, start, _, _, _, nm, cigar, offsets = affine_align(*args, params=self.params,
                                                                     min_score=cands.min_score)
        else:
            score, start, _, _, _, nm = affine_scores(*args, params=self.params, min_score=cands.min_score)
            cigar = offsets = None
        return Alignments(found=start >= 0, score=score, edits=nm, start=start, cigar=cigar,
                          cigar_offsets=offsets)
