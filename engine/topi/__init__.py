"""engine.topi — tensor operators written with :mod:`engine.te` (TVM's ``tvm.topi``).

Each operator takes te tensors and returns the te tensor of its result, so operators
compose into one PrimFunc (``te.create_prim_func([x, w, b, out])``).  They are what
``engine.relax.transform.LegalizeOps`` turns high-level Relax operators into:

========================  =====================================  ======================
Relax operator            topi                                   blocks (TVM's names)
========================  =====================================  ======================
``R.add`` (and the rest)  :func:`add`, :func:`subtract`, ...    ``T_add``, ``T_subtract``, ...
``R.matmul``              :func:`matmul` (numpy's matmul)        ``T_matmul``
``R.nn.relu``             :func:`relu`                           ``compute``
``R.nn.conv2d``           :func:`conv2d_nchw`                    ``pad_temp``, ``conv2d_nchw``
``R.nn.softmax``          :func:`softmax`                        ``T_softmax_maxelem``, ``_exp``, ``_expsum``, ``_norm``
``R.permute_dims``        :func:`permute_dims`                   ``T_transpose``
``R.reshape``             :func:`reshape`                        ``T_reshape``
``R.argmax``/``argmin``   :func:`argmax`, :func:`argmin`         ``<data>_red_temp``, ``<data>_red``
the course's ``linear``   :func:`linear` (``X @ W.T + B``)       ``Y``, ``Z``
========================  =====================================  ======================

Shapes are checked here with messages that say what did not fit (:class:`TopiError`).
"""
from __future__ import annotations

from .broadcast import TopiError, add, binary, broadcast_shape, divide, multiply, subtract
from .linalg import linear, matmul, matmul_shape
from .nn import conv2d_nchw, conv2d_shape, dense, relu, softmax
from .reduction import argmax, argmin
from .transform import permute_dims, reshape, reshape_shape, transpose

__all__ = ["TopiError", "add", "subtract", "multiply", "divide", "binary", "broadcast_shape", "matmul", "matmul_shape", "linear", "relu", "dense",
           "conv2d_nchw", "conv2d_shape", "softmax", "permute_dims", "reshape",
           "reshape_shape", "argmax", "argmin", "transpose"]
