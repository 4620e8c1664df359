"""The deployment form on this machine: ``rt.export_library`` / ``ex.export_library`` write one
shared library (kernels, weights, each function's plan as a C entry point, the thread pool
compiled in) and its header; it loads with ctypes alone (in a fresh virtual environment with
only numpy), links into a C program, and comes back with ``engine.runtime.load_module``.
Every result is compared with numpy."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import relax
from engine.deploy import DeployError, NativeLibrary
from engine.deploy import loader as loader_module
from engine.models.course import mlp_module
from engine.models.mlp import forward, trained_mlp
from engine.models.pipeline import stage_module

F32 = "float32"
#: what an exported library may need: libc, libm and the dynamic loader
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6"}


def needed_libraries(path: Path) -> set:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        if "(NEEDED)" in line:
            names.add(line.split("[", 1)[1].split("]", 1)[0])
    return names


def exported_symbols(path: Path) -> set:
    out = subprocess.run(["readelf", "--dyn-syms", "-W", str(path)], capture_output=True,
                         text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[4] == "GLOBAL" and parts[6] != "UND":
            names.add(parts[7].split("@")[0])
    return names


def assert_standalone(path: Path) -> None:
    needed = needed_libraries(path)
    extra = {n for n in needed - ALLOWED_NEEDED if not n.startswith("ld-linux")}
    assert not extra, f"{path.name} needs {sorted(extra)}"


# --------------------------------------------------------------------------- TensorIR

def mm_relu_scheduled(n: int = 64):
    """The course's mm_relu with a parallel outer loop and a vectorized inner one."""
    sch = engine.Schedule(engine.workloads.get("mm_relu", n=n))
    i, j, k = sch.get_loops(sch.get_block("Y"))
    sch.parallel(i)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, k, j1)
    sch.vectorize(j1)
    return sch.mod


@pytest.fixture(scope="module")
def kernel_lib(tmp_path_factory):
    rt = engine.build(mm_relu_scheduled())
    out = tmp_path_factory.mktemp("kernel") / "kernel.so"
    record = rt.export_library(out)
    return rt, record


def test_tir_export_runs_with_ctypes_and_needs_only_libc(kernel_lib):
    rt, record = kernel_lib
    assert record.path.exists() and record.header.name == "kernel.h"
    assert rt.compile_stats["parallel_loops"] >= 1
    assert_standalone(record.path)
    assert "libengine_parallel" not in " ".join(needed_libraries(record.path))
    # only the library's own entry points are exported: the thread pool is inside
    assert exported_symbols(record.path) == {"kernel_mm_relu", "kernel_metadata",
                                             "engine_deploy_metadata"}
    lib = NativeLibrary(record.path)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 64), F32), rng.standard_normal((64, 64), F32)
    want = np.maximum(a @ b, 0)
    np.testing.assert_allclose(lib["mm_relu"](a, b), want, rtol=1e-4, atol=1e-4)
    c = np.full((64, 64), np.nan, F32)
    assert lib["mm_relu"](a, b, c) is None       # destination passing, as rt["mm_relu"]
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)
    meta = lib.metadata
    assert meta["kind"] == "tir" and meta["target"]["name"] == "host"
    assert [(x["name"], x["role"], x["shape"]) for x in meta["functions"]["mm_relu"]["args"]] \
        == [("A", "input", [64, 64]), ("B", "input", [64, 64]), ("C", "output", [64, 64])]


def test_tir_load_module_round_trip(kernel_lib):
    rt, record = kernel_lib
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 64), F32), rng.standard_normal((64, 64), F32)
    built, loaded = np.zeros((64, 64), F32), np.zeros((64, 64), F32)
    rt["mm_relu"](a, b, built)
    mod = engine.runtime.load_module(record.path)
    mod["mm_relu"](a, b, loaded)
    np.testing.assert_array_equal(loaded, built)
    from engine.tvm import runtime as tvm_runtime
    again = np.zeros((64, 64), F32)
    tvm_runtime.load_module(str(record.path))["mm_relu"](a, b, again)
    np.testing.assert_array_equal(again, built)
    with pytest.raises(engine.ArgumentError, match=r"must have shape \(64, 64\)"):
        mod["mm_relu"](a[:8], b, loaded)
    with pytest.raises(engine.ArgumentError, match="must be float32"):
        mod["mm_relu"](a.astype("float64"), b, loaded)


