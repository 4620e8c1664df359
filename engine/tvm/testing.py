"""``tvm.testing``: what TVM's tests use of it — ``main()`` (run this file's tests with
pytest), ``parameter(...)`` (a pytest fixture factory, as TVM's: the fixture takes the
name of the module variable it is assigned to) and ``assert_allclose`` (shapes, then values,
with TVM's default tolerances). Imports pytest."""
from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np
import pytest

__all__ = ["main", "parameter", "assert_allclose"]


def main() -> None:
    """Run the calling file's tests (``if __name__ == "__main__": tvm.testing.main()``)."""
    test_file = inspect.getsourcefile(sys._getframe(1))  # noqa: SLF001 - the caller's file
    sys.exit(pytest.main([test_file] + sys.argv[1:]))


def parameter(*values: Any, ids: Any = None, by_dict: dict | None = None) -> Any:
    """A fixture taking each of ``values`` in turn (``by_dict``: ids -> values)."""
    if by_dict is not None:
        if values or ids:
            raise RuntimeError("Use only one of *values/ids or by_dict to define a parameter")
        ids = list(by_dict.keys())
        values = tuple(by_dict.values())

    @pytest.fixture(params=list(values), ids=ids)
    def as_fixture(*_cls: Any, request: Any) -> Any:
        return request.param

    return as_fixture


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` after checking the shapes agree."""
    actual = np.asanyarray(actual)
    desired = np.asanyarray(desired)
    np.testing.assert_allclose(actual.shape, desired.shape)
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)
