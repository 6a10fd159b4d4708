"""BDZ perfect hashing of 32-bit keys (Botelho, Pagh, Ziviani): the Jenkins lookup2 hash family,
3-hypergraph peeling, the g assignment and its 2-bit packing.

A key set of n keys gets a hypergraph on m = 3 r vertices (three parts of r vertices): key x is the
edge (v0, v1, v2) = (h_x % r, r + h_y % r, 2 r + h_z % r), where (h_x, h_y, h_z) = Jenkins lookup2 of
the 4-byte key with initval J. J is tried from a deterministic sequence until the hypergraph peels
(r grows by one after max_tries failures). g in {0, 1, 2}^m then gives every key the vertex
phf(x) = v_j with j = (g[v0] + g[v1] + g[v2]) mod 3, distinct for distinct keys.
"""
import math

import numpy as np
from numba import njit

M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9


# ----------------------------------------------------------------------------------------- hashing
# jenkins_mix, jenkins_hash3 and edge_vertices are inlined at IR level (inline="always"): LLVM does not
# inline edge_vertices (its three modulos with zero checks make it too big), and one-at-a-time lookups
# measured 20-30 % slower with the call; their re-typing at the few call sites costs no measurable
# compile time.

@njit(cache=True, nogil=True, inline="always")
def jenkins_mix(a, b, c):
    """Bob Jenkins' lookup2 mix(a, b, c) on 32-bit values held in int64 (paper Figure 6)."""
    a = (a - b - c) & M32
    a ^= c >> 13
    b = (b - c - a) & M32
    b ^= (a << 8) & M32
    c = (c - a - b) & M32
    c ^= b >> 13
    a = (a - b - c) & M32
    a ^= c >> 12
    b = (b - c - a) & M32
    b ^= (a << 16) & M32
    c = (c - a - b) & M32
    c ^= b >> 5
    a = (a - b - c) & M32
    a ^= c >> 3
    b = (b - c - a) & M32
    b ^= (a << 10) & M32
    c = (c - a - b) & M32
    c ^= b >> 15
    return a, b, c


@njit(cache=True, nogil=True, inline="always")
def jenkins_hash3(key, seed):
    """lookup2 hash of a 4-byte little-endian key with initval `seed`; returns all three words
    (BDZ uses them as the three hash functions h_x, h_y, h_z of the family indexed by J = seed)."""
    a = GOLDEN + (np.int64(key) & M32)
    b = np.int64(GOLDEN)
    c = (np.int64(seed) + 4) & M32
    return jenkins_mix(a & M32, b, c)


@njit(cache=True, nogil=True)
def jenkins_seed(block, attempt):
    """The deterministic sequence of Jenkins seeds J tried for one block."""
    a, b, c = jenkins_mix(np.int64(GOLDEN), (np.int64(block) * 2654435761) & M32,
                          (np.int64(attempt) * 0x85EBCA77 + 0x165667B1) & M32)
    return c


@njit(cache=True, nogil=True, inline="always")
def edge_vertices(key, seed, r):
    """The hyperedge of `key`: one vertex in each part of r vertices (callers pass int64 values)."""
    a, b, c = jenkins_hash3(key, seed)
    return a % r, r + b % r, 2 * r + c % r


@njit(cache=True, nogil=True)
def g_get(g, v):
    """g[v] of a packed g (2 bits per vertex, see pack_g)."""
    return (np.int64(g[v >> 2]) >> ((v & 3) * 2)) & 3