def test_header_names_shapes_dtypes_and_warns_of_reentrancy(kernel_lib):
    text = kernel_lib[1].header.read_text()
    assert "int kernel_mm_relu(const float* A, const float* B, float* C);" in text
    assert "#define KERNEL_MM_RELU_C_SIZE 4096" in text
    assert "NOT REENTRANT" in text


# --------------------------------------------------------------------------- the MLP

@pytest.fixture(scope="module")
def mlp():
    return trained_mlp()


@pytest.fixture(scope="module")
def mlp_lib(mlp, tmp_path_factory):
    ex = relax.build(mlp_module(1, mlp.params), target="llvm")
    out = tmp_path_factory.mktemp("mlp") / "mlp.so"
    return ex, ex.export_library(out)


def test_mlp_export_has_one_entry_point_with_weights_inside(mlp, mlp_lib):
    ex, record = mlp_lib
    assert_standalone(record.path)
    weights = sum(v.nbytes for v in mlp.params.values())
    assert record.constants_bytes == weights
    assert record.file_bytes > weights
    lib = NativeLibrary(record.path)
    assert lib.functions == ["main"]
    info = lib.metadata["functions"]["main"]
    assert info["symbol"] == "mlp_main"
    assert [(a["name"], a["shape"]) for a in info["inputs"]] == [("x", [1, 784])]
    assert [(a["name"], a["shape"]) for a in info["outputs"]] == [("out", [1, 10])]
    # the intermediates are the memory plan's arena, in the library
    assert info["arena_bytes"] == ex.memory_plan("main")["arena_bytes"] > 0
    x = mlp.data.test_images[:1].reshape(1, 784).astype(F32)
    np.testing.assert_allclose(lib["main"](x), forward(mlp.params, x), rtol=1e-4, atol=1e-4)


def test_mlp_load_module_round_trip(mlp, mlp_lib):
    ex, record = mlp_lib
    vm = relax.VirtualMachine(ex, engine.cpu())
    mod = engine.runtime.load_module(record.path)
    for img in mlp.data.test_images[:5]:
        x = img.reshape(1, 784).astype(F32)
        got = mod["main"](x)
        assert isinstance(got, engine.nd.NDArray)
        np.testing.assert_allclose(got.numpy(), vm["main"](x).numpy(), rtol=1e-5, atol=1e-5)


def test_fused_and_scheduled_mlp_exports(mlp, tmp_path):
    """The model page's last stage (fused kernels with their default schedules)."""
    mod, _ = stage_module(mlp_module(4, mlp.params), "fused+scheduled")
    ex = relax.build(mod, target="llvm")
    record = ex.export_library(tmp_path / "fused.so", prefix="digits")
    assert_standalone(record.path)
    x = mlp.data.test_images[:4].reshape(4, 784).astype(F32)
    lib = NativeLibrary(record.path)
    assert lib.metadata["functions"]["main"]["symbol"] == "digits_main"
    np.testing.assert_allclose(lib["main"](x), forward(mlp.params, x), rtol=1e-4, atol=1e-4)


# ------------------------------------------------ no engine: a fresh venv, a C program

@pytest.fixture(scope="session")
def numpy_only_python(tmp_path_factory):
    """A fresh virtual environment (no system site packages) with numpy alone."""
    venv = tmp_path_factory.mktemp("numpy-only") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "numpy"], check=True, timeout=600)
    return py


FRESH_SCRIPT = """
import json, sys
import numpy as np
try:
    import engine  # noqa: F401
    print("ENGINE IMPORTABLE"); sys.exit(3)
except ImportError:
    pass
try:
    import llvmlite  # noqa: F401
    print("LLVMLITE IMPORTABLE"); sys.exit(3)
except ImportError:
    pass
from loader import NativeLibrary
lib = NativeLibrary(sys.argv[1])
images = np.load(sys.argv[2])
outs = [lib["main"](img.reshape(1, 784)).tolist() for img in images]
print(json.dumps(outs))
"""


