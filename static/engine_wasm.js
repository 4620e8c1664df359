/* The engine's WebAssembly modules in the browser: the loader (no framework, no CDN).
 *
 * A module built by engine.wasm (kernels, or a model's plan) exports its functions, its
 * memory and `engine_wasm_alloc(bytes)` (64-byte aligned memory the page keeps), and imports
 * the math functions LLVM leaves as calls (`expf`, `tanhf`, ...) from `env`: given here
 * from Math, in double precision (WebAssembly rounds the result to float32).
 *
 *   const m = await EngineWasm.instantiate(bytes);     // an ArrayBuffer or a Uint8Array
 *   const x = m.alloc(4 * n);  m.write(x, float32Array);
 *   m.exports.engine_fn_add(x, y, out);  m.read(out, n)  // -> a Float32Array copy
 */
(function () {
  "use strict";

  // erf, |error| < 1.2e-7 (Numerical Recipes' erfc by a Chebyshev fit): JavaScript has none
  function erf(x) {
    var z = Math.abs(x), t = 1 / (1 + 0.5 * z);
    var r = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
      t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
      t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0 ? 1 - r : r - 1;
  }

  var UNARY = {exp: Math.exp, exp2: function (x) { return Math.pow(2, x); }, expm1: Math.expm1,
    log: Math.log, log2: Math.log2, log10: Math.log10, log1p: Math.log1p, sin: Math.sin,
    cos: Math.cos, tan: Math.tan, tanh: Math.tanh, sinh: Math.sinh, cosh: Math.cosh,
    asin: Math.asin, acos: Math.acos, atan: Math.atan, cbrt: Math.cbrt, erf: erf};
  var BINARY = {pow: Math.pow, atan2: Math.atan2, fmod: function (a, b) { return a % b; }};

  // float16 <-> float32 (LLVM calls compiler-rt's __extendhfsf2 / __truncsfhf2 for them):
  // the half's 16 bits in the low bits of an i32; rounding to nearest, ties to even
  var f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
  function halfToFloat(h) {
    var sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp === 0) return sign * man * Math.pow(2, -24);
    if (exp === 31) return man ? NaN : sign * Infinity;
    return sign * (1 + man / 1024) * Math.pow(2, exp - 15);
  }
  function floatToHalf(x) {
    f32[0] = x;
    var b = u32[0], sign = (b >>> 16) & 0x8000, exp = (b >>> 23) & 0xff, man = b & 0x7fffff;
    if (exp === 255) return sign | 0x7c00 | (man ? 0x200 : 0);
    var e = exp - 127 + 15;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) {                                   // a subnormal half (or zero)
      if (e < -10) return sign;
      man |= 0x800000;
      var shift = 14 - e, half = man >>> shift, rest = man & ((1 << shift) - 1), mid = 1 << (shift - 1);
      if (rest > mid || (rest === mid && (half & 1))) half++;
      return sign | half;
    }
    var h = sign | (e << 10) | (man >>> 13), r = man & 0x1fff;
    if (r > 0x1000 || (r === 0x1000 && (h & 1))) h++;  // may carry into the exponent: right
    return h;
  }

  function mathImports() {
    var env = {};
    Object.keys(UNARY).forEach(function (k) { env[k] = UNARY[k]; env[k + "f"] = UNARY[k]; });
    Object.keys(BINARY).forEach(function (k) { env[k] = BINARY[k]; env[k + "f"] = BINARY[k]; });
    env.fma = env.fmaf = function (a, b, c) { return a * b + c; };
    env.__extendhfsf2 = halfToFloat;
    env.__truncsfhf2 = env.__truncdfhf2 = floatToHalf;
    return {env: env};
  }

  function wrap(instance) {
    var ex = instance.exports;
    return {
      exports: ex,
      memory: ex.memory,
      alloc: function (bytes) {
        var p = ex.engine_wasm_alloc(bytes);
        if (!p) throw new Error("the module's memory could not grow by " + bytes + " bytes");
        return p;
      },
      // the views are made again at each use: a grown memory detaches the old buffer
      write: function (ptr, values) { new Float32Array(ex.memory.buffer, ptr, values.length).set(values); },
      read: function (ptr, n) { return new Float32Array(ex.memory.buffer, ptr, n).slice(); },
      bytes: function (ptr, n) { return new Uint8Array(ex.memory.buffer, ptr, n).slice(); }
    };
  }

  function instantiate(bytes) {
    return WebAssembly.instantiate(bytes, mathImports()).then(function (r) { return wrap(r.instance); });
  }

  function fromBase64(text) {
    var bin = atob(text), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  window.EngineWasm = {instantiate: instantiate, mathImports: mathImports, erf: erf,
                       halfToFloat: halfToFloat, floatToHalf: floatToHalf,
                       fromBase64: fromBase64};
})();
