/* The model page's "Run in your browser" (templates/model.html, section #model-wasm).
 *
 * On the button: the page's .wasm (built by a worker, served by /model/<name>/model.wasm;
 * 202 while it is being built: asked again each second) is compiled here, its metadata read
 * from the module itself (engine_deploy_metadata(): a C string in its memory), the test
 * images classified (outputs in #wasm-outputs[data-outputs], predictions in the table), the
 * time per inference measured with performance.now over repeated calls, and the canvas
 * classifies what is drawn on it: 28x28, ink 1 on 0, the digit's box scaled to the full
 * height and centred, as the course's digits (engine/models/digits.py).
 */
(function () {
  "use strict";
  var SIDE = 28;

  function $(id) { return document.getElementById(id); }
  function status(text) { var s = $("wasm-status"); if (s) s.textContent = text; }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  function fetchModule(url, deadline) {
    return fetch(url, {credentials: "same-origin"}).then(function (r) {
      if (r.status === 200) return r.arrayBuffer();
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (r.status === 202 && Date.now() < deadline) {
          status(body.pending || "the module is being built in a worker…");
          return sleep(1000).then(function () { return fetchModule(url, deadline); });
        }
        throw new Error(body.error || body.pending || ("the server answered " + r.status));
      });
    });
  }

  function cString(m, ptr) {
    var u8 = new Uint8Array(m.memory.buffer), end = ptr;
    while (u8[end] !== 0 && end < u8.length) end++;
    return new TextDecoder().decode(u8.subarray(ptr, end));
  }

  function prod(shape) { return shape.reduce(function (a, b) { return a * b; }, 1); }

  /* the module's main function: pointers for its input and output, calls in batches */
  function Runner(m) {
    var meta = JSON.parse(cString(m, m.exports.engine_deploy_metadata()));
    var names = Object.keys(meta.functions);
    var fn = meta.functions.main || meta.functions[names[0]];
    if (fn.inputs.length !== 1 || fn.outputs.length !== 1) throw new Error("the model's main takes " + fn.inputs.length + " inputs and gives " + fn.outputs.length + " outputs; this page runs one of each");
    var inp = fn.inputs[0], out = fn.outputs[0];
    if (inp.dtype !== "float32" || out.dtype !== "float32") throw new Error("the model's input and output must be float32");
    this.meta = meta;
    this.batch = inp.shape[0] || 1;
    this.rowIn = prod(inp.shape) / this.batch;
    this.rowOut = prod(out.shape) / this.batch;
    this.main = m.exports[fn.symbol];
    this.m = m;
    this.order = fn.args.map(function (a) { return a.role; });
    this.x = m.alloc(4 * prod(inp.shape));
    this.y = m.alloc(4 * prod(out.shape));
  }
  Runner.prototype.call = function () {
    var rc = this.order[0] === "input" ? this.main(this.x, this.y) : this.main(this.y, this.x);
    if (rc !== 0) throw new Error("the module's main returned " + rc);
  };
  /* rows: arrays of rowIn numbers -> arrays of rowOut numbers */
  Runner.prototype.run = function (rows) {
    var outs = [];
    for (var start = 0; start < rows.length; start += this.batch) {
      var chunk = new Float32Array(this.batch * this.rowIn);
      for (var k = 0; k < this.batch && start + k < rows.length; k++) chunk.set(rows[start + k], k * this.rowIn);
      this.m.write(this.x, chunk);
      this.call();
      var got = this.m.read(this.y, this.batch * this.rowOut);
      for (k = 0; k < this.batch && start + k < rows.length; k++)
        outs.push(Array.from(got.subarray(k * this.rowOut, (k + 1) * this.rowOut)));
    }
    return outs;
  };
  /* seconds per call of main: best of 5 rounds of at least 50 ms each */
  Runner.prototype.time = function () {
    var self = this, n = 1, best = Infinity;
    for (var w = 0; w < 3; w++) self.call();
    var t0 = performance.now();
    while (performance.now() - t0 < 50) { self.call(); n++; }
    for (var r = 0; r < 5; r++) {
      var a = performance.now();
      for (var i = 0; i < n; i++) self.call();
      best = Math.min(best, (performance.now() - a) / n);
    }
    return best / 1000;
  };

  function argmax(v) { var b = 0; for (var i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; }
  function fmtTime(s) { return s >= 1e-3 ? (s * 1e3).toFixed(3) + " ms" : (s * 1e6).toFixed(1) + " µs"; }

  /* the drawing as the course's input: 784 values, ink 1 on 0 */
  function canvasPixels(canvas) {
    var w = canvas.width, h = canvas.height;
    var img = canvas.getContext("2d").getImageData(0, 0, w, h).data;
    var x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (var y = 0; y < h; y++) for (var x = 0; x < w; x++) if (img[4 * (y * w + x)] > 0) {
      if (x < x0) x0 = x; if (x > x1) x1 = x; if (y < y0) y0 = y; if (y > y1) y1 = y;
    }
    var out = new Float32Array(SIDE * SIDE);
    if (x1 < 0) return null;
    var bw = x1 - x0 + 1, bh = y1 - y0 + 1, big = SIDE * 10;
    var s = Math.min(big / bh, big / bw), dw = bw * s, dh = bh * s;
    var tmp = document.createElement("canvas");
    tmp.width = tmp.height = big;
    var c = tmp.getContext("2d");
    c.fillStyle = "#000"; c.fillRect(0, 0, big, big);
    c.imageSmoothingQuality = "high";
    c.drawImage(canvas, x0, y0, bw, bh, (big - dw) / 2, (big - dh) / 2, dw, dh);
    var t = c.getImageData(0, 0, big, big).data;
    for (var r = 0; r < SIDE; r++) for (var q = 0; q < SIDE; q++) {   // 10x10 block means
      var sum = 0;
      for (var dy = 0; dy < 10; dy++) for (var dx = 0; dx < 10; dx++) sum += t[4 * ((r * 10 + dy) * big + q * 10 + dx)];
      out[r * SIDE + q] = Math.min(1, sum / (100 * 255));
    }
    return out;
  }

  function setupCanvas(runner) {
    var canvas = $("wasm-canvas"), ctx = canvas.getContext("2d"), drawing = false, last = null;
    function clear() {
      ctx.fillStyle = "#000"; ctx.fillRect(0, 0, canvas.width, canvas.height);
      $("wasm-drawn-class").textContent = "–"; $("wasm-drawn-scores").textContent = "";
      canvas.removeAttribute("data-class");
    }
    function at(e) {
      var r = canvas.getBoundingClientRect();
      return [(e.clientX - r.left) * canvas.width / r.width, (e.clientY - r.top) * canvas.height / r.height];
    }
    function classify() {
      var px = canvasPixels(canvas);
      if (!px) return;
      var out = runner.run([px])[0], k = argmax(out);
      $("wasm-drawn-class").textContent = String(k);
      $("wasm-drawn-scores").textContent = "(score " + out[k].toFixed(2) + ")";
      canvas.setAttribute("data-class", String(k));
      canvas.setAttribute("data-outputs", JSON.stringify(out));
    }
    ctx.lineCap = ctx.lineJoin = "round";
    ctx.lineWidth = 30;
    ctx.strokeStyle = "#fff";
    canvas.addEventListener("pointerdown", function (e) {
      drawing = true; last = at(e); canvas.setPointerCapture(e.pointerId);
      ctx.beginPath(); ctx.arc(last[0], last[1], ctx.lineWidth / 2, 0, 2 * Math.PI); ctx.fillStyle = "#fff"; ctx.fill();
    });
    canvas.addEventListener("pointermove", function (e) {
      if (!drawing) return;
      var p = at(e);
      ctx.beginPath(); ctx.moveTo(last[0], last[1]); ctx.lineTo(p[0], p[1]); ctx.stroke();
      last = p;
    });
    function end() { if (drawing) { drawing = false; classify(); } }
    canvas.addEventListener("pointerup", end);
    canvas.addEventListener("pointercancel", end);
    $("wasm-clear").addEventListener("click", clear);
    clear();
  }

  function showServerTime(section) {
    var stage = section.getAttribute("data-server-stage");
    function look() {
      var rows = document.querySelectorAll("#model-measure-pane td[data-e2e-s]");
      for (var i = 0; i < rows.length; i++) if (rows[i].getAttribute("data-stage") === stage) {
        var s = parseFloat(rows[i].getAttribute("data-e2e-s"));
        $("wasm-server-time").textContent = fmtTime(s);
        $("wasm-server-time").setAttribute("data-seconds", String(s));
        return true;
      }
      return false;
    }
    if (look()) return;
    var timer = setInterval(function () { if (look()) clearInterval(timer); }, 1000);
  }

  function start(section) {
    var button = $("wasm-run");
    button.disabled = true;
    status("asking the server for the module…");
    var t0 = performance.now();
    fetchModule(section.getAttribute("data-wasm-url"), Date.now() + 300000).then(function (buf) {
      status("compiling " + (buf.byteLength / 1024).toFixed(0) + " KiB of WebAssembly…");
      return EngineWasm.instantiate(buf).then(function (m) { return [m, buf.byteLength]; });
    }).then(function (got) {
      var runner = new Runner(got[0]);
      var samples = JSON.parse(section.getAttribute("data-samples") || "[]");
      var rows = samples.map(function (img) { return [].concat.apply([], img); });
      var outputs = rows.length && runner.rowIn === SIDE * SIDE ? runner.run(rows) : [];
      outputs.forEach(function (o, i) {
        var cell = document.querySelector(".wasm-pred[data-index='" + i + "']");
        if (cell) cell.textContent = String(argmax(o));
      });
      var perCall = runner.time();
      $("wasm-time").textContent = fmtTime(perCall) + (runner.batch > 1 ? " per call (" + runner.batch + " images)" : "");
      $("wasm-time").setAttribute("data-seconds", String(perCall));
      var box = $("wasm-outputs");
      box.setAttribute("data-outputs", JSON.stringify(outputs));
      box.setAttribute("data-batch", String(runner.batch));
      $("wasm-cols").hidden = false;
      if (runner.rowIn === SIDE * SIDE) setupCanvas(runner);
      else $("wasm-drawn").textContent = "This model's input is not one 28x28 image: the canvas is off.";
      showServerTime(section);
      section.setAttribute("data-ready", "1");
      status("ready: " + (got[1] / 1024).toFixed(0) + " KiB of " + runner.meta.target.triple +
             " built, loaded and compiled in " + ((performance.now() - t0) / 1000).toFixed(2) + " s");
    }).catch(function (e) {
      section.setAttribute("data-error", String(e.message || e));
      status("could not run in your browser: " + (e.message || e));
      button.disabled = false;
    });
  }

  function init() {
    var section = $("model-wasm");
    if (!section || !window.WebAssembly) {
      if (section) status("this browser has no WebAssembly");
      return;
    }
    $("wasm-run").addEventListener("click", function () { start(section); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