def test_mlp_runs_in_a_fresh_venv_with_only_numpy(mlp, mlp_lib, numpy_only_python, tmp_path):
    _, record = mlp_lib
    ship = tmp_path / "ship"
    ship.mkdir()
    shutil.copy(record.path, ship / "mlp.so")
    shutil.copy(loader_module.__file__, ship / "loader.py")   # the loader, copied alone
    (ship / "run.py").write_text(FRESH_SCRIPT)
    images = mlp.data.test_images[:8].reshape(8, 784).astype(F32)
    np.save(ship / "images.npy", images)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    proc = subprocess.run([str(numpy_only_python), "run.py", "mlp.so", "images.npy"],
                          cwd=ship, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.array(json.loads(proc.stdout), F32).reshape(8, 10)
    np.testing.assert_allclose(got, forward(mlp.params, images), rtol=1e-4, atol=1e-4)
    assert (got.argmax(1) == mlp.data.test_labels[:8]).mean() >= 0.75


C_PROGRAM = r"""
#include <stdio.h>
#include "mlp.h"

int main(void) {
    static float x[MLP_MAIN_X_SIZE], out[MLP_MAIN_OUT_SIZE];
    FILE *f = fopen("image.bin", "rb");
    if (!f || fread(x, sizeof(float), MLP_MAIN_X_SIZE, f) != MLP_MAIN_X_SIZE) return 2;
    fclose(f);
    int rc = mlp_main(x, out);
    if (rc != 0) return 1;
    for (int i = 0; i < MLP_MAIN_OUT_SIZE; i++) printf("%.9g\n", out[i]);
    printf("%.40s\n", mlp_metadata());
    return 0;
}
"""


def test_c_program_against_the_header(mlp, mlp_lib, tmp_path):
    _, record = mlp_lib
    shutil.copy(record.path, tmp_path / "mlp.so")
    shutil.copy(record.header, tmp_path / "mlp.h")
    (tmp_path / "main.c").write_text(C_PROGRAM)
    x = mlp.data.test_images[3].reshape(1, 784).astype(F32)
    x.tofile(tmp_path / "image.bin")
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", "-o", "classify", "main.c",
                    "./mlp.so", "-Wl,-rpath,$ORIGIN"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    proc = subprocess.run(["./classify"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    got = np.array([float(v) for v in lines[:10]], F32)
    np.testing.assert_allclose(got, forward(mlp.params, x)[0], rtol=1e-4, atol=1e-4)
    assert lines[10].startswith('{"format":"engine-deploy"')


# --------------------------------------------------------------------------- refusals

def test_a_missing_directory_is_one_sentence(kernel_lib, tmp_path):
    rt, _ = kernel_lib
    with pytest.raises(DeployError, match="directory .* does not exist; create it first"):
        rt.export_library(tmp_path / "nowhere" / "kernel.so")


def test_symbolic_shapes_are_refused_with_the_dimension(tmp_path):
    src = textwrap.dedent('''
        @T.prim_func
        def add1(a: T.handle, b: T.handle):
            n = T.int32()
            A = T.match_buffer(a, (n,), "float32")
            B = T.match_buffer(b, (n,), "float32")
            for i in range(n):
                with T.block("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi] + T.float32(1)
    ''')
    rt = engine.build(engine.parse(src))
    with pytest.raises(DeployError, match="symbolic size n in dimension 0.*fixed"):
        rt.export_library(tmp_path / "add1.so")
    assert not (tmp_path / "add1.so").exists()


def test_symbolic_batch_of_a_relax_function_is_refused(tmp_path):
    src = textwrap.dedent('''
        @I.ir_module
        class Module:
            @T.prim_func
            def add1(x: T.handle, y: T.handle):
                n = T.int64()
                X = T.match_buffer(x, (n, 4), "float32")
                Y = T.match_buffer(y, (n, 4), "float32")
                for i, j in T.grid(n, 4):
                    with T.block("Y"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        Y[vi, vj] = X[vi, vj] + T.float32(1)

            @R.function
            def main(x: R.Tensor(("n", 4), "float32")):
                n = T.int64()
                with R.dataflow():
                    y = R.call_tir(add1, (x,), R.Tensor((n, 4), "float32"))
                    R.output(y)
                return y
    ''')
    ex = relax.build(engine.parse(src), target="llvm")
    with pytest.raises(DeployError, match=r"symbolic size n in dimension 0.*fixed batch"):
        ex.export_library(tmp_path / "add.so")


def test_an_operator_run_in_numpy_is_refused(tmp_path):
    src = textwrap.dedent('''
        @R.function
        def main(x: R.Tensor((2, 4), "float32"), y: R.Tensor((2, 4), "float32")):
            with R.dataflow():
                z = R.add(x, y)
                R.output(z)
            return z
    ''')
    ex = relax.build(engine.parse(src), target="llvm")
    with pytest.raises(DeployError, match=r"relax.add.*LegalizeOps"):
        ex.export_library(tmp_path / "add.so")


def test_extern_code_is_refused(tmp_path):
    from engine.ir.buffer import Buffer
    from engine.ir.expr import Call, StringImm, Var, const
    from engine.ir.function import PrimFunc
    from engine.ir.stmt import BufferStore, For, ForKind
    out = Buffer("Out", (8,), "int32")
    i = Var("i")
    call = Call("int32", "call_extern", (StringImm("my_secret"), i))
    func = PrimFunc("ext", (out,), For(i, const(0), const(8), ForKind.SERIAL,
                                       BufferStore(out, call, (i,))), (("lowered", True),))
    ll = "define i32 @my_secret(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"
    rt = engine.build(func, lowered=True, extra_modules=[ll])
    got = np.zeros(8, "int32")
    rt["ext"](got)
    assert got.tolist() == list(range(1, 9))       # it runs in the engine's process
    with pytest.raises(DeployError, match="extern function 'my_secret'"):
        rt.export_library(tmp_path / "ext.so")


def test_loading_a_file_that_is_not_an_exported_library(tmp_path):
    plain = tmp_path / "plain.so"
    (tmp_path / "plain.c").write_text("int answer(void) { return 42; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "plain.c")],
                   check=True, timeout=60)
    with pytest.raises(DeployError, match="not a library exported by the engine"):
        engine.runtime.load_module(plain)
    text = tmp_path / "notes.so"
    text.write_text("hello")
    with pytest.raises(DeployError, match="cannot be loaded as a shared library"):
        engine.runtime.load_module(text)
    with pytest.raises(DeployError, match="no file"):
        engine.runtime.load_module(tmp_path / "missing.so")


THREADS_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from loader import NativeLibrary
lib = NativeLibrary(sys.argv[1])
seen = set()
for _ in range(200):
    out = lib["tid"]()
    seen |= set(out.tolist())
    if len(seen) > 1:
        break
print(sorted(seen))
"""


def test_the_library_starts_its_own_thread_pool(tmp_path):
    """A parallel loop of an exported library runs on the library's pool, sized by
    $ENGINE_NUM_THREADS (no engine in the process that loads it)."""
    from engine.ir.buffer import Buffer
    from engine.ir.expr import Call, StringImm, Var, const
    from engine.ir.function import PrimFunc
    from engine.ir.stmt import BufferStore, For, ForKind
    out = Buffer("Out", (64,), "int32")
    i, r = Var("i"), Var("r")
    tid = Call("int32", "call_extern", (StringImm("engine_runtime_thread_index"),))
    body = For(i, const(0), const(64), ForKind.PARALLEL,
               For(r, const(0), const(20000), ForKind.SERIAL, BufferStore(out, tid, (i,))))
    rt = engine.build(PrimFunc("tid", (out,), body, (("lowered", True),)), lowered=True)
    record = rt.export_library(tmp_path / "tid.so")
    assert_standalone(record.path)
    script = tmp_path / "threads.py"
    script.write_text(THREADS_SCRIPT)
    for n, want in ((1, [0]), (2, [0, 1])):
        env = dict(os.environ, ENGINE_NUM_THREADS=str(n))
        proc = subprocess.run([sys.executable, str(script), str(record.path),
                               str(Path(loader_module.__file__).parent)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == want


def test_a_tuple_result_with_an_argument_in_it(tmp_path):
    """Results written in place by their kernels, an intermediate returned as well, and an
    argument returned (copied into its output)."""
    src = textwrap.dedent('''
        @I.ir_module
        class Module:
            @T.prim_func
            def add1(X: T.Buffer((2, 4), "float32"), Y: T.Buffer((2, 4), "float32")):
                for i, j in T.grid(2, 4):
                    with T.block("Y"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        Y[vi, vj] = X[vi, vj] + T.float32(1)

            @R.function
            def main(x: R.Tensor((2, 4), "float32")):
                with R.dataflow():
                    a = R.call_tir(add1, (x,), R.Tensor((2, 4), "float32"))
                    b = R.call_tir(add1, (a,), R.Tensor((2, 4), "float32"))
                    c = R.call_tir(add1, (b,), R.Tensor((2, 4), "float32"))
                    R.output(a, c)
                return (c, a, x)
    ''')
    ex = relax.build(engine.parse(src), target="llvm")
    record = ex.export_library(tmp_path / "tup.so")
    x = np.arange(8, dtype=F32).reshape(2, 4)
    got = engine.runtime.load_module(record.path)["main"](x)
    for g, w in zip(got, (x + 3, x + 1, x)):
        np.testing.assert_array_equal(g.numpy(), w)
    assert "int tup_main(const float* x, float* out0, float* out1, float* out2);" in \
        record.header.read_text()
    with pytest.raises(engine.ArgumentError, match=r"takes 1 input\(s\) \(x\), got 2"):
        engine.runtime.load_module(record.path)["main"](x, x)
