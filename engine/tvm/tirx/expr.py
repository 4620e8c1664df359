"""``tvm.tirx.expr``: the engine's expression classes under TVM's names (constructors keep
the engine's field order: ``IntImm(dtype, value)`` as TVM, ``Var(name, dtype)``)."""
from engine.ir.expr import (EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, BufferLoad, Call,
                            Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mod,
                            Mul, Not, Or, PrimExpr, Ramp, Select, StringImm, Sub, Var)

#: TVM 0.27 calls the expression base class ``tirx.Expr`` too
Expr = PrimExpr

__all__ = ["PrimExpr", "Expr", "Var", "IntImm", "FloatImm", "StringImm", "Cast", "Add", "Sub",
           "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE",
           "GT", "GE", "And", "Or", "Not", "Select", "Call", "BufferLoad", "Ramp",
           "Broadcast", "Let"]
