"""The models the explorer knows by name (``mlp``) and models read from ONNX files.

A :class:`Model` builds its Relax module for a batch size (weights bound as constants,
``main`` takes the input only), says the numpy code a user would write for it (the
float32 speed reference), and, when it has labelled test data, its accuracy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from engine.ir.function import IRModule

from . import mlp as _mlp
from .course import mlp_module

__all__ = ["Model", "MODELS", "get", "from_onnx_bytes", "onnx_graph", "model_from_graph",
           "test_input"]

MODELS = ("mlp",)


@dataclass
class Model:
    name: str
    title: str
    description: str
    build: Callable[[int], IRModule]               # batch -> module (weights bound)
    input_shape: Callable[[int], tuple]            # batch -> shape of main's input
    numpy_fn: Callable[[np.ndarray], np.ndarray] | None = None
    test_images: np.ndarray | None = None          # (n, 28, 28) for the page's pictures
    test_labels: np.ndarray | None = None
    trained_accuracy: float | None = None          # numpy float32 forward on the test set
    batch_fixed: int | None = None                 # ONNX models: their own batch size
    extra: Any = None
    reference: np.ndarray | None = None            # output on test_inputs, computed elsewhere

    def test_inputs(self, batch: int) -> np.ndarray:
        """The first ``batch`` test images as ``main``'s input (random data without any)."""
        shape = self.input_shape(batch)
        if self.test_images is None:
            return test_input(shape)
        return np.ascontiguousarray(self.test_images[:batch].reshape(shape), dtype="float32")


def _mlp_model(cache_dir: str | None) -> Model:
    trained = _mlp.trained_mlp(cache_dir)
    params = trained.params
    data = trained.data
    return Model(
        name="mlp", title="the course's MLP (784-128-10) on handwritten digits",
        description=("Two linear layers with a ReLU between them, as in the course's chapter "
                     "on end-to-end models, trained in numpy on scikit-learn's bundled "
                     "handwritten digits scaled to 28x28"
                     + (" (weights loaded from the cache)" if trained.from_cache else "")),
        build=lambda batch: mlp_module(batch, params),
        input_shape=lambda batch: (batch, 784),
        numpy_fn=lambda x: _mlp.forward(params, x),
        test_images=data.test_images, test_labels=data.test_labels,
        trained_accuracy=trained.test_accuracy, extra=params)


def get(name: str, cache_dir: str | None = None) -> Model:
    """The model called ``name`` (see :data:`MODELS`)."""
    if name == "mlp":
        return _mlp_model(cache_dir)
    raise KeyError(f"no model named {name!r}; models: {', '.join(MODELS)} (or an .onnx file)")


def test_input(shape: tuple) -> np.ndarray:
    """The input a model without test data is run on (its reference output's input):
    standard normal values from a fixed seed, float32."""
    return np.random.default_rng(0).standard_normal(tuple(shape)).astype("float32")


def onnx_graph(data: bytes, limits: Any = None):
    """The graph of an ONNX file as the model page runs it, read once (its counts bounded
    by ``limits`` before anything is allocated); an
    :class:`~engine.relax.frontend.ImportError_` sentence for anything the model page
    cannot run (it runs models of one input and one output)."""
    from engine.relax.frontend import ImportError_
    from engine.relax.frontend.onnx_reader import read_onnx

    graph = read_onnx(data, None, limits)
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise ImportError_(f"the model has {len(graph.inputs)} input"
                           f"{'s' * (len(graph.inputs) != 1)} and {len(graph.outputs)} "
                           f"output{'s' * (len(graph.outputs) != 1)}; the model page runs "
                           "models of one input and one output")
    return graph


def model_from_graph(graph, title: str = "ONNX model",
                     reference: np.ndarray | None = None) -> Model:
    """The :class:`Model` of a read graph of one input and one output. ``reference``: its
    output on :func:`test_input`, when already computed (by a worker): then the model has
    no numpy function and runs nothing here."""
    from engine.relax.frontend.graph import evaluate
    from engine.relax.frontend.onnx import graph_to_relax

    mod = graph_to_relax(graph)
    (in_name, (shape, _)), = graph.inputs.items()

    def build(batch: int) -> IRModule:
        return mod

    def numpy_fn(x: np.ndarray) -> np.ndarray:
        return evaluate(graph, {in_name: x})[0]

    return Model(name="onnx", title=title,
                 description=f"{len(graph.calls)} operators read from an ONNX file",
                 build=build, input_shape=lambda batch: shape,
                 numpy_fn=numpy_fn if reference is None else None,
                 batch_fixed=shape[0] if shape else 1, extra=graph, reference=reference)


def from_onnx_bytes(data: bytes, title: str = "ONNX model", limits: Any = None) -> Model:
    """A model read from the bytes of an ONNX file (its batch is the file's), read once;
    an :class:`~engine.relax.frontend.ImportError_` sentence for anything the model page
    cannot run (it runs models of one input and one output)."""
    return model_from_graph(onnx_graph(data, limits), title)
