"""Reference interpreter: runs any PrimFunc on numpy arrays (the engine's semantics).

``engine.interpret(mod, "mm_relu", a, b, c)`` fills the output arrays in place, like a
built function.  Everything the LLVM backend and the schedule primitives do is checked
against this interpreter, so it defines what each IR node means:

* ``For`` of every kind runs its body for ``min <= v < min + extent`` in order (parallel,
  vectorized and unrolled loops mean the same as serial ones).
* ``BlockRealize`` evaluates the bindings, skips the block when the predicate is false,
  checks every binding lies in its iter var's domain, allocates the block's
  ``alloc_buffers``, runs ``init`` when every reduce-axis binding equals its domain's min
  (as TVM's lowering does), then the body.
* Fresh buffers (``alloc_buffers``, ``Allocate``) are *not* zeroed — float buffers are
  filled with NaN and bool ones with True — so a schedule that reads uninitialised data
  shows up in the result; scalar integer buffers are the exception: they are zero-filled
  (as the generated code fills them), which bounds what an index read from one can be.
* Integer ``Div``/``Mod`` truncate toward zero (C); ``FloorDiv``/``FloorMod`` round toward
  minus infinity; integer results wrap around like C's fixed-width integers; ``Cast``
  truncates floats toward zero and wraps integers.  float32 arithmetic rounds like float32.
* ``Ramp``/``Broadcast`` values are numpy arrays of lanes; loads/stores with vector indices
  gather/scatter.  ``if_then_else`` evaluates only the chosen value, ``Select`` both.
* Any access outside a buffer raises :class:`OutOfBoundsError` naming the buffer, the
  index and the block (never a silent wrap-around).

The IR is compiled once into nested Python closures (cached per PrimFunc).  Innermost
perfect loop nests ("bands") whose body is a single store run as numpy operations over all
their iterations at once when that cannot change the result: either every iteration writes
a different element and reads the stored buffer only at that element (checked again at run
time; otherwise the band runs serially), or the band is a +/max/min reduction into one
element, combined in the serial order (``np.add.accumulate``), so float32 rounding is the
same bit for bit.  ``interpret(..., vectorize=False)`` turns this off.  mm_relu at n=128
runs in about half a second, the default conv2d in about one.

Modules: :mod:`.api` (the entry points), :mod:`.errors`, :mod:`.values` (dtypes, casts,
wrap-around), :mod:`.ops` (what each operator computes), :mod:`.scope` (slots and what is
in scope); the closure compiler :mod:`.exprs`, :mod:`.access` (loads, stores) and
:mod:`.stmts`; the numpy band evaluator :mod:`.band_plan` (which nests), :mod:`.band_compile`
and :mod:`.band_run`.
"""
from .api import CompiledFunc, compile_func, interpret
from .errors import ArgumentError, InterpretError, OutOfBoundsError

__all__ = ["interpret", "compile_func", "CompiledFunc", "InterpretError", "ArgumentError",
           "OutOfBoundsError"]
