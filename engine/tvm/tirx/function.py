"""``tvm.tirx.function``: ``PrimFunc`` and ``TensorIntrin`` (``register(name, desc, impl)``,
``get(name)``: the engine's registry of tensor intrinsics)."""
from engine.ir.function import PrimFunc
from engine.schedule.tensor_intrin import TensorIntrin

__all__ = ["PrimFunc", "TensorIntrin"]
