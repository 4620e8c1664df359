"""``tvm.tirx.IndexMap``: a map from indices to indices, as TVM's, over the engine's
expressions.

Before::

    m = IndexMap.from_func(lambda i, j: (j, i // 4, i % 4))

After: ``m.initial_indices`` are two fresh variables ``i, j``; ``m.final_indices`` the
three expressions; ``m.map_indices([x, y])`` substitutes; ``m(*idx)`` is the same, so an
IndexMap is accepted wherever ``sch.transform_layout`` takes a lambda.
"""
from __future__ import annotations

from typing import Any, Sequence

from engine.ir import expr as E
from engine.ir.functor import substitute
from engine.ir.structural import structural_equal
from engine.schedule.primitives.layout import call_index_map

__all__ = ["IndexMap"]


class IndexMap:
    """``initial_indices`` (variables) -> ``final_indices`` (expressions of them)."""

    def __init__(self, initial_indices: Sequence[E.Var], final_indices: Sequence[Any]):
        self.initial_indices = tuple(initial_indices)
        self.final_indices = tuple(E.const(x, "int32") if isinstance(x, int) else x
                                   for x in final_indices)

    @staticmethod
    def from_func(mapping_function: Any, ndim: int | None = None,
                  index_dtype: str = "int32") -> "IndexMap":
        """The map ``mapping_function`` computes, called on fresh variables (``ndim``
        needed only when it takes ``*args``)."""
        params, exprs = call_index_map(mapping_function, ndim, index_dtype)
        return IndexMap(params, exprs)

    def map_indices(self, indices: Sequence[Any]) -> list:
        """The final indices with ``indices`` in place of the initial ones."""
        if len(indices) != len(self.initial_indices):
            raise ValueError(f"this index map takes {len(self.initial_indices)} indices, "
                             f"got {len(indices)}")
        vmap = {v: E.const(x, v.dtype) if isinstance(x, int) else x
                for v, x in zip(self.initial_indices, indices)}
        return [substitute(x, vmap) for x in self.final_indices]

    def __call__(self, *indices: Any) -> list:
        return self.map_indices(indices)

    def is_equivalent_to(self, other: "IndexMap") -> bool:
        """The same number of indices in and out, and the same expressions once ``other``'s
        variables are renamed to this map's."""
        if len(self.initial_indices) != len(other.initial_indices) or \
                len(self.final_indices) != len(other.final_indices):
            return False
        theirs = other.map_indices(self.initial_indices)
        return all(structural_equal(a, b) for a, b in zip(self.final_indices, theirs))

    def __repr__(self) -> str:
        ins = ", ".join(v.name for v in self.initial_indices)
        return f"IndexMap(lambda {ins}: ({', '.join(map(str, self.final_indices))}))"
