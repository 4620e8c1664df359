"""TVMScript text with Relax functions -> IRModule (``engine.parse``).

Accepted (the course's 2022 spellings and TVM 0.27's):

* ``@R.function`` functions, in a ``@tvm.script.ir_module`` / ``@I.ir_module`` class beside
  ``@T.prim_func`` functions, or alone;
* parameters ``x: Tensor((1, 784), "float32")`` / ``x: R.Tensor((1, 784), dtype="float32")``,
  an optional return type (``-> Tensor(None, "float32", ndim = 2)`` too);
* ``with R.dataflow():`` blocks ending with ``R.output(...)``; bindings ``lv = ...`` (with an
  optional annotation ``lv: R.Tensor(...) = ...``) and ``return``;
* ``R.call_tir(linear0 | cls.linear0 | "env.linear", (args...), (1, 128), dtype="float32")``
  or ``..., out_sinfo=R.Tensor((1, 128), dtype="float32")``; ``R.call_dps_packed``;
  ``R.alloc_tensor((1, 128), dtype="float32")``; ``R.const(1.0, "float32")``;
  ``meta[relay.Constant][i]`` / ``metadata["relax.expr.Constant"][i]`` (given the
  constants); tuples and ``t[i]``; the operators of :mod:`engine.relax.op`; calls of the
  module's other Relax functions.

The TensorIR functions are read by :mod:`engine.script`'s parser, which calls this one back
for the Relax functions: one pass, one error style (``ScriptError`` with line and column).
"""
from .function import RelaxParser, parse

__all__ = ["parse", "RelaxParser"]
