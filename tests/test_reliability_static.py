"""Static guards for issue 7's rules: no eval/exec of text, no unpickling outside the worker
(where the bytes come from the server itself), no shell, and autoescaping in every template."""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("app", "engine")

# (file relative to ROOT, reason) — the only places allowed to do what is otherwise forbidden.
UNPICKLE_ALLOWED = {"app/service/actions.py"}      # IRModules pickled by the server process
SUBPROCESS_ALLOWED = {
    "engine/runtime/native.py",   # compiles the project's own parallel.c
    "engine/tune/runner.py",      # starts `python -m engine.tune.local_worker` (fixed argv)
    "engine/gpu/toolchain.py",    # runs ptxas and the NVRTC child script (fixed argv, no shell,
                                  # with a timeout; the source goes in a temporary file/stdin)
    "engine/tvm/contrib/clang.py",  # tvm.contrib.clang.create_llvm: clang -S -emit-llvm on the
                                    # user's own source (fixed argv, no shell, a timeout)
    "engine/deploy/targets.py",   # export_library: cc / the cross compiler link the objects the
                                  # engine emitted (argv lists, no shell, a timeout)
    "engine/deploy/qemu.py",      # cross-compiles the project's own qemu_runner.c and runs it under
                                  # qemu-aarch64 (argv lists, no shell, a timeout)
    "engine/wasm/toolchain.py",   # wasm-ld links the engine's own wasm objects (argv list, no
                                  # shell, a timeout)
}


def python_files():
    for pkg in PACKAGES:
        for dirpath, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    yield os.path.relpath(path, ROOT).replace(os.sep, "/"), path


def calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                yield node, f.id
            elif isinstance(f, ast.Attribute):
                base = f.value.id if isinstance(f.value, ast.Name) else "?"
                yield node, f"{base}.{f.attr}"


FILES = sorted(python_files())


@pytest.mark.parametrize("rel,path", FILES, ids=[r for r, _ in FILES])
def test_no_dangerous_calls(rel, path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=rel)
    problems = []
    for node, name in calls(tree):
        where = f"{rel}:{node.lineno}"
        if name in ("eval", "exec", "compile", "builtins.eval", "builtins.exec"):
            problems.append(f"{where}: {name}() runs text as code")
        if name == "__import__" and not all(isinstance(a, ast.Constant) for a in node.args):
            problems.append(f"{where}: __import__ of a computed name")
        if name in ("pickle.loads", "pickle.load", "marshal.loads") and rel not in UNPICKLE_ALLOWED:
            problems.append(f"{where}: {name} (unpickling can run code)")
        if name in ("yaml.load", "os.system", "os.popen"):
            problems.append(f"{where}: {name}")
        if name.startswith("subprocess.") and rel not in SUBPROCESS_ALLOWED:
            problems.append(f"{where}: {name} outside {sorted(SUBPROCESS_ALLOWED)}")
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and not kw.value.value):
                problems.append(f"{where}: shell=True")
    assert not problems, "\n".join(problems)


def test_every_template_is_autoescaped():
    from app import create_app
    app = create_app({"TESTING": True})
    env = app.jinja_env
    templates = env.list_templates()
    assert templates
    for name in templates:
        assert env.autoescape is True or env.autoescape(name), f"{name} is not autoescaped"
    out = env.from_string("{{ x }}").render(x="<script>alert(1)</script>")
    assert "<script>" not in out and "&lt;script&gt;" in out


def test_the_served_files_name_no_cdn():
    """Classrooms are often offline: every script the page loads is served from static/,
    and none of them refers to a CDN (plotly is the cartesian bundle: no map tiles,
    no topojson or MathJax fetched at run time)."""
    import re
    static = os.path.join(ROOT, "static")
    cdn = re.compile(r"https?://[\w.-]*(cdn|jsdelivr|unpkg|cdnjs)[\w.-]*", re.I)
    found = []
    for base, _, files in os.walk(static):
        for name in files:
            with open(os.path.join(base, name), encoding="utf-8", errors="replace") as f:
                found += [f"{name}: {m.group(0)}" for m in cdn.finditer(f.read())]
    assert not found, found
