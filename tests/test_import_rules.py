"""The import rules of docs/ARCHITECTURE.md, checked on the code's own import statements.

Every ``import`` counts, also one inside a function: a lazy import is still a dependency.
The rules:

* no import cycles anywhere in ``engine`` or ``app`` (between modules: a submodule that
  imports its own package's ``__init__`` while the package imports it is a cycle too);
* ``engine``'s packages import only packages of *lower* layers (:data:`ENGINE_LAYERS`), and
  never ``app``, Flask, plotly or the other web libraries;
* in ``app``: the measurement service never imports the web layer, teaching or Flask; the
  worker side of the service (what runs in the worker processes) is reached from the server
  side only through the worker process's entry point; the web layer and teaching use the
  service's interface only (never the worker side, the pool or its internals); the web layer
  never imports teaching; the store, limits and errors import nothing of the app.
"""
from __future__ import annotations

import ast
import os
from collections import defaultdict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: engine's packages from the bottom up; a package may import packages of lower layers only
ENGINE_LAYERS = [
    {"engine.ir", "engine.nd"},
    {"engine.arith", "engine.script", "engine.te"},
    {"engine.interpreter", "engine.lower", "engine.topi"},
    {"engine.workloads", "engine.codegen"},
    {"engine.runtime"},
    {"engine.gpu", "engine.wasm"},
    {"engine.schedule"},
    {"engine.cache", "engine.presets", "engine.notebook", "engine.relax"},
    {"engine.roofline", "engine.lessons", "engine.models", "engine.tune", "engine.deploy"},
    {"engine.challenges", "engine.gpu_check"},
    {"engine.cli"},
    {"engine.__main__", "engine", "engine.tvm"},
]
WEB_LIBRARIES = {"flask", "htmx_flask", "werkzeug", "jinja2", "markupsafe", "plotly", "waitress"}

SERVICE_WORKER_SIDE = {"app.service.worker", "app.service.actions", "app.service.timing"}
#: what the web layer and teaching may use of the service: its interface and its data
SERVICE_INTERFACE = {"app.service", "app.service.measurer", "app.service.protocol",
                     "app.service.tickets"}
#: the one way from the server side to the worker side: the worker process's entry point
WORKER_ENTRY = ("app.service.supervisor", "app.service.worker")


def _modules() -> dict[str, str]:
    out = {}
    for pkg in ("engine", "app"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, pkg)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of ours that ``name`` (a module or a name inside one) resolves to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(our module -> our modules it imports, our module -> external top-level packages)."""
    ours: dict[str, set[str]] = defaultdict(set)
    external: dict[str, set[str]] = defaultdict(set)
    for mod, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    source = base + ("." + node.module if node.module else "")
                else:
                    source = node.module or ""
                # "from pkg import sub" is the module pkg.sub; "from pkg import name" is pkg
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source
                           for a in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target)
                if owner is None:
                    external[mod].add(target.split(".")[0])
                elif owner != mod:
                    ours[mod].add(owner)
    return ours, external


GRAPH, EXTERNAL = _imports()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _engine_package(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def _layer(package: str) -> int:
    return next(i for i, layer in enumerate(ENGINE_LAYERS) if package in layer)


def _edges(prefix: str):
    for src in sorted(GRAPH):
        if src == prefix or src.startswith(prefix + "."):
            for dst in sorted(GRAPH[src]):
                yield src, dst


def test_the_graph_is_read():
    assert len(MODULES) > 100
    assert "engine.ir" in GRAPH["engine.schedule.state"]
    assert "app.service.measurer" in GRAPH["app.web.services"]


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_engine_package_has_a_layer():
    packages = {_engine_package(m) for m in MODULES if m.startswith("engine")}
    missing = sorted(p for p in packages if not any(p in layer for layer in ENGINE_LAYERS))
    assert not missing, f"add {missing} to ENGINE_LAYERS (and to docs/ARCHITECTURE.md)"


def test_engine_imports_only_lower_layers():
    wrong = []
    for src, dst in _edges("engine"):
        if not dst.startswith("engine"):
            wrong.append(f"{src} imports {dst}")
            continue
        a, b = _engine_package(src), _engine_package(dst)
        if a != b and _layer(b) >= _layer(a):
            wrong.append(f"{src} imports {dst} ({a} is not above {b})")
    assert not wrong, "\n".join(wrong)


#: the one engine module that may import a web library: the inference endpoint of an
#: exported library (``python -m engine serve``), a plain WSGI app served by waitress
ENGINE_WEB_EXCEPTIONS = {"engine.deploy.serve": {"waitress"}}


def test_engine_never_imports_the_web_libraries():
    wrong = {m: sorted(EXTERNAL[m] & WEB_LIBRARIES - ENGINE_WEB_EXCEPTIONS.get(m, set()))
             for m in EXTERNAL if m.startswith("engine")}
    assert not {m: w for m, w in wrong.items() if w}


@pytest.mark.parametrize("part", ["app.errors", "app.limits", "app.store"])
def test_the_app_leaves_import_nothing_of_the_app(part):
    # a leaf may be a package: its modules import one another, nothing else of the app
    assert not [dst for _, dst in _edges(part)
                if dst.startswith("app") and not (dst == part or dst.startswith(part + "."))]


def test_the_service_never_imports_the_web_layer_or_flask():
    wrong = [f"{src} imports {dst}" for src, dst in _edges("app.service")
             if dst.startswith(("app.web", "app.teaching")) or dst == "app"]
    wrong += [f"{m} imports {sorted(EXTERNAL[m] & WEB_LIBRARIES)}" for m in EXTERNAL
              if m.startswith("app.service") and EXTERNAL[m] & WEB_LIBRARIES]
    assert not wrong, "\n".join(wrong)


def test_the_worker_side_is_reached_only_through_the_worker_entry_point():
    wrong = []
    for src, dst in _edges("app"):
        if dst in SERVICE_WORKER_SIDE and src not in SERVICE_WORKER_SIDE \
                and (src, dst) != WORKER_ENTRY:
            wrong.append(f"{src} imports {dst}")
        if src in SERVICE_WORKER_SIDE and dst.startswith("app.service") \
                and dst not in SERVICE_WORKER_SIDE | {"app.service.protocol"}:
            wrong.append(f"{src} (worker side) imports {dst}")
    assert not wrong, "\n".join(wrong)


def test_the_web_layer_and_teaching_use_only_the_services_interface():
    wrong = [f"{src} imports {dst}" for prefix in ("app.web", "app.teaching")
             for src, dst in _edges(prefix)
             if dst.startswith("app.service") and dst not in SERVICE_INTERFACE]
    wrong += [f"{src} imports {dst}" for src, dst in _edges("app.web")
              if dst.startswith("app.teaching")]
    assert not wrong, "\n".join(wrong)
