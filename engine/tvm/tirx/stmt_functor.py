"""``tvm.tirx.stmt_functor``: the engine's tree walkers (``fn(node)`` on every node; in
``pre_order_visit`` a False return skips the node's children, as TVM) and ``substitute``."""
from engine.ir.functor import post_order_visit, pre_order_visit, substitute

__all__ = ["post_order_visit", "pre_order_visit", "substitute"]
