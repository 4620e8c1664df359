"""What a kernel compiled for WebAssembly needs from outside itself, without libc.

The code generator's kernels call three things the host gets from libc and the native
thread pool (:mod:`engine.runtime.native`); a ``.wasm`` file brings its own:

* ``engine_parallel_launch(task, env, n)`` — a parallel loop's launch. A browser page has
  one thread here, so the whole loop is one task: ``task(0, 1, env)``.
* ``aligned_alloc`` / ``free`` — buffers over the stack limit. The kernels declare them with
  64-bit sizes (the host's ``size_t``); in wasm32 they are renamed to
  ``engine_wasm_aligned_alloc`` / ``engine_wasm_free`` (:data:`RENAMED`): a stack-like
  allocator above the linker's ``__heap_base`` that grows the memory when it must. A
  kernel frees what it allocated in the reverse order (its ``Allocate`` scopes nest, and
  nothing runs beside it), so ``free`` puts the top back where it was.
* ``memset`` with a 64-bit size — renamed to ``engine_wasm_memset`` (``memory.fill``).

``engine_wasm_alloc(bytes)`` — 64-byte aligned memory that the page keeps (its input and
output arrays), taken from the same allocator before any kernel runs.

Math functions LLVM leaves as calls (``expf``, ``tanhf``, ``powf``, ...; WebAssembly has
only sqrt, floor, ceil, trunc, nearest, abs, min, max) are imported from the JavaScript
host (module ``env``): :data:`MATH_IMPORTS`; ``static/wasm_model.js`` supplies them from
``Math`` (computed in double precision, rounded to float32 by WebAssembly).
"""
from __future__ import annotations

__all__ = ["RUNTIME_LL", "RENAMED", "MATH_IMPORTS", "ALLOC_EXPORT"]

#: libc symbols the kernels declare with the host's 64-bit ``size_t`` -> the wasm runtime's
RENAMED = {"aligned_alloc": "engine_wasm_aligned_alloc", "free": "engine_wasm_free",
           "memset": "engine_wasm_memset"}

#: the exported allocator the JavaScript loader reserves its arrays with
ALLOC_EXPORT = "engine_wasm_alloc"

#: the functions a module may import from the JavaScript host (anything else undefined is
#: a link error): the float32 and float64 libm names LLVM's WebAssembly backend calls
MATH_IMPORTS = tuple(name + suffix for name in (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos", "tan",
    "tanh", "sinh", "cosh", "asin", "acos", "atan", "atan2", "erf", "fma", "fmod", "cbrt")
    for suffix in ("f", "")) + ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2")

RUNTIME_LL = r"""
@__heap_base = external global i8
@engine_wasm_top = internal global i32 0

declare i32 @llvm.wasm.memory.size.i32(i32)
declare i32 @llvm.wasm.memory.grow.i32(i32, i32)
declare void @llvm.memset.p0.i32(ptr, i8, i32, i1)

define i32 @engine_parallel_launch(ptr %task, ptr %env, i32 %n) {
  %r = call i32 %task(i32 0, i32 1, ptr %env)
  ret i32 %r
}

define ptr @engine_wasm_aligned_alloc(i64 %align64, i64 %size64) {
entry:
  %big = icmp ugt i64 %size64, 1073741824
  %badalign = icmp ugt i64 %align64, 65536
  %bad = or i1 %big, %badalign
  br i1 %bad, label %fail, label %ok
ok:
  %align0 = trunc i64 %align64 to i32
  %alignz = icmp eq i32 %align0, 0
  %align = select i1 %alignz, i32 1, i32 %align0
  %size = trunc i64 %size64 to i32
  %top0 = load i32, ptr @engine_wasm_top
  %fresh = icmp eq i32 %top0, 0
  %hb = ptrtoint ptr @__heap_base to i32
  %top = select i1 %fresh, i32 %hb, i32 %top0
  %start = add i32 %top, 4
  %am1 = sub i32 %align, 1
  %s1 = add i32 %start, %am1
  %mask = sub i32 0, %align
  %p = and i32 %s1, %mask
  %end = add i32 %p, %size
  %wrapped = icmp ult i32 %end, %p
  br i1 %wrapped, label %fail, label %check
check:
  %pages = call i32 @llvm.wasm.memory.size.i32(i32 0)
  %avail = shl i32 %pages, 16
  %fits = icmp ule i32 %end, %avail
  br i1 %fits, label %done, label %grow
grow:
  %need0 = sub i32 %end, %avail
  %need1 = add i32 %need0, 65535
  %need = lshr i32 %need1, 16
  %old = call i32 @llvm.wasm.memory.grow.i32(i32 0, i32 %need)
  %failed = icmp eq i32 %old, -1
  br i1 %failed, label %fail, label %done
done:
  %hdr = sub i32 %p, 4
  %hdrp = inttoptr i32 %hdr to ptr
  store i32 %top, ptr %hdrp
  store i32 %end, ptr @engine_wasm_top
  %ptr = inttoptr i32 %p to ptr
  ret ptr %ptr
fail:
  ret ptr null
}

define void @engine_wasm_free(ptr %p) {
entry:
  %null = icmp eq ptr %p, null
  br i1 %null, label %out, label %pop
pop:
  %pi = ptrtoint ptr %p to i32
  %hdr = sub i32 %pi, 4
  %hdrp = inttoptr i32 %hdr to ptr
  %old = load i32, ptr %hdrp
  store i32 %old, ptr @engine_wasm_top
  br label %out
out:
  ret void
}

define ptr @engine_wasm_memset(ptr %p, i32 %v, i64 %n64) {
  %n = trunc i64 %n64 to i32
  %b = trunc i32 %v to i8
  call void @llvm.memset.p0.i32(ptr %p, i8 %b, i32 %n, i1 false)
  ret ptr %p
}

define ptr @engine_wasm_alloc(i32 %bytes) {
  %n = zext i32 %bytes to i64
  %p = call ptr @engine_wasm_aligned_alloc(i64 64, i64 %n)
  ret ptr %p
}
"""
