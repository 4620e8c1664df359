"""What the compiler knows at a point of the program: the slots of the flat environment
(every variable and buffer gets one), which variables and buffers are in scope, the
enclosing blocks (for messages) and which variables hold one value per band lane."""
from __future__ import annotations

from typing import Any

from engine.ir import expr as E
from engine.ir.buffer import Buffer
from engine.ir.dtype import lanes_of
from engine.ir.function import PrimFunc
from engine.ir.functor import collect_vars

from .errors import InterpretError


class Scope:
    """The compile-time state of one PrimFunc; the compiled closures run on ``env``, a list
    with one entry per slot."""

    def __init__(self, func: PrimFunc, vectorize: bool = True):
        self.func = func
        self.vectorize = vectorize
        self.varying: set[int] = set()       # var ids holding one value per lane (bands)
        self.vslots: list[int] = []          # their slots
        self.slots: dict[int, int] = {}
        self.nslots = 0
        self.scope: dict[int, int] = {}      # var id -> nesting count (vars in scope)
        self.buf_scope: dict[int, int] = {}  # buffer id -> nesting count
        self.blocks: list[str] = []          # enclosing block names (for messages)
        self.lenient = [0]                   # >0 while evaluating masked vector branches
        self.stored: set[int] = set()        # buffers written (params must be writable)
        self.nbands = 0                      # loop nests compiled to numpy operations
        self.in_fallback = 0                 # >0 while compiling a band's serial fallback

    # slots ----------------------------------------------------------------
    def slot(self, obj: Any) -> int:
        s = self.slots.get(id(obj))
        if s is None:
            s = self.slots[id(obj)] = self.nslots
            self.nslots += 1
        return s

    def bind(self, v: E.Var) -> int:
        self.scope[id(v)] = self.scope.get(id(v), 0) + 1
        return self.slot(v)

    def unbind(self, v: E.Var) -> None:
        n = self.scope[id(v)] - 1
        if n:
            self.scope[id(v)] = n
        else:
            del self.scope[id(v)]

    def bind_buffer(self, b: Buffer) -> int:
        self.buf_scope[id(b)] = self.buf_scope.get(id(b), 0) + 1
        return self.slot(b)

    def unbind_buffer(self, b: Buffer) -> None:
        n = self.buf_scope[id(b)] - 1
        if n:
            self.buf_scope[id(b)] = n
        else:
            del self.buf_scope[id(b)]

    def buffer_slot(self, buf: Buffer, what: str) -> int:
        """The slot of ``buf``, which must be in scope where it is ``what`` (read, written)."""
        if id(buf) not in self.buf_scope:
            raise InterpretError(
                f"buffer {buf.name!r} is {what}{self.where()} but is neither a parameter of "
                f"{self.func.name!r} nor allocated around this point (T.alloc_buffer in an "
                "enclosing block, or Allocate)")
        return self.slots[id(buf)]

    def where(self) -> str:
        return f" in block {self.blocks[-1]!r}" if self.blocks else ""

    # lanes ----------------------------------------------------------------
    def _vec(self, *es: E.PrimExpr) -> bool:
        """Does any of ``es`` evaluate to a numpy array (vector lanes or band lanes)?"""
        if any(lanes_of(x.dtype) > 1 for x in es):
            return True
        return bool(self.varying) and any(self._depends(x) for x in es)

    def _depends(self, e: Any) -> bool:
        """Does ``e`` use a variable that holds one value per lane of the current band?"""
        varying = self.varying
        if not varying:
            return False
        return any(id(v) in varying for v in collect_vars(e))
