"""Arrays without their reference count, for a kernel's hot loops.

Numba counts references to an array's memory with atomic operations. Where a kernel passes an array
to a helper or slices it inside a loop, some of those counts survive its reference-count pruning: an
atomic increment and decrement for every call or slice. Threads that count one array's references at
once contend for it: a GPU pair worker on an H100 spent a tenth of its samples there (BENCHMARKS.md,
thirty-seventh session). `borrowed` gives views with no memory record, whose counts, and those of
every slice of them and every helper they are passed to, do nothing. It is for kernels that allocate
(their outputs, scratch): one that allocates nothing is compiled with `_nrt=False` instead, which
counts nothing at all (kernels/sam.py, the range kernels of select, pairing and text).
"""
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def borrowed(typingctx, arrays):
    """The data, shapes and strides of an array, or of each array of a tuple (a tuple back; its other
    items as they are), without their memory records (nor parent objects). Only for arrays that
    outlive the kernel's call (its arguments), never for one it returns or keeps."""
    many = isinstance(arrays, types.BaseTuple)
    plain = (types.Array, types.Number, types.Boolean, types.NoneType)    # no other counted values pass
    if not (isinstance(arrays, types.Array) or many and all(isinstance(t, plain) for t in arrays)):
        return None

    def codegen(context, builder, sig, args):
        each = tuple(arrays) if many else (arrays,)
        values = cgutils.unpack_tuple(builder, args[0]) if many else args
        out = []
        for typ, value in zip(each, values):
            if isinstance(typ, types.Array):
                view = context.make_array(typ)(context, builder, value=value)
                view.meminfo = cgutils.get_null_value(view.meminfo.type)
                view.parent = cgutils.get_null_value(view.parent.type)
                value = view._getvalue()
            out.append(value)
        return context.make_tuple(builder, arrays, out) if many else out[0]
    return arrays(arrays), codegen