def part_size(n, ratio=1.23, extra=1):
    """Vertices per part r for n keys: 3 r >= ceil(ratio n) + extra (used by tests and docs)."""
    return max(1, (math.ceil(ratio * n) + extra + 2) // 3)


@njit(cache=True, nogil=True)
def _part_size(n, ratio, extra):
    r = (np.int64(math.ceil(ratio * n)) + extra + 2) // 3
    return max(np.int64(1), r)


# -------------------------------------------------------------------------- hypergraph peeling

@njit(cache=True, nogil=True)
def hyperedges(keys, n, r, seed, ev):
    """ev[e] = the three vertices of keys[e], e < n."""
    for e in range(n):
        v0, v1, v2 = edge_vertices(keys[e], seed, r)
        ev[e, 0] = v0
        ev[e, 1] = v1
        ev[e, 2] = v2


@njit(cache=True, nogil=True)
def peel(ev, n, m, deg, xr, stack, order_e, order_v):
    """Peel the 3-hypergraph with edges ev[:n] on m vertices (XOR trick, no adjacency lists).
    Returns how many edges were peeled (== n iff the hypergraph is acyclic); order_e/order_v
    hold the edges in peeling order and the degree-1 vertex each was peeled from."""
    for v in range(m):
        deg[v] = 0
        xr[v] = 0
    for e in range(n):
        for q in range(3):
            v = ev[e, q]
            deg[v] += 1
            xr[v] ^= e
    top = 0
    for v in range(m):
        if deg[v] == 1:
            stack[top] = v
            top += 1
    k = 0
    while top > 0:
        top -= 1
        v = stack[top]
        if deg[v] != 1:
            continue
        e = xr[v]
        order_e[k] = e
        order_v[k] = v
        k += 1
        for q in range(3):
            u = ev[e, q]
            deg[u] -= 1
            xr[u] ^= e
            if deg[u] == 1:
                stack[top] = u
                top += 1
    return k


@njit(cache=True, nogil=True)
def assign(ev, n, order_e, order_v, gt):
    """BDZ assignment in reverse peeling order: g[v] = (j - g[others]) mod 3 for the peeled vertex
    v = the edge's j-th vertex, so that (g[v0] + g[v1] + g[v2]) mod 3 == j. gt must start at 0."""
    for i in range(n - 1, -1, -1):
        e = order_e[i]
        v = order_v[i]
        j = 0 if ev[e, 0] == v else (1 if ev[e, 1] == v else 2)
        s = np.int64(gt[ev[e, 0]]) + gt[ev[e, 1]] + gt[ev[e, 2]] - gt[v]
        gt[v] = (j - s) % 3


@njit(cache=True, nogil=True)
def build_phf(keys, n, block, ratio, extra, max_tries):
    """Find (J, r) such that the hypergraph of keys[:n] (distinct) peels; returns J, r, g (uint8[3r],
    unpacked) and slot (int64[n], the vertex of each key). Deterministic in (keys, block).
    (Callers pass n and block as int64: a literal 0 would compile a second specialization.)"""
    r = _part_size(n, ratio, extra)
    attempt = np.int64(0)
    ev = np.empty((max(n, 1), 3), np.int64)
    while True:
        m = 3 * r
        deg = np.empty(m, np.int64)
        xr = np.empty(m, np.int64)
        stack = np.empty(m, np.int64)
        oe = np.empty(max(n, 1), np.int64)
        ov = np.empty(max(n, 1), np.int64)
        for t in range(max_tries):
            seed = jenkins_seed(block, attempt)
            attempt += 1
            hyperedges(keys, n, r, seed, ev)
            if peel(ev, n, m, deg, xr, stack, oe, ov) == n:
                gt = np.zeros(m, np.uint8)
                assign(ev, n, oe, ov, gt)
                slot = np.empty(n, np.int64)
                for e in range(n):
                    j = (np.int64(gt[ev[e, 0]]) + gt[ev[e, 1]] + gt[ev[e, 2]]) % 3
                    slot[e] = ev[e, j]
                return seed, r, gt, slot
        r += 1


@njit(cache=True, nogil=True)
def phf_eval(keys, seed, r, g_unpacked):
    """phf of each key for an unpacked g (tests)."""
    out = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        v0, v1, v2 = edge_vertices(keys[i], seed, r)
        j = (np.int64(g_unpacked[v0]) + g_unpacked[v1] + g_unpacked[v2]) % 3
        out[i] = v0 if j == 0 else (v1 if j == 1 else v2)
    return out


def pack_g(gt):
    """uint8[ceil(V/4)]: g values (0..2, one per vertex) at 2 bits each, vertex v in bits 2(v&3)..
    of byte v>>2. NumPy, one strided pass per bit pair (no kernel to compile)."""
    out = np.zeros((gt.shape[0] + 3) // 4, np.uint8)
    for q in range(4):
        part = gt[q::4]
        out[:part.shape[0]] |= part << np.uint8(2 * q)
    return out
