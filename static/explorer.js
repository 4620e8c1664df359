/* Schedule Explorer page behaviour: selection, highlights, tabs, plots, copy link.
 * Everything that changes program state goes through htmx requests to the server;
 * this file only handles what is purely visual. No user text is ever inserted as HTML (a plot's
 * kept picture is the SVG plotly drew in this page, serialised and put back as it was). */
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function cssq(v) { return window.CSS && CSS.escape ? CSS.escape(v) : v.replace(/["\\]/g, "\\$&"); }

  // ------------------------------------------------------------------ highlights
  function markNodes(sels, cls, lineCls) {
    $all("." + cls).forEach(function (e) { e.classList.remove(cls); });
    $all(".line." + lineCls).forEach(function (e) { e.classList.remove(lineCls); });
    sels.forEach(function (sel) {
      if (!sel) return;
      $all('[data-sel="' + cssq(sel) + '"]').forEach(function (e) {
        e.classList.add(cls);
        var start = parseInt(e.getAttribute("data-start") || "0", 10);
        var end = parseInt(e.getAttribute("data-end") || "0", 10);
        if (start && end) {
          for (var i = start; i <= end; i++) {
            var line = $('#program-pane .line[data-line="' + i + '"]');
            if (line) line.classList.add(lineCls);
          }
        }
      });
    });
  }

  function refreshHighlights() {
    var tb = $("#toolbar");
    var sel = tb ? tb.getAttribute("data-selected") : "";
    markNodes(sel ? [sel] : [], "selected", "in-sel");
    var msg = $("#message");
    var bad = msg && msg.getAttribute("data-highlight");
    markNodes(bad ? bad.split(" ") : [], "offending", "in-bad");
  }

  var focusToolbar = false;

  function patternVisible() {
    var panel = document.getElementById("panel-pattern");
    return panel && !panel.hidden;
  }

  function loadPattern() {
    var pane = $("#pattern-pane");
    if (!pane) return;
    var url = slotUrl(pane);
    var tb = $("#toolbar");
    var sel = tb ? tb.getAttribute("data-selected") : "";
    if (sel && sel.indexOf("L/") === 0) url += (url.indexOf("?") >= 0 ? "&" : "?") + "sel=" + encodeURIComponent(sel);
    htmx.ajax("GET", url, { target: "#pattern-pane", swap: "innerHTML" });
  }

  function select(sel, fromKeyboard) {
    focusToolbar = !!fromKeyboard;
    var tb = $("#toolbar");
    if (!tb) return;
    tb.setAttribute("data-selected", sel || "");
    refreshHighlights();
    var url = tb.getAttribute("data-toolbar-url");
    if (!url) return;
    if (sel) url += (url.indexOf("?") >= 0 ? "&" : "?") + "sel=" + encodeURIComponent(sel);
    htmx.ajax("GET", url, { target: "#toolbar", swap: "outerHTML" });
    if (patternVisible() && sel && sel.indexOf("L/") === 0) loadPattern();
  }

  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element)) return;
    // a link to another state (undo, redo, a step of the trace): its panes, out-of-band
    var nav = t.closest("a[data-nav]");
    if (nav && ev.button === 0 && !(ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey)) {
      ev.preventDefault();
      htmx.ajax("GET", nav.getAttribute("href"), { source: nav, target: "#message", swap: "outerHTML" });
      return;
    }
    var node = t.closest("[data-sel]");
    if (node && !t.closest("form")) { ev.preventDefault(); select(node.getAttribute("data-sel")); return; }
    if (t.closest("[data-deselect]")) { select(""); return; }
    var tab = t.closest(".tab[data-tab]");
    if (tab) { showTab(tab.getAttribute("data-tab")); revealTabs(tab); return; }
    if (t.closest("#copy-link")) { copyLink(); return; }
    var menu = t.closest(".menu-items a");
    if (menu) { var d = menu.closest("details"); if (d) setTimeout(function () { d.open = false; }, 0); }
    // a click elsewhere closes an open menu
    $all("details.menu[open]").forEach(function (d) { if (!d.contains(t)) d.open = false; });
  });

  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (t instanceof Element && t.matches("[data-sel]") && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      select(t.getAttribute("data-sel"), true);
      return;
    }
    if (t instanceof Element && t.closest("input, textarea, select")) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
    if (ev.key === "[") clickKey("undo");
    else if (ev.key === "]") clickKey("redo");
    else if (ev.key === "Escape") select("");
  });

  function clickKey(key) {
    var a = $('[data-key="' + key + '"]');
    if (a) a.click();
  }

  // ------------------------------------------------------------------ tabs
  // Each tab list switches only its own panels (the program column's tabs and the
  // measurement pane's Runtime/Roofline tabs are independent).
  var measureTab = "";   // the measurement pane's chosen tab, kept across its re-renders

  // Clicking a measurement tab scrolls the (small, scrolling) measurement pane so that the
  // tabs are at its top and the chosen plot is in full view; the Runtime tab goes back to
  // the top, where the current step's line is.
  function revealTabs(tab) {
    var group = tab.closest(".mtabs");
    var pane = tab.closest("#measure-pane");
    if (!group || !pane) return;
    if (tab.getAttribute("data-tab") === "mpanel-runtime") { pane.scrollTop = 0; return; }
    pane.scrollTop += group.getBoundingClientRect().top - pane.getBoundingClientRect().top;
  }

  function showTab(id, soon) {
    var btn = $('.tab[data-tab="' + cssq(id) + '"]');
    if (!btn) return;
    var group = btn.closest('[role="tablist"]') || document;
    $all(".tab[data-tab]", group).forEach(function (b) {
      var on = b.getAttribute("data-tab") === id;
      b.setAttribute("aria-selected", on ? "true" : "false");
      var panel = document.getElementById(b.getAttribute("data-tab"));
      if (panel) panel.hidden = !on;
    });
    if (group.classList && group.classList.contains("mtabs")) measureTab = id;
    var shown = document.getElementById(id);
    if (shown) { if (soon) drawPlotsSoon(shown); else drawPlots(shown); }
    if (shown) $all("[data-slot]", shown).forEach(loadSlot);
    if (id === "panel-pattern") loadPattern();
  }

  // ------------------------------------------------------------------ tabs loaded when shown
  // The diff, LLVM IR, assembly and Tune tabs hold the page's state's content, asked for
  // when the tab is shown: "data-slot" is its address relative to the state ("data-state",
  // the state's own address), "data-loaded-for" the state it shows. A new state (the step
  // event of a click, an undo, a step link: their answers do not carry these tabs) resets
  // them: a tab shown is loaded again at once, the others when shown. The access pattern
  // tab ("data-path") is loaded for the selected loop (loadPattern). A Tune tab whose search
  // is running keeps it; the new state's form comes when it ends (tuneSearchEnded).
  function slotUrl(el, path) {
    var state = el.getAttribute("data-state") || "";
    var q = state.indexOf("?");
    var base = q < 0 ? state : state.slice(0, q);
    path = path || el.getAttribute("data-slot") || el.getAttribute("data-path") || "";
    var pq = path.indexOf("?");
    var query = [q < 0 ? "" : state.slice(q + 1), pq < 0 ? "" : path.slice(pq + 1)]
      .filter(Boolean).join("&");
    return base + (pq < 0 ? path : path.slice(0, pq)) + (query ? "?" + query : "");
  }

  function tuneRunning(el) { return el.id === "tune-pane" && !!el.querySelector(".tunelive[hx-trigger]"); }

  function loadSlot(el) {
    var state = el.getAttribute("data-state");
    if (!state || el.getAttribute("data-loaded-for") === state || !el.isConnected ||
        el.closest("[hidden]") || tuneRunning(el)) return;
    el.setAttribute("data-loaded-for", state);
    htmx.ajax("GET", slotUrl(el), { source: el, target: el, swap: "innerHTML" });
  }

  // what a tab says while its content for the new state is on its way
  function waiting(el) {
    var p = document.createElement("p");
    p.className = "muted loading";
    p.textContent = el.getAttribute("data-waiting") || "loading…";
    el.textContent = "";
    el.appendChild(p);
  }

  function slotsFollow(state) {
    $all("[data-slot]").forEach(function (el) {
      el.setAttribute("data-state", state);
      if (el.getAttribute("data-loaded-for") === state) return;
      if (tuneRunning(el)) { el.setAttribute("data-next-url", slotUrl(el)); return; }
      el.removeAttribute("data-loaded-for");
      waiting(el);
      loadSlot(el);
    });
    var pp = $("#pattern-pane");
    if (pp && pp.getAttribute("data-state") !== state) {
      pp.setAttribute("data-state", state);
      waiting(pp);
      if (patternVisible()) loadPattern();
    }
  }

  // ------------------------------------------------------------------ copy link
  function copyLink() {
    var input = $("#share-url");
    var btn = $("#copy-link");
    if (!input) return;
    var done = function () { if (btn) { btn.textContent = "Copied"; setTimeout(function () { btn.textContent = "Copy link"; }, 1500); } };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, function () { input.select(); });
    } else {
      input.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* selected for manual copy */ }
    }
  }

  // ------------------------------------------------------------------ plots
  // A plot inside a hidden tab panel is drawn when its tab is shown (plotly sizes a plot
  // from its element, which has no size while hidden); one drawn earlier is resized, or, if
  // it was given a new figure meanwhile ("data-stale", see keepPlots), updated in place.
  function drawPlots(root) {
    if (!window.Plotly) return;
    var els = $all("[data-plotly]", root);
    if (root.matches && root.matches("[data-plotly]")) els.push(root);
    els.forEach(drawPlot);
  }

  var PLOT_CONFIG = { displayModeBar: false, responsive: true };

  function drawPlot(el) {
    if (!el.isConnected || el.closest("[hidden]")) return;
    var drawn = el.hasAttribute("data-drawn");
    if (drawn && !el.hasAttribute("data-stale")) {
      if (el.hasAttribute("data-pictured")) redraw(el); else Plotly.Plots.resize(el);
      return;
    }
    // a drawn plot given a figure it has shown before shows that figure's picture
    if (drawn && showKeptPicture(el)) return;
    try {
      var text = el.getAttribute("data-plotly");
      var fig = JSON.parse(text);
      // a drawn plot is updated (Plotly.react reuses its SVG); a new one is drawn
      (drawn ? Plotly.react : Plotly.newPlot)(el, fig.data, fig.layout, PLOT_CONFIG);
      dropPicture(el);
      figureShown(el);
      keepPictureLater(el, text);
    } catch (e) { el.textContent = "(the plot could not be drawn: " + e + ")"; }
  }

  function figureShown(el) {
    el.removeAttribute("data-stale");
    el.setAttribute("data-drawn", "1");
    // data-points: how many points the shown figure has (tests and benchmarks wait on it)
    var next = el.getAttribute("data-next-points");
    if (next !== null) { el.setAttribute("data-points", next); el.removeAttribute("data-next-points"); }
    // the click's history entry waited for its plots (see historyEntry)
    if (pendingHistory.length) setTimeout(writeHistoryWhenQuiet, 0);
  }

  // ------------------------------------------------------------------ pictures of drawn figures
  // Drawing a figure with plotly takes 15-40 ms per plot: most of a click that returns to a
  // state seen before (undo, redo, a step link, a lesson's Previous). A figure plotly has
  // drawn is kept as a picture once the page is quiet and idle, or when the page is left —
  // the SVG plotly drew, without hover labels — in the tab's session storage, under the
  // plot's id, its width and the figure's exact JSON text. A drawn plot given a figure it
  // has a picture of shows the picture over itself at once (a few ms, in the swap's task);
  // plotly redraws the live plot under it only when it
  // is needed: the pointer or the focus enters the plot, the window is resized, its tab is
  // shown again, or another figure comes (then the picture goes). The picture is what plotly
  // drew for that very figure at that very width; it is our own page's SVG, put back as it
  // was serialised (the page's CSP forbids inline scripts in any case).
  var PICTURES = "plotpic1:";       // (plotly.js or the plots' CSS changed: change the prefix)
  var PICTURES_INDEX = PICTURES + "index";
  var PICTURES_MAX = 160;           // about 20k characters each: 80 states of a session
  var PICTURE_MAX_CHARS = 100000;   // (a big heat map is drawn, not kept)
  var whenIdle = window.requestIdleCallback ? window.requestIdleCallback.bind(window)
    : function (fn) { return setTimeout(fn, 50); };
  var pictureStore = (function () {
    try {
      var s = window.sessionStorage;
      s.setItem(PICTURES + "probe", "1");
      s.removeItem(PICTURES + "probe");
      return s;
    } catch (e) { return null; }    // storage off or full: every figure is drawn
  })();

  function fnv1a(text) {
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 0x01000193); }
    return (h >>> 0).toString(36);
  }

  // (the width plotly drew the live plot at: reading the element's own would lay out the
  // page in the middle of a swap)
  function pictureKey(el, text) {
    var width = el._fullLayout && el._fullLayout.width;
    return PICTURES + el.id + ":" + (width || el.clientWidth) + ":" + fnv1a(text);
  }

  // A drawn plot on screen shows the kept picture of its new figure, if there is one (then
  // true); the picture goes to the end of the line of those to drop first (in idle time).
  function showKeptPicture(el) {
    if (!pictureStore || !el.id || !el.isConnected || el.closest("[hidden]")) return false;
    var text = el.getAttribute("data-plotly");
    var key = pictureKey(el, text);
    var v;
    try { v = pictureStore.getItem(key); } catch (e) { return false; }
    var cut = v ? v.indexOf("\u0000") : -1;
    if (cut <= 0 || v.slice(0, cut) !== text) return false;          // only the very figure
    showPicture(el, v.slice(cut + 1));
    figureShown(el);
    whenIdle(function () {
      var index = pictureIndex();
      var at = index.indexOf(key);
      if (at < 0 || at === index.length - 1) return;
      index.splice(at, 1);
      index.push(key);
      try { pictureStore.setItem(PICTURES_INDEX, JSON.stringify(index)); } catch (e) { /* kept as it was */ }
    }, { timeout: 1000 });
    return true;
  }

  function pictureIndex() {
    try { return JSON.parse(pictureStore.getItem(PICTURES_INDEX) || "[]"); } catch (e) { return []; }
  }

  function keepPicture(el, text) {
    var live = el.querySelector(":scope > .plot-container");
    if (!pictureStore || !el.id || !live) return;
    // (no hover label, zoom box or drag cover in the picture)
    var TRANSIENT = ".hoverlayer > *, .zoomlayer > *, .dragcover";
    var copy = live.querySelector(TRANSIENT) ? live.cloneNode(true) : live;
    if (copy !== live) $all(TRANSIENT, copy).forEach(function (n) { n.parentNode.removeChild(n); });
    var svg = copy.outerHTML;
    if (svg.length > PICTURE_MAX_CHARS) return;
    var key = pictureKey(el, text);
    var index = pictureIndex().filter(function (k) { return k !== key; });
    for (var attempt = 0; attempt < 2; attempt++) {
      // the oldest pictures go first: past the limit, and half of them when storage is full
      var drop = attempt ? Math.ceil(index.length / 2) : Math.max(0, index.length + 1 - PICTURES_MAX);
      index.splice(0, drop).forEach(function (k) { try { pictureStore.removeItem(k); } catch (e) { /* gone */ } });
      try {
        pictureStore.setItem(key, text + "\u0000" + svg);
        pictureStore.setItem(PICTURES_INDEX, JSON.stringify(index.concat([key])));
        return;
      } catch (e) { /* full: try once more with fewer pictures */ }
    }
  }

  // A figure just drawn is kept once the page is quiet — no request out, no measurement body
  // waiting for its new answer (keeping one takes a few ms, and the cores are better left to
  // the step being measured) — and idle, if it is still on screen by then.
  function pageQuiet() {
    return !document.querySelector(".htmx-request, #measure-body.stale, #cache-body.stale");
  }

  var toKeep = [];                  // [plot, figure text] drawn, not kept yet

  function stillShows(el, text) {
    return el.isConnected && !el.closest("[hidden]") && !el.hasAttribute("data-pictured") &&
      !el.hasAttribute("data-stale") && el.getAttribute("data-plotly") === text;
  }

  function keepPictureLater(el, text, tries) {
    if (!pictureStore || !el.id) return;
    if (!tries) toKeep.push([el, text]);
    whenIdle(function () {
      var mine = toKeep.filter(function (p) { return p[0] === el && p[1] === text; });
      if (!mine.length) return;                     // kept already (the page was left)
      if (stillShows(el, text) && !pageQuiet() && (tries || 0) < 20) {
        setTimeout(function () { keepPictureLater(el, text, (tries || 0) + 1); }, 100);
        return;
      }
      toKeep = toKeep.filter(function (p) { return mine.indexOf(p) < 0; });
      if (stillShows(el, text)) keepPicture(el, text);
    }, { timeout: 1000 });
  }

  // the page is left (a link, a reload) before it was quiet: the figures on screen are kept now
  window.addEventListener("pagehide", function () {
    var pending = toKeep;
    toKeep = [];
    pending.forEach(function (p) { if (stillShows(p[0], p[1])) keepPicture(p[0], p[1]); });
  });

  // The picture lives in a shadow root inside the plot: plotly looks for its own parts
  // (.plot-container, .main-svg, ...) among the plot's descendants and must not find the
  // picture's; plotly's own style sheet is copied in, so that the picture looks the same.
  function showPicture(el, svg) {
    var host = el.querySelector(":scope > .plot-picture");
    if (!host) {
      host = document.createElement("div");
      host.className = "plot-picture";
      host.setAttribute("aria-hidden", "true");
      host.attachShadow({ mode: "open" });
      el.appendChild(host);
    }
    host.shadowRoot.innerHTML = "<style>" + plotlyCss() + "</style>" +
      '<div class="js-plotly-plot">' + svg + "</div>";
    el.setAttribute("data-pictured", "1");
  }

  // plotly's style rules that a picture needs (plotly adds them to a style element of its own,
  // through the CSSOM); not those of its controls (mode bar, tooltips, cursors, dialogs)
  var plotlyRules = "";
  var CONTROL_RULE = /modebar|notifier|cloud-dialog|data-title|cursor|select-outline|ease-bg|input|button/;
  function plotlyCss() {
    if (plotlyRules) return plotlyRules;
    var el = document.getElementById("plotly.js-style-global");
    try {
      plotlyRules = Array.prototype.map.call(el.sheet.cssRules, function (r) { return r.cssText; })
        .filter(function (t) { return !CONTROL_RULE.test(t); }).join("\n");
    } catch (e) { /* none yet */ }
    return plotlyRules;
  }

  function dropPicture(el) {
    var pic = el.querySelector(":scope > .plot-picture");
    if (pic) el.removeChild(pic);
    el.removeAttribute("data-pictured");
  }

  // the live plot under a picture is redrawn with the plot's figure; the picture goes
  function redraw(el) {
    if (!el.hasAttribute("data-pictured")) return;
    try {
      var fig = JSON.parse(el.getAttribute("data-plotly"));
      Plotly.react(el, fig.data, fig.layout, PLOT_CONFIG);
    } catch (e) { return; }   // (the picture stays: it shows the same figure)
    dropPicture(el);
  }

  function redrawUnder(ev) {
    var el = ev.target && ev.target.closest && ev.target.closest("[data-pictured]");
    if (el) redraw(el);
  }
  document.addEventListener("pointerover", redrawUnder, true);
  document.addEventListener("focusin", redrawUnder, true);
  window.addEventListener("resize", function () { $all("[data-pictured]").forEach(redraw); });

  // Plots that arrive with a swap are drawn after the swapped panes have been painted, one
  // plot per task: drawing a plot takes tens of milliseconds, and the program, diagram and
  // trace panes of a click must not wait for it.
  var UNDRAWN = "[data-plotly]:not([data-drawn]), [data-plotly][data-stale]";
  function undrawnPlots(root) {
    var els = $all(UNDRAWN, root);
    if (root.matches && root.matches(UNDRAWN)) els.push(root);
    return els;
  }

  function drawPlotsSoon(root) {
    if (!window.Plotly) return;
    // a drawn plot with a picture of its new figure shows it at once (a few ms)
    var els = undrawnPlots(root).filter(function (el) {
      return !(el.hasAttribute("data-drawn") && showKeptPicture(el));
    });
    if (!els.length) return;
    var started = false;
    function start() {
      if (started) return;
      started = true;
      // (a plot drawn meanwhile, see drawPlotsNow, is not drawn again)
      els.forEach(function (el) { setTimeout(function () { if (el.matches(UNDRAWN)) drawPlot(el); }, 0); });
    }
    requestAnimationFrame(start);
    setTimeout(start, 50);    // a page in the background gets no animation frames
  }

  // A measurement body's own answer (its new point, after a click) brings nothing else to
  // paint first: its plots are drawn at once, in the task of the swap, not a frame later.
  function drawPlotsNow(root) {
    if (window.Plotly) undrawnPlots(root).forEach(drawPlot);
  }

  // Drawn plots survive swaps. A swap that replaces content holding drawn plots (a
  // measurement body's new answer, a pane swapped out-of-band) would throw away their SVG
  // (thousands of nodes, each cleaned up by htmx) and draw every plot anew. Instead the drawn
  // plots are taken out before the swap (keepPlots), put back in place of the new content's
  // plot of the same id with its figure (adoptPlots), and updated with Plotly.react; the
  // plots the new content does not have are released after the swap (releaseKept).
  var kept = {};

  function keepPlots(target) {
    if (!target || !target.querySelectorAll || !window.Plotly) return;
    $all("[data-plotly][data-drawn][id]", target).forEach(function (el) {
      if (kept[el.id] && kept[el.id] !== el) release(kept[el.id]);
      kept[el.id] = el;
      el.parentNode.removeChild(el);
    });
  }

  // (returns root, or the kept plot that took its place)
  function adoptPlots(root) {
    var els = $all("[data-plotly][id]", root);
    if (root.matches && root.matches("[data-plotly][id]")) els.push(root);
    els.forEach(function (el) {
      var old = kept[el.id];
      if (!old || old === el || el.hasAttribute("data-drawn") || !el.parentNode) return;
      delete kept[el.id];
      old.setAttribute("data-plotly", el.getAttribute("data-plotly"));
      if (el.hasAttribute("data-points")) old.setAttribute("data-next-points", el.getAttribute("data-points"));
      old.setAttribute("data-stale", "1");
      el.parentNode.replaceChild(old, el);
      if (el === root) root = old;
    });
    return root;
  }

  // htmx cleans up every element of the content a swap replaces (two events per element,
  // most of a click's swap time); the parts of that content without an htmx attribute have
  // nothing to clean up, and are removed at once before the swap (prune).
  var HX_ELT = "[hx-get],[hx-post],[hx-put],[hx-patch],[hx-delete],[hx-trigger],[hx-swap-oob]," +
    "[hx-ext],[hx-boost],[hx-sse],[hx-ws],[data-hx-get],[data-hx-post],[data-hx-trigger]";

  function prune(el) {
    if (!el.querySelector(HX_ELT)) { el.textContent = ""; return; }   // all of it at once
    var kids = el.children;
    for (var i = kids.length - 1; i >= 0; i--) {
      var c = kids[i];
      if (c.matches(HX_ELT) || c.querySelector(HX_ELT)) prune(c);
      else el.removeChild(c);
    }
  }

  function beforeReplace(target) {
    if (!target || !target.querySelectorAll) return;
    keepPlots(target);
    prune(target);
  }

  function release(el) { try { Plotly.purge(el); } catch (e) { /* already gone */ } }

  function releaseKept() {
    Object.keys(kept).forEach(function (id) { release(kept[id]); delete kept[id]; });
  }

  // ------------------------------------------------------------------ a new state's measurements
  // An answer that moves the page to another state (a click, an undo, a step link) carries the
  // event "explorer:step" (its HX-Trigger header, handled before its panes are swapped): the
  // new state's measurement and cache bodies' addresses, and whether the answer carries them.
  // The others are asked for right after the answer's panes are swapped (the next task: the
  // server has been measuring the new state since it applied the step, and sending two
  // requests took 4-5 ms of the swap's task); meanwhile the previous state's bodies stay,
  // dimmed. An answer or a poll for another state than the latest is dropped (see the
  // beforeSwap hook).
  var BODIES = ["measure", "cache"];

  document.addEventListener("explorer:step", function (ev) {
    var d = ev.detail || {};
    BODIES.forEach(function (kind) {
      var body = document.getElementById(kind + "-body");
      var url = d[kind];
      if (!body || typeof url !== "string") return;
      // (a request still out for the previous state is not aborted — htmx would log that as
      // an error — its answer is dropped; htmx sends this one when that one has answered)
      body.setAttribute("data-url", url);
      if (d[kind + "_inline"]) { body.classList.remove("stale"); return; }
      body.classList.add("stale");
      setTimeout(function () {
        // (another state's answer came meanwhile: its own event asks for its bodies)
        if (body.isConnected && body.getAttribute("data-url") === url)
          htmx.ajax("GET", url, { source: body, target: body, swap: "innerHTML" });
      }, 0);
    });
    // the tabs loaded when shown follow the new state (after the swap, as the bodies)
    if (typeof d.url === "string") setTimeout(function () { slotsFollow(d.url); }, 0);
  });

  function isBody(el) { return el && (el.id === "measure-body" || el.id === "cache-body"); }

  // an answer for a measurement body that is not for the state the body now shows
  function forAnotherState(detail) {
    var tgt = detail.target, cfg = detail.requestConfig;
    if (!isBody(tgt) || !cfg || !tgt.hasAttribute("data-url")) return false;
    return cfg.path !== tgt.getAttribute("data-url");
  }

  // ------------------------------------------------------------------ measuring ahead
  // The toolbar form the learner is filling in names the program their click will make: it
  // is sent to /intent (the same fields as /apply), and the server measures that program
  // while they finish — only when its workers are idle; the answer is an empty 204 — so the
  // click usually finds its runtime and cache points measured. Sent a moment after a choice
  // is made (a select, a committed field) or after a pause in typing, when the pointer rests
  // on the form's button or the keyboard focus reaches it, and when the pointer is pressed
  // on it (the click's own request follows a moment later). A form sent once is not sent
  // again unchanged; the click itself cancels a pending one (a guess sent along with its
  // click would only make the server apply the step twice).
  var INTENT_CHOICE_MS = 100;
  var INTENT_PAUSE_MS = 150;
  var INTENT_REST_MS = 80;      // the pointer on a button (not passing over it), the focus
  // pending guesses: "edit" (a choice, typing), "rest" (the pointer or the focus on a button)
  var intentTimers = { edit: null, rest: null };
  var intentSent = "";

  function sendIntent(form) {
    if (!form.isConnected || !formReady(form)) return;
    var m = /^(\/explore\/[^\/?#]+)\/apply$/.exec(form.getAttribute("hx-post") || "");
    if (!m) return;
    var url = m[1] + "/intent";
    var data = new FormData(form);
    // the session's state, written once for every form of the toolbar (its hx-include)
    $all("#toolbar-state input[name]").forEach(function (i) {
      if (!data.has(i.name)) data.append(i.name, i.value);
    });
    var body = new URLSearchParams(data).toString();
    if (body === intentSent) return;
    intentSent = body;
    try {
      fetch(url, { method: "POST", body: body, credentials: "same-origin",
                   headers: { "Content-Type": "application/x-www-form-urlencoded" } })
        .catch(function () { /* a guess: nothing to report */ });
    } catch (e) { /* no fetch: no guess */ }
  }

  // A form to guess from: its button is enabled — not a primitive the selection does not
  // allow, and not a form whose click is on its way (htmx disables the button meanwhile;
  // Chromium fires "change" on the field being typed in after the form's submit event).
  function formReady(form) {
    var btn = form.querySelector("button[type=submit]");
    return !!btn && !btn.disabled;
  }

  function cancelIntent(kind) {
    clearTimeout(intentTimers[kind]);
    intentTimers[kind] = null;
  }

  function intentLater(kind, form, ms) {
    cancelIntent(kind);
    if (formReady(form))
      intentTimers[kind] = setTimeout(function () { intentTimers[kind] = null; sendIntent(form); }, ms);
  }

  function noPendingIntent() { cancelIntent("edit"); cancelIntent("rest"); }

  function toolbarForm(ev) {
    var t = ev.target;
    return t && t.closest ? t.closest("#toolbar form.prim") : null;
  }

  document.addEventListener("change", function (ev) {
    var form = toolbarForm(ev);
    if (form) intentLater("edit", form, INTENT_CHOICE_MS);
  });
  document.addEventListener("input", function (ev) {
    var form = toolbarForm(ev);
    if (form) intentLater("edit", form, INTENT_PAUSE_MS);
  });
  function onButton(ev) {
    var form = toolbarForm(ev);
    return form && ev.target.closest("button[type=submit]") ? form : null;
  }
  function intentOnRest(ev) {
    var form = onButton(ev);
    if (form) intentLater("rest", form, INTENT_REST_MS);
  }
  document.addEventListener("pointerover", intentOnRest);
  document.addEventListener("focusin", intentOnRest);
  document.addEventListener("pointerout", function (ev) {
    // the pointer left the button before resting on it (not for one of its children)
    var btn = onButton(ev) && ev.target.closest("button[type=submit]");
    var to = ev.relatedTarget;
    if (btn && !(to && btn.contains(to))) cancelIntent("rest");
  });
  document.addEventListener("pointerdown", function (ev) {
    var form = onButton(ev);
    if (form) { noPendingIntent(); sendIntent(form); }
  });
  document.addEventListener("htmx:beforeRequest", function (ev) {
    // the click's own request: a guess still waiting to be sent is not needed any more
    var elt = ev.detail && ev.detail.elt;
    // (the focus and the caret move right after the request is sent: moving the focus
    // lays the page out, 1-2 ms the request need not wait for; the answer takes longer)
    if (elt && elt.matches && elt.matches("#toolbar form.prim")) {
      noPendingIntent();
      setTimeout(function () { keepFocusOutOfReplacedPanes(); dropCaretInPanes(); }, 0);
    } else if (elt && elt.matches && elt.matches("a[data-nav]")) {
      setTimeout(dropCaretInPanes, 0);
    }
  });

  // Clicking the program text (to select a loop or a block) leaves the page's caret in it.
  // The answer replaces that text; removing the nodes that hold the caret made the browser
  // update it in the middle of the swap (about 1.5 ms of a click, measured). A caret in a
  // pane the answer replaces is let go when the request is sent (it shows nothing; a
  // selected range of text, to copy, stays).
  var REPLACED_PANES = "#program-pane, #diagram-pane, #trace-pane, #toolbar";

  function dropCaretInPanes() {
    var s = window.getSelection && window.getSelection();
    if (!s || s.type !== "Caret" || !s.anchorNode) return;
    var at = s.anchorNode.nodeType === 1 ? s.anchorNode : s.anchorNode.parentElement;
    if (at && at.closest(REPLACED_PANES)) s.removeAllRanges();
  }

  // The answer to a primitive's click replaces the toolbar, and with it the element that
  // has the focus (the pressed button, the field Enter was pressed in, or the node of the
  // program or the diagram last clicked). Removing a focused element in the middle of the
  // swap makes the browser lay out the half-swapped page on the spot (a few ms of the
  // click) and leaves the focus on the page's body. So once the request is sent (while
  // the server works on it) the focus moves to the toolbar's row, which stays; a refused
  // step (the panes stay) gets it back where it was.
  var focusBeforeApply = null;

  function keepFocusOutOfReplacedPanes() {
    var row = document.querySelector(".toolrow");
    var active = document.activeElement;
    if (!row || !active || !active.closest || !active.closest(REPLACED_PANES)) return;
    focusBeforeApply = active;
    row.focus({ preventScroll: true });
  }

  document.addEventListener("htmx:afterRequest", function (ev) {
    var elt = ev.detail && ev.detail.elt;
    if (!focusBeforeApply || !elt || !elt.matches || !elt.matches("#toolbar form.prim")) return;
    var was = focusBeforeApply;
    focusBeforeApply = null;
    if (was.isConnected && document.activeElement === document.querySelector(".toolrow"))
      was.focus({ preventScroll: true });
  });

  // ------------------------------------------------------------------ htmx hooks
  document.addEventListener("htmx:beforeSwap", function (ev) {
    if (forAnotherState(ev.detail)) { ev.detail.shouldSwap = false; return; }
    var st = ev.detail.xhr.status;
    // refusals (422) and bad requests come back as a message box: show it
    if (st >= 400 && st < 600) {
      var tgt = ev.detail.target;
      if (tgt && (tgt.id === "message" || tgt.id === "toolbar" || tgt.closest("#measure-pane") || tgt.closest(".codeview"))) {
        ev.detail.shouldSwap = true;
        ev.detail.isError = false;
        if (tgt.id !== "message") {
          ev.detail.target = $("#message");
        }
      }
    }
    // a primitive's answer that holds just the message and the panes: swapped here at once
    var panes = ev.detail.shouldSwap && clickPanes(ev.detail);
    if (panes) {
      ev.detail.shouldSwap = false;
      swapClickPanes(ev.detail, panes);
      return;
    }
    if (ev.detail.shouldSwap) beforeReplace(ev.detail.target);
    // a body's own answer: its plots are drawn at once (htmx.onLoad, drawPlotsNow)
    if (ev.detail.shouldSwap && isBody(ev.detail.target) && ev.detail.elt === ev.detail.target)
      ev.detail.target.setAttribute("data-draw-now", "1");
  });
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    if (ev.detail.shouldSwap) beforeReplace(ev.detail.target);
  });

  // ------------------------------------------------------------------ a click's panes, at once
  // The answer to a primitive's click is the message (the form's target) and the panes the
  // new state changes, each out-of-band. htmx swaps an out-of-band element through its
  // general machinery (a copy of each pane, settling, events for every element swapped so
  // far after each one): 7-10 ms of the click's 15-20 ms in the page (Chromium on a 2-core
  // machine, the course's clicks). Such an answer is swapped here instead when it holds just
  // the message, the panes of CLICK_PANES and the measurement bodies of CLICK_BODIES (a
  // state measured before): each pane replaces its own and each body's content the body's
  // (after beforeReplace, as htmx's own swaps: its drawn plots are kept, see keepPlots),
  // htmx processes the new content, and the events the page's scripts listen to are sent as
  // htmx sends them — htmx:load (htmx.onLoad: the plots adopted and drawn), htmx:afterSwap
  // and htmx:afterSettle for every element swapped, htmx:pushedIntoHistory for its
  // HX-Push-Url (the history entry, see historyEntry). Any other answer (a refusal, a
  // step link's, one with other headers for htmx) is htmx's.
  var CLICK_PANES = { statebar: 1, toolbar: 1, "program-pane": 1, "diagram-pane": 1, "trace-pane": 1,
    // (a lesson's "try it yourself" answer: static/lessons.js sends the form to the lesson)
    "lesson-topbar": 1, "lesson-config": 1, "lesson-pane": 1, "diff-pane": 1 };
  var CLICK_BODIES = { "measure-body": 1, "cache-body": 1 };
  var HTMX_HEADERS = ["HX-Location", "HX-Redirect", "HX-Refresh", "HX-Retarget", "HX-Reswap",
    "HX-Reselect", "HX-Replace-Url", "HX-Trigger-After-Swap", "HX-Trigger-After-Settle"];

  // the answer's parts {message, panes: [[element, "outer" | "inner"], ...]} when it can
  // be swapped here, else null
  function clickPanes(detail) {
    var xhr = detail.xhr, cfg = detail.requestConfig, target = detail.target;
    if (!xhr || xhr.status !== 200 || typeof detail.serverResponse !== "string") return null;
    if (!cfg || cfg.verb !== "post" ||
        !/^\/(explore|lessons)\/[^\/?#]+\/apply(\?[^#]*)?$/.test(cfg.path || "")) return null;
    if (!target || target.id !== "message" || !target.isConnected) return null;
    if (HTMX_HEADERS.some(function (h) { return xhr.getResponseHeader(h) !== null; })) return null;
    if (/hx-swap-oob="(?!true"|innerHTML")/.test(detail.serverResponse)) return null;
    var tpl = document.createElement("template");
    tpl.innerHTML = detail.serverResponse;
    var nodes = tpl.content.childNodes, message = null, panes = [], seen = {};
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      if (n.nodeType === 3 && !n.data.trim()) continue;          // (white space between panes)
      if (n.nodeType !== 1) return null;
      var oob = n.getAttribute("hx-swap-oob");
      if (oob === null) {
        if (message || n.id !== "message") return null;
        message = n;
      } else {
        var how = oob === "true" && CLICK_PANES[n.id] ? "outer"
          : oob === "innerHTML" && CLICK_BODIES[n.id] ? "inner" : null;
        if (!how || seen[n.id] || !document.getElementById(n.id)) return null;
        seen[n.id] = 1;
        panes.push([n, how]);
      }
    }
    return message ? { message: message, panes: panes } : null;
  }

  function swapClickPanes(detail, parts) {
    var active = document.activeElement;
    var swapped = [], loaded = [];     // (a body's new content: htmx:load only, as htmx's)
    function put(old, el) {
      beforeReplace(old);
      old.parentNode.replaceChild(el, old);
      swapped.push(el);
    }
    put(detail.target, parts.message);
    parts.panes.forEach(function (part) {
      var el = part[0], old = document.getElementById(el.id);
      if (part[1] === "outer") {
        el.removeAttribute("hx-swap-oob");
        put(old, el);
        return;
      }
      beforeReplace(old);
      while (old.firstChild) old.removeChild(old.firstChild);
      while (el.firstChild) {
        var kid = el.firstChild;
        old.appendChild(kid);
        if (kid.nodeType === 1) loaded.push(kid);
      }
    });
    // (as htmx: the focus goes back to the element that replaced the focused one)
    if (active && active.id && !active.isConnected) {
      var again = document.getElementById(active.id);
      if (again) again.focus({ preventScroll: true });
    }
    var all = swapped.concat(loaded);
    all.forEach(function (el) { htmx.process(el); });
    all.forEach(function (el) { if (el.isConnected) htmx.trigger(el, "htmx:load"); });
    var info = { xhr: detail.xhr, target: detail.target, requestConfig: detail.requestConfig };
    ["htmx:afterSwap", "htmx:afterSettle"].forEach(function (name) {
      swapped.forEach(function (el) {
        if (el.isConnected) htmx.trigger(el, name, Object.assign({}, info));
      });
    });
    var url = detail.xhr.getResponseHeader("HX-Push-Url");
    if (url && url !== "false") htmx.trigger(document.body, "htmx:pushedIntoHistory", { path: url });
  }

  // A search kept on the Tune tab across clicks has ended: the tab's form is for the program
  // the search started from, and the page has moved on. The tab loads the page's program's
  // form, and the ended search's results stay below it.
  function tuneSearchEnded(live) {
    var pane = document.getElementById("tune-pane");
    if (!pane || !live.isConnected || !pane.contains(live) || live.hasAttribute("hx-trigger")) return;
    var next = pane.getAttribute("data-next-url");
    if (!next) return;
    pane.removeAttribute("data-next-url");
    pane.setAttribute("data-loaded-for", pane.getAttribute("data-state") || "");
    // the results are taken out while the tab is swapped (with their drawn plot), then put
    // back under the new form
    live.parentNode.removeChild(live);
    htmx.ajax("GET", next, { source: pane, target: pane, swap: "innerHTML" }).then(function () {
      var slot = document.getElementById("tune-live");
      if (slot) slot.appendChild(live);
    });
  }
  document.addEventListener("htmx:afterSwap", function (ev) {
    if (isBody(ev.detail.target)) ev.detail.target.classList.remove("stale");
    if (ev.detail.target && ev.detail.target.id === "measure-body") markVectorizedLoops();
  });
  document.addEventListener("htmx:afterRequest", function (ev) {
    // a failed request (not a superseded one) leaves the body as it was: undimmed
    var elt = ev.detail.elt;
    if (isBody(elt) && !ev.detail.successful && ev.detail.xhr && ev.detail.xhr.status) elt.classList.remove("stale");
  });
  document.addEventListener("htmx:responseError", function () {
    var msg = $("#message");
    if (msg) { msg.className = "message msg-error"; msg.textContent = "The server could not answer this request. Try again."; }
  });
  document.addEventListener("htmx:sendError", function () {
    var msg = $("#message");
    if (msg) { msg.className = "message msg-error"; msg.textContent = "The server cannot be reached. Is it still running?"; }
  });
  function reveal(el) {
    if (el && el.scrollIntoView) el.scrollIntoView({ block: "nearest", inline: "nearest" });
  }

  // htmx:afterSettle comes once per swapped element (a click swaps a dozen panes): the
  // page-wide work runs once, after the last of them (a microtask: before the next paint)
  var settling = null;
  document.addEventListener("htmx:afterSettle", function (ev) {
    var elt = ev.detail && ev.detail.elt;
    if (isBody(elt)) elt.removeAttribute("data-draw-now");
    // (an answer that replaced a search's progress settles on the new element, ev.target;
    // the tab is swapped once htmx has finished with that answer)
    var live = ev.target;
    if (live instanceof Element && live.classList.contains("tunelive"))
      setTimeout(function () { tuneSearchEnded(live); }, 0);
    if (!settling) {
      settling = { reveal: false };
      Promise.resolve().then(afterSettled);
    }
    // a refusal names loops/blocks: bring the first of them into view in both panes
    if (elt && elt.id === "message" && elt.getAttribute("data-highlight")) settling.reveal = true;
    // keyboard users: after selecting with Enter, continue in the toolbar
    if (focusToolbar && elt && elt.id === "toolbar") {
      focusToolbar = false;
      var first = $("#toolbar form.prim input:not([type=hidden]):not([disabled]), #toolbar form.prim select:not([disabled]), #toolbar form.prim button:not([disabled])");
      if (first) first.focus();
    }
  });

  function afterSettled() {
    var done = settling;
    settling = null;
    releaseKept();
    refreshHighlights();
    if (done && done.reveal) {
      reveal($("#diagram-pane .dnode.offending"));
      reveal($("#program-pane .node.offending"));
    }
  }

  // The page's history: htmx's own history handling is off (historyEnabled: false in
  // base.html) because it wrote the history twice per click (it marked the current entry,
  // then pushed the new one) inside the swap. The new address is written once per click;
  // the current entry is marked as htmx's once, so that going back to it reloads it (htmx's
  // popstate handler: its history cache is empty, historyCacheSize 0). Then the event
  // "explorer:pushed" (present.js keeps its /present address on it).
  //
  // It is written once the click's measurements are on the page (both bodies answered) and
  // their plots drawn, or after HISTORY_WAIT_MS at most, not at once: a history entry costs
  // the browser about 20 ms of CPU outside the page (measured in Chromium on a 2-core
  // machine: its session history and history database), and on such a machine that CPU was
  // taken from the worker measuring the click's step (paired runs: the runtime point 21 ms
  // and the cache point 30 ms sooner, p50, without it). When the answer carries the
  // measurements (stored, or measured while the learner filled the form), writing it at once
  // (a task after the swap) ran before the panes were painted and the plots drawn: 6-30 ms
  // of the page's own thread (Chromium trace of lesson 1's clicks). The share link of the
  // statebar is the new one at once. Entries are written in order: a new one writes those
  // still waiting first; leaving the page writes them too.
  var HISTORY_WAIT_MS = 1000;
  var pendingHistory = [];
  var historyTimer = null;

  function historyEntry(replace, path) {
    pendingHistory.push({ replace: replace, path: path });
    clearTimeout(historyTimer);
    historyTimer = setTimeout(writeHistory, HISTORY_WAIT_MS);
    // (after the swap's task in any case: the panes are painted first)
    if (!measuring()) setTimeout(writeHistoryWhenQuiet, 0);
  }

  function measuring() { return !!document.querySelector("#measure-body.stale, #cache-body.stale"); }

  // a plot on screen has a figure it has not shown yet (drawn a task or a frame later)
  function plotsWaiting() {
    return !!window.Plotly && undrawnPlots(document).some(function (el) { return el.isConnected && !el.closest("[hidden]"); });
  }

  function writeHistoryWhenQuiet() { if (!measuring() && !plotsWaiting()) writeHistory(); }

  function writeHistory() {
    clearTimeout(historyTimer);
    historyTimer = null;
    var todo = pendingHistory;
    pendingHistory = [];
    todo.forEach(function (e) {
      if (!(history.state && history.state.htmx)) history.replaceState({ htmx: true }, document.title, location.href);
      if (e.replace) history.replaceState({ htmx: true }, "", e.path);
      else history.pushState({ htmx: true }, "", e.path);
      document.dispatchEvent(new CustomEvent("explorer:pushed", { detail: { path: e.path } }));
    });
  }
  // a body answered (or failed): once neither is waiting, the waiting entries are written
  // (a task later: the new point is painted first)
  function bodyAnswered(ev) {
    if (pendingHistory.length && isBody(ev.detail && ev.detail.elt)) setTimeout(writeHistoryWhenQuiet, 0);
  }
  document.addEventListener("htmx:afterRequest", bodyAnswered);   // (after its swap)
  window.addEventListener("pagehide", writeHistory);
  // the mouse's back and forward buttons and Alt+Left/Right reach the page before the
  // browser goes back: the entries waiting are written first, so "back" undoes one click
  document.addEventListener("mousedown", function (ev) { if (ev.button === 3 || ev.button === 4) writeHistory(); }, true);
  document.addEventListener("keydown", function (ev) {
    if (ev.altKey && (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) writeHistory();
  }, true);
  // going back or forward meanwhile: the entries not written yet are for states left behind
  window.addEventListener("popstate", function () {
    pendingHistory = [];
    clearTimeout(historyTimer);
    historyTimer = null;
  });
  document.addEventListener("htmx:pushedIntoHistory", function (ev) { writeHistory(); historyEntry(false, ev.detail.path); });
  document.addEventListener("htmx:replacedInHistory", function (ev) { writeHistory(); historyEntry(true, ev.detail.path); });

  // ------------------------------------------------------------------ a withdrawn GPU step
  // The worker's result for the step just made says the emulator found a data race: the
  // measurement body holds the refusal (#withdrawn, app.web.gpu_refusals.withdrawal). The
  // page goes back to the state before the step, as an undo that leaves no trace of it
  // (the trace without the step; the step's history entry, if written, replaced), and the
  // message pane shows the race's sentence with the blocks touching the buffer highlighted.
  function withdrawStep(el) {
    if (!el || el.hasAttribute("data-withdrawing") || !document.querySelector("main.workspace")) return;
    el.setAttribute("data-withdrawing", "1");
    var back = el.getAttribute("data-withdraw"), state = el.getAttribute("data-state");
    var text = el.getAttribute("data-text") || "", hl = el.getAttribute("data-highlight") || "";
    pendingHistory = pendingHistory.filter(function (e) { return e.path !== state; });
    htmx.ajax("GET", back, { target: "#message", swap: "outerHTML" }).then(function () {
      var m = document.getElementById("message");
      if (!m) return;
      m.className = "message msg-refused";
      m.setAttribute("data-highlight", hl);
      m.innerHTML = "<strong>Refused.</strong> <span class=\"msg-text\"></span>";
      m.querySelector(".msg-text").textContent = text + ".";
      refreshHighlights();
      if (location.pathname + location.search === state) history.replaceState({ htmx: true }, "", back);
    });
  }

  // ------------------------------------------------------------------ loops LLVM vectorized
  // The measurement body of the current step lists the loops the schedule left
  // unvectorized that LLVM's vectorizer made vector code of on its own (#llvm-vectorized,
  // from the worker's build: app.service.timing, engine.codegen.loop_lines). Each such
  // loop's line in the program pane gets a badge "vectorized by LLVM (width N)"; the
  // badges are made again whenever the program pane or the measurement body changes
  // (a body still showing the previous state, dimmed, gives none).
  function markVectorizedLoops() {
    var pane = document.getElementById("program-pane");
    if (!pane) return;
    $all(".llvm-vec-badge", pane).forEach(function (b) { b.parentNode.removeChild(b); });
    var body = document.getElementById("measure-body");
    var facts = body && !body.classList.contains("stale") ? $("#llvm-vectorized", body) : null;
    if (!facts) return;
    var loops;
    try { loops = JSON.parse(facts.getAttribute("data-loops") || "[]"); } catch (e) { return; }
    var marked = [];
    loops.forEach(function (v) {
      if (!v || typeof v.loop !== "string") return;
      $all('[data-loop="' + cssq(v.loop) + '"]', pane).forEach(function (node) {
        var line = node.closest(".line");
        if (!line || marked.indexOf(line) >= 0) return;
        marked.push(line);
        var badge = document.createElement("span");
        badge.className = "llvm-vec-badge";
        badge.setAttribute("data-loop", v.loop);
        // (a line of several loops, T.grid(...): the badge names its loop)
        var several = line.querySelectorAll("[data-loop]").length > 1;
        // (the words are the badge's generated content, not text of the program: copying
        // the program or reading its text never picks them up)
        badge.setAttribute("data-label", (several ? v.loop + ": " : "") +
          "vectorized by LLVM (width " + (v.lanes | 0) + ")");
        badge.setAttribute("aria-label", badge.getAttribute("data-label"));
        badge.title = "The schedule left loop " + v.loop + " unvectorized; LLVM's vectorizer " +
          "made vector code of it on its own, " + (v.lanes | 0) + " lanes at a time " +
          "(read from the optimised LLVM IR: see the code pane).";
        var last = line.lastChild;
        if (last && last.nodeType === 3 && /\n$/.test(last.data)) line.insertBefore(badge, last);
        else line.appendChild(badge);
      });
    });
  }

  htmx.onLoad(function (root) {
    if (root === document.body || (root.closest && root.closest("#program-pane, #measure-body"))
        || (root.querySelector && root.querySelector("#program-pane, #llvm-vectorized")))
      markVectorizedLoops();
    if (root.querySelectorAll) {
      var w = root.matches && root.matches("[data-withdraw]") ? root : root.querySelector("[data-withdraw]");
      if (w) setTimeout(function () { withdrawStep(w); }, 0);
    }
    root = adoptPlots(root);
    // the measurement pane was re-rendered (a poll, a new step): keep the chosen tab
    if (measureTab && root.querySelector &&
        (root.matches(".mtabs") || root.querySelector(".mtabs"))) showTab(measureTab, true);
    if (root.closest && root.closest("[data-draw-now]")) drawPlotsNow(root);
    else drawPlotsSoon(root);
  });
  document.addEventListener("DOMContentLoaded", function () {
    refreshHighlights();
    markVectorizedLoops();
    // the gallery's import form opens when linked to (/#import)
    if (location.hash === "#import") {
      var d = document.getElementById("import");
      if (d) { d.open = true; d.scrollIntoView(); }
    }
  });
})();
