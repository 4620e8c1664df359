"""Shared helpers of the cache benchmarks: the mm_relu programs, a C emitter for lowered
loop nests (one volatile memory access per IR access, in the simulator's order), and
running valgrind's cachegrind on the result restricted to the kernel function."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

from engine.ir import expr as E  # noqa: E402
from engine.ir import stmt as S  # noqa: E402
from engine.ir.dtype import element_of, lanes_of  # noqa: E402

CTYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
          "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "bool": "uint8_t"}
LL_ALIGN = 1 << 21  # address bits that select sets in every level up to 2 MiB per way


def programs(n: int):
    """{"naive": mod, "course": mod}: from the schedule module when it can replay the course
    steps, else the same loop nests built directly in IR (engine.cache.examples)."""
    try:
        import engine
        mod = engine.workloads.get("mm_relu", n=n)
        sch = engine.Schedule(mod)
        blk = sch.get_block("Y", func_name="mm_relu")
        i, j, k = sch.get_loops(blk)
        j0, j1 = sch.split(j, factors=[None, 4])
        sch.reorder(j0, k, j1)
        sch.reverse_compute_at(sch.get_block("C", func_name="mm_relu"), j0)
        sch.decompose_reduction(blk, k)
        return {"naive": mod, "course": sch.mod}, "engine.Schedule (course steps)"
    except Exception:  # noqa: BLE001
        from engine.cache.examples import mm_relu_course, mm_relu_naive
        return ({"naive": mm_relu_naive(n), "course": mm_relu_course(n)},
                "engine.cache.examples (hand-built IR; schedule module not complete yet)")


class CEmitter:
    """C source for a lowered PrimFunc: every load goes to its own temporary in the order the
    simulator's instrumentation reports it, every buffer is a ``volatile`` pointer."""

    def __init__(self, func):
        self.func = func
        self.lines: list[str] = []
        self.tmp = 0
        self.buffers: list = []

    def name(self, buf) -> str:
        if not any(buf is b for b in self.buffers):
            self.buffers.append(buf)
        return re.sub(r"\W", "_", buf.name)

    def expr(self, e, pre: list) -> str:
        if lanes_of(e.dtype) != 1:
            raise NotImplementedError("vector code is not emitted as C")
        if isinstance(e, E.IntImm):
            return f"({e.value}LL)" if e.dtype == "int64" else str(e.value)
        if isinstance(e, E.FloatImm):
            return f"{e.value!r}f" if e.dtype == "float32" else repr(e.value)
        if isinstance(e, E.Var):
            return re.sub(r"\W", "_", e.name) + f"_{id(e) % 100000}"
        if isinstance(e, E.BufferLoad):
            idx = self.expr(e.indices[0], pre)
            t = f"t{self.tmp}"
            self.tmp += 1
            pre.append(f"{CTYPES[element_of(e.dtype)]} {t} = {self.name(e.buffer)}[{idx}];")
            return t
        if isinstance(e, E.Cast):
            return f"(({CTYPES[element_of(e.dtype)]}){self.expr(e.value, pre)})"
        ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Mod: "%", E.LT: "<",
               E.LE: "<=", E.GT: ">", E.GE: ">=", E.EQ: "==", E.NE: "!=", E.And: "&&",
               E.Or: "||"}
        for cls, op in ops.items():
            if type(e) is cls:
                return f"({self.expr(e.a, pre)} {op} {self.expr(e.b, pre)})"
        if isinstance(e, (E.Max, E.Min)):
            a, b = self.expr(e.a, pre), self.expr(e.b, pre)
            return f"(({a}) {'>' if isinstance(e, E.Max) else '<'} ({b}) ? ({a}) : ({b}))"
        if isinstance(e, (E.FloorDiv, E.FloorMod)):
            a, b = self.expr(e.a, pre), self.expr(e.b, pre)
            return f"({a} {'/' if isinstance(e, E.FloorDiv) else '%'} {b})"  # non-negative here
        raise NotImplementedError(f"no C for {type(e).__name__}")

    def stmt(self, s, ind: int) -> None:
        pad = "    " * ind
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, ind)
        elif isinstance(s, S.For):
            pre: list = []
            lo, ext = self.expr(s.min, pre), self.expr(s.extent, pre)
            v = self.expr(s.loop_var, pre)
            self.lines += [pad + p for p in pre]
            self.lines.append(f"{pad}for (long {v} = {lo}; {v} < {lo} + {ext}; ++{v}) {{")
            self.stmt(s.body, ind + 1)
            self.lines.append(pad + "}")
        elif isinstance(s, S.BufferStore):
            pre = []
            idx = self.expr(s.indices[0], pre)
            val = self.expr(s.value, pre)
            self.lines.append(pad + "{ " + " ".join(pre) +
                              f" {self.name(s.buffer)}[{idx}] = {val}; }}")
        elif isinstance(s, S.IfThenElse):
            pre = []
            c = self.expr(s.condition, pre)
            self.lines += [pad + p for p in pre]
            self.lines.append(f"{pad}if ({c}) {{")
            self.stmt(s.then_case, ind + 1)
            if s.else_case is not None:
                self.lines.append(pad + "} else {")
                self.stmt(s.else_case, ind + 1)
            self.lines.append(pad + "}")
        elif isinstance(s, S.Allocate):
            self.name(s.buffer)
            self.stmt(s.body, ind)
        elif isinstance(s, S.Evaluate):
            pass
        else:
            raise NotImplementedError(f"no C for {type(s).__name__}")


