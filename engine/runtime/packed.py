"""Functions registered by name, as ``tvm.register_func`` (what ``R.call_tir("env.linear",
...)`` and ``R.call_dps_packed`` call)::

    @engine.register_func("env.linear", override=True)
    def numpy_linear(x, w, b, out):          # destination passing: write into `out`
        np.matmul(x, w.T, out=out)
        out += b

    engine.register_func("env.relu", lambda x, out: np.maximum(x, 0, out=out))
    engine.get_global_func("env.linear")     # the function (allow_missing=True: None)

The arrays a registered function receives are :class:`engine.nd.NDArray` s (numpy arrays
with ``.numpy()``; DLPack works on them).
"""
from __future__ import annotations

import difflib
import threading
from typing import Any, Callable

__all__ = ["register_func", "get_global_func", "list_global_func_names", "remove_global_func",
           "UnregisteredFunctionError"]

_REGISTRY: dict[str, Callable] = {}
_LOCK = threading.Lock()


class UnregisteredFunctionError(LookupError):
    """A name that no function is registered under."""


def register_func(name: Any, f: Callable | None = None, override: bool = False) -> Any:
    """Register ``f`` under ``name``; without ``f``, a decorator (``tvm.register_func``).

    Registering a taken name raises ValueError unless ``override=True``.
    """
    if callable(name) and f is None:  # @register_func on a function: its own name
        return register_func(name.__name__, name, override)
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_func needs a name such as \"env.linear\", got {name!r}")

    def register(func: Callable) -> Callable:
        if not callable(func):
            raise TypeError(f"register_func({name!r}) needs a function, got "
                            f"{type(func).__name__}")
        with _LOCK:
            if name in _REGISTRY and not override:
                raise ValueError(f"a function is already registered as {name!r}; pass "
                                 "override=True to replace it")
            _REGISTRY[name] = func
        return func

    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name`` (``tvm.get_global_func``)."""
    with _LOCK:
        f = _REGISTRY.get(name)
        known = sorted(_REGISTRY)
    if f is None and not allow_missing:
        raise UnregisteredFunctionError(missing_message(name, known))
    return f


def missing_message(name: str, known: list | None = None) -> str:
    """The sentence for a call of an unregistered ``name``."""
    if known is None:
        with _LOCK:
            known = sorted(_REGISTRY)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"no function is registered as {name!r}{hint}; register one before running: "
            f"@engine.register_func({name!r}) def f(*inputs, out): ...")


def list_global_func_names() -> list[str]:
    with _LOCK:
        return sorted(_REGISTRY)


def remove_global_func(name: str) -> None:
    with _LOCK:
        _REGISTRY.pop(name, None)
