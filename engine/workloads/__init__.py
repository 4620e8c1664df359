"""engine.workloads — the preset tensor programs of the explorer.

::

    import engine
    engine.workloads.names()                       # ['mm_relu', 'matmul', ...]
    mod = engine.workloads.get("mm_relu", n=128)   # IRModule with the PrimFunc "mm_relu"
    ref = engine.workloads.reference("mm_relu", n=128)      # correctness (float64 inside)
    fast = engine.workloads.numpy_style("mm_relu", n=128)  # speed reference (float32 numpy)
    a, b, c = engine.workloads.random_args("mm_relu", n=128)
    engine.interpret(mod, "mm_relu", a, b, c)
    np.testing.assert_allclose(c, ref(a, b), rtol=1e-4)
    engine.workloads.info("mm_relu").flops(n=128)  # 2 * 128**3 + 128**2

Parameters are validated (:class:`WorkloadError` says the allowed range); defaults are
in ``info(name).defaults``.  Every program is built with :mod:`engine.te` except the
window sum, which is written with :mod:`engine.ir` to match the course text exactly.
"""
from .registry import (Spec, WorkloadError, WorkloadInfo, get, info, names, random_args,
                       reference, register, resolve_params)
from . import library as _library  # noqa: F401  (registers the workloads)
from .numpy_style import numpy_style

__all__ = ["names", "get", "reference", "numpy_style", "info", "random_args", "WorkloadError",
           "WorkloadInfo", "resolve_params", "Spec", "register"]
