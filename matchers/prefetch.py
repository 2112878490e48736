"""``prefetch(arr, i)``: a cache hint for numba kernels (``llvm.prefetch``).

A kernel whose next memory accesses are known ahead of time (the blocks of the next
event's pivots, say) issues hints for them while it works on the current data, so the
misses overlap instead of each waiting for the last.  A hint never faults and changes no
result: it is only a hint, and a wrong address costs a wasted cache line.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# LLVM names the intrinsic after its pointer type: opaque pointers from LLVM 15 on.
_NAME = "llvm.prefetch.p0" if llvm.llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint that ``arr[idx]`` (a 1-d array, any index, no bounds check) will be read soon."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            _NAME)
        # read, keep in all cache levels, data cache
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, idx), codegen
