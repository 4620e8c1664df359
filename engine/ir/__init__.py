"""engine.ir — the immutable TensorIR-style intermediate representation.

Expressions (:mod:`.expr`), buffers (:mod:`.buffer`), statements and blocks
(:mod:`.stmt`), PrimFunc/IRModule (:mod:`.function`), generic traversal
(:mod:`.functor`) and structural equality/hash (:mod:`.structural`).
Nothing here imports any other engine module: how IR objects print and render (the script
printer, the notebook view) is registered from above through :mod:`.display`.
"""
from .dtype import (DTypeError, bits_of, bytes_of, check_dtype, element_of, is_bool, is_float,
                    is_int, is_uint, lanes_of, split_lanes, with_lanes)
from .expr import (EQ, GE, GT, INTRINSICS, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferField,
                   BufferLoad,
                   Call, Cast, CmpOp, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min,
                   Mod, Mul, Not, Or, PrimExpr, Ramp, Select, StringImm, Sub, Var, as_const_int,
                   binary, const, convert, is_const_int)
from .buffer import Buffer, BufferRegion, Range
from .stmt import (THREAD_TAGS, Allocate, Block, BlockRealize, BufferStore, Evaluate, For, ForKind,
                   IfThenElse, IterType, IterVar, LetStmt, MatchBufferRegion, SeqStmt, Stmt,
                   seq)
from .function import IRModule, PrimFunc
from .functor import (Mutator, collect, collect_vars, post_order_visit, pre_order_visit,
                      substitute, uses_var)
from .structural import structural_equal, structural_hash
from .node import AttrMap, Node
from . import display