def c_program(lowered, offsets: dict) -> str:
    """A C program running ``lowered`` once, each buffer placed at ``offsets[name]`` past a
    2 MiB boundary (the same set mapping in every level as the simulated run)."""
    em = CEmitter(lowered)
    em.stmt(lowered.body, 1)
    decls, setup, local = [], [], []
    chunk = 0
    for b in em.buffers:
        chunk = max(chunk, b.nbytes())
    chunk = (chunk + 2 * LL_ALIGN - 1) // LL_ALIGN * LL_ALIGN
    for k, b in enumerate(em.buffers):
        nm, ct = em.name(b), CTYPES[element_of(b.dtype)]
        decls.append(f"volatile {ct} *g_{nm};")
        # the kernel keeps the pointers in registers: no reloads between volatile accesses
        local.append(f"    volatile {ct} *const {nm} = g_{nm};")
        setup.append(f"    g_{nm} = (volatile {ct} *)(region + {k}L * {chunk}L + "
                     f"{offsets.get(b.name, 0) % LL_ALIGN}L);")
    total = chunk * max(1, len(em.buffers))
    return "\n".join([
        "#include <stdint.h>", "#include <stdlib.h>", "#include <stdio.h>", "",
        *decls, "",
        "__attribute__((noinline)) void kernel(void) {", *local, *em.lines, "}", "",
        "int main(int argc, char **argv) {",
        f"    char *region = aligned_alloc({LL_ALIGN}, {total}L);",
        "    if (!region) return 1;", *setup,
        "    if (argc > 1) kernel();",
        "    return 0;", "}", ""])


def have_cachegrind() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("cc") is not None


def run_cachegrind(c_src: str, d1: tuple, ll: tuple, workdir: str | None = None) -> dict:
    """Compile ``c_src`` and run it under cachegrind with the given D1/LL geometry
    ``(size, ways, line)``; returns the kernel function's counts, the program's counts, and
    the wall-clock and CPU time of the valgrind run."""
    work = workdir or tempfile.mkdtemp(prefix="cg_")
    src, exe, out = (os.path.join(work, x) for x in ("k.c", "k", "cachegrind.out"))
    with open(src, "w") as f:
        f.write(c_src)
    subprocess.run(["cc", "-O1", "-g", "-fno-inline", "-o", exe, src], check=True)
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes",
           f"--I1=32768,8,{d1[2]}", f"--D1={d1[0]},{d1[1]},{d1[2]}",
           f"--LL={ll[0]},{ll[1]},{ll[2]}", f"--cachegrind-out-file={out}", exe, "run"]
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        raise RuntimeError(f"cachegrind failed: {p.stderr[-2000:]}")
    return {"kernel": parse_cachegrind(out, "kernel"), "total": parse_cachegrind(out, None),
            "wall": wall, "cpu": cpu, "stderr": p.stderr}


def parse_cachegrind(path: str, func: str | None) -> dict:
    """Sum the event counts of one function (or all, ``func=None``) in a cachegrind.out file."""
    events: list[str] = []
    sums: dict = {}
    cur = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("events:"):
                events = line.split()[1:]
                sums = dict.fromkeys(events, 0)
            elif line.startswith("fn="):
                cur = line[3:]
            elif line and line[0].isdigit() and (func is None or cur == func):
                parts = line.split()
                for ev, v in zip(events, parts[1:]):
                    sums[ev] += int(v)
    return sums
