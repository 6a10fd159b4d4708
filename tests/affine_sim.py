"""Simulated alignment candidates for the affine kernel tests (CPU and CUDA)."""
import numpy as np


def simulate(rng, n, lengths=(20, 35, 50, 70), contig=400, junk=True, nfrac=0.1):
    """Random contigs; reads copied with substitutions, 1-10 bp indels, N, adapter junk at either
    end, some overhanging a contig end; candidate pos near the truth; band w covering the indels
    and the offset plus a random margin. Returns (ref, items, truth)."""
    nc = 4
    ref = rng.integers(0, 4, nc * contig).astype(np.uint8)
    for _ in range(5):
        a = int(rng.integers(0, ref.size - 3))
        ref[a:a + 2] = 4
    items = []
    for _ in range(n):
        c = int(rng.integers(0, nc))
        clo, chi = c * contig, (c + 1) * contig
        L = int(rng.choice(lengths))
        if rng.random() < 0.15:
            p = clo - int(rng.integers(1, 10)) if rng.random() < 0.5 else chi - L + int(rng.integers(1, 10))
        else:
            p = int(rng.integers(clo, chi - L))
        seg = [int(ref[q]) if clo <= q < chi else int(rng.integers(0, 4)) for q in range(p, p + L)]
        for _ in range(int(rng.poisson(0.03 * L))):
            i = int(rng.integers(0, len(seg)))
            seg[i] = (seg[i] + int(rng.integers(1, 4))) % 4
        shift = 0
        for _ in range(int(rng.integers(0, 3))):
            k = int(rng.integers(1, 11))
            i = int(rng.integers(1, len(seg) - 1))
            if rng.random() < 0.5:
                seg[i:i] = [int(x) for x in rng.integers(0, 4, k)]
            else:
                del seg[i:i + k]
            shift += k
        if rng.random() < nfrac and seg:
            seg[int(rng.integers(0, len(seg)))] = 4
        if junk and rng.random() < 0.3:
            seg = [int(x) for x in rng.integers(0, 4, int(rng.integers(1, 15)))] + seg
        if junk and rng.random() < 0.3:
            seg = seg + [int(x) for x in rng.integers(0, 4, int(rng.integers(1, 15)))]
        jit = int(rng.integers(-3, 4))
        w = shift + abs(jit) + int(rng.integers(0, 8))
        items.append((np.array(seg, np.uint8), ref, int(rng.integers(0, 2)), p + jit, clo, chi, w))
    return ref, items
