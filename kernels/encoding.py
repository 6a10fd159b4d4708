"""Base encodings shared by every stage.

Mapping code: A=0, C=1, G=2, T=3 (upper or lower case), anything else 4 ("N").
Pair files and filters work on ASCII bytes; the mapper works on codes.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

N_CODE = 4

#: ASCII byte -> mapping code (A/a=0, C/c=1, G/g=2, T/t=3, everything else 4)
ASCII_TO_CODE = np.full(256, N_CODE, dtype=np.uint8)
for _i, _b in enumerate(b"ACGT"):
    ASCII_TO_CODE[_b] = _i
    ASCII_TO_CODE[_b + 32] = _i

#: mapping code -> upper-case ASCII byte
CODE_TO_ASCII = np.frombuffer(b"ACGTN", dtype=np.uint8).copy()

#: complement of a mapping code (N stays N)
COMPLEMENT_CODE = np.array([3, 2, 1, 0, 4], dtype=np.uint8)


@njit(cache=True, nogil=True, inline="always")
def code_of(b):
    """ASCII_TO_CODE[b] for a byte b, computed rather than looked up: a loop over bytes that uses it
    vectorises, one with a table lookup per byte does not."""
    u = b & np.uint8(0xDF)                          # a c g t -> A C G T
    x = (u >> np.uint8(1)) & np.uint8(3)            # A 0, C 1, T 2, G 3
    c = x ^ (x >> np.uint8(1))                      # A 0, C 1, G 2, T 3
    return np.uint8(c) if (u == 65) | (u == 67) | (u == 71) | (u == 84) else np.uint8(N_CODE)


@njit(cache=True, nogil=True, inline="always")
def ascii_of(c):
    """CODE_TO_ASCII[c] for a mapping code c, by compares: a loop over codes that uses it vectorises."""
    return (np.uint8(65) if c == 0 else np.uint8(67) if c == 1 else np.uint8(71) if c == 2
            else np.uint8(84) if c == 3 else np.uint8(78))


_THREES = np.uint64(0x0303030303030303)
_ONES = np.uint64(0x0101010101010101)
#: bit 2 of each byte of a word of mapping codes (word_at): set where the code is N (N_CODE)
N_BITS = np.uint64(0x0404040404040404)


def _contiguous_bytes(arr):
    return isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1 and arr.layout == "C"


def _byte_pointer(context, builder, sig, args):
    """A pointer to byte args[1] of the uint8 array args[0]."""
    data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
    return builder.gep(data, [context.cast(builder, args[1], sig.args[1], types.intp)])


def _word_pointer(context, builder, sig, args):
    """A uint64 pointer to the bytes of array args[0] at index args[1] (any alignment)."""
    return builder.bitcast(_byte_pointer(context, builder, sig, args), ir.IntType(64).as_pointer())


@intrinsic
def prefetch(typingctx, arr, i):
    """A hint to the CPU that arr[i] (a uint8 array) will be read soon: its cache line is fetched
    meanwhile (llvm.prefetch; no fault whatever i is)."""
    if not _contiguous_bytes(arr) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(
            ir.VoidType(), [ir.IntType(8).as_pointer(), i32, i32, i32]))
        # read (0), keep in every cache level (3), data (1)
        builder.call(fn, [_byte_pointer(context, builder, sig, args), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.none(arr, i), codegen


@intrinsic
def word_at(typingctx, arr, i):
    """The 8 bytes of a uint8 array at i (any alignment) as a uint64 whose lowest byte is arr[i]: one
    load on a little-endian CPU (every one Numba supports). The caller keeps i + 8 within the array."""
    if not _contiguous_bytes(arr) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.load(_word_pointer(context, builder, sig, args), align=1)
    return types.uint64(arr, i), codegen


@intrinsic
def _word_reversed(typingctx, arr, i):
    """word_at with its bytes in reverse order (lowest arr[i + 7]): one load and one byte swap."""
    if not _contiguous_bytes(arr) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bswap(builder.load(_word_pointer(context, builder, sig, args), align=1))
    return types.uint64(arr, i), codegen


@intrinsic
def _put_word(typingctx, arr, i, w):
    """arr[i:i + 8] = the 8 bytes of uint64 w, lowest first (one store, any alignment)."""
    if not _contiguous_bytes(arr) or not isinstance(i, types.Integer) or not isinstance(w, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        builder.store(context.cast(builder, args[2], sig.args[2], types.uint64),
                      _word_pointer(context, builder, sig, args), align=1)
        return context.get_dummy_value()
    return types.none(arr, i, w), codegen


@njit(cache=True, nogil=True, inline="always")
def reverse_into(src, dst, complement):
    """dst[:n] = the n uint8 of src in reverse order; with complement, src holds mapping codes and
    each is complemented too (N stays N). Eight bytes at a time: one load with a byte swap, the
    complement of the word (c ^ 3, less 3 where c is N), one store. Assembling the word a byte at a
    time took 5x as long (0.81 -> 0.15 ns a base, 150-base reads, development machine, thirty-
    seventh session); a loop over bytes, which LLVM does not vectorise in reverse, longer still."""
    n = src.shape[0]
    words = n // 8
    for k in range(words):
        w = _word_reversed(src, n - 8 * (k + 1))
        if complement:
            w = (w ^ _THREES) - np.uint64(3) * ((w >> np.uint64(2)) & _ONES)
        _put_word(dst, 8 * k, w)
    for j in range(8 * words, n):
        c = src[n - 1 - j]
        if complement:
            c = 3 - c if c < 4 else 4
        dst[j] = c


@njit(cache=True, nogil=True)
def encode_ascii(ascii_bytes):
    """ASCII bytes -> mapping codes (new uint8 array)."""
    out = np.empty(ascii_bytes.shape[0], np.uint8)
    for i in range(ascii_bytes.shape[0]):
        out[i] = code_of(ascii_bytes[i])
    return out


@njit(cache=True, nogil=True)
def load_pair(reads, refs, i, rd, rf, compare):
    """Row i of an ASCII pair (reads, refs: (n, L) uint8) into rd, rf for a filter kernel. compare:
    the bytes as they are (an N compares like a base, as the authors' programs do); otherwise
    mapping codes, and True is returned when either side holds an N (the pair is undefined)."""
    L = rd.shape[0]
    undefined = False
    if compare:
        for p in range(L):
            rd[p] = reads[i, p]
            rf[p] = refs[i, p]
        return undefined
    table = ASCII_TO_CODE
    for p in range(L):
        a = table[reads[i, p]]
        b = table[refs[i, p]]
        rd[p] = a
        rf[p] = b
        if a == N_CODE or b == N_CODE:
            undefined = True
    return undefined


def reverse_complement_batch(codes, offsets):
    """Reverse-complement every sequence of a concatenated batch (same offsets); threads over
    ranges of sequences."""
    from pymap.kernels.threads import range_bounds, run_ranges
    codes = np.ascontiguousarray(codes, np.uint8)
    offsets = np.ascontiguousarray(offsets, np.int64)
    out = np.empty_like(codes)
    run_ranges(_reverse_complement_ranges, range_bounds(offsets.shape[0] - 1, 4096), codes, offsets, out)
    return out


@njit(cache=True, nogil=True)
def _reverse_complement_ranges(r0, r1, codes, offsets, out):
    for r in range(r0, r1):
        reverse_into(codes[offsets[r]:offsets[r + 1]], out[offsets[r]:offsets[r + 1]], True)


def count_code(codes, offsets, code):
    """Per read (codes[offsets[i]:offsets[i+1]]), how many bases have mapping code `code`; threads
    over ranges of reads."""
    from pymap.kernels.threads import range_bounds, run_ranges
    offsets = np.ascontiguousarray(offsets, np.int64)
    out = np.zeros(offsets.shape[0] - 1, np.int64)
    run_ranges(_count_code_ranges, range_bounds(out.shape[0], 4096), np.ascontiguousarray(codes, np.uint8),
               offsets, np.uint8(code), out)
    return out


@njit(cache=True, nogil=True)
def _count_code_ranges(r0, r1, codes, offsets, code, out):
    for r in range(r0, r1):
        c = 0
        for x in codes[offsets[r]:offsets[r + 1]]:     # over a slice: vectorised (kernels/fastq.py)
            c += x == code
        out[r] = c
