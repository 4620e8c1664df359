/* Presenter mode (body.presenting): larger text, panes shown or hidden, arrow keys step.
 * Lesson pages: <- / -> follow the Previous / Next links. The explorer in presenter mode
 * (/explore/<w>/present): <- / -> are undo / redo, i.e. step through the trace of a shared
 * link; the address bar keeps /present as the state changes. Settings live in localStorage. */
(function () {
  "use strict";
  var KEY = "schedule-explorer.present";

  function load() {
    try { return JSON.parse(localStorage.getItem(KEY) || "{}") || {}; } catch (e) { return {}; }
  }
  function save(st) { try { localStorage.setItem(KEY, JSON.stringify(st)); } catch (e) { /* private mode */ } }

  function presenting() { return document.body && document.body.classList.contains("presenting"); }

  function applySettings() {
    if (!presenting()) return;
    var st = load();
    var scale = st.scale || 1.25;
    document.documentElement.style.setProperty("--present-scale", String(scale));
    var hidden = st.hidden || {};
    document.querySelectorAll("[data-pane]").forEach(function (box) {
      var sel = box.getAttribute("data-pane");
      var off = !!hidden[sel];
      box.checked = !off;
      document.querySelectorAll(sel).forEach(function (el) { el.classList.toggle("present-hidden", off); });
    });
  }

  document.addEventListener("change", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element) || !t.hasAttribute("data-pane")) return;
    var st = load();
    st.hidden = st.hidden || {};
    st.hidden[t.getAttribute("data-pane")] = !t.checked;
    save(st);
    applySettings();
    window.dispatchEvent(new Event("resize"));   // plots re-fit the freed space
  });

  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element)) return;
    if (t.closest("[data-leave-present]")) {
      // the same state in the normal explorer: drop /present from the address
      location.assign(location.pathname.replace(/\/present$/, "") + location.search);
      return;
    }
    var b = t.closest("[data-font]");
    if (!b) return;
    var st = load();
    var s = (st.scale || 1.25) + 0.1 * parseInt(b.getAttribute("data-font"), 10);
    st.scale = Math.max(0.9, Math.min(2.2, Math.round(s * 100) / 100));
    save(st);
    applySettings();
  });

  function follow(selector) {
    var a = document.querySelector(selector);
    if (!a) return false;
    a.click();
    return true;
  }

  document.addEventListener("keydown", function (ev) {
    if (!presenting()) return;
    var t = ev.target;
    if (t instanceof Element && t.closest("textarea, select, [contenteditable], input:not([type=checkbox]):not([type=radio]):not([type=button])")) return;
    if (ev.altKey || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    var fwd = ev.key === "ArrowRight" || ev.key === "PageDown";
    var back = ev.key === "ArrowLeft" || ev.key === "PageUp";
    if (!fwd && !back) return;
    var done = fwd ? (follow("[data-present-next]") || follow('[data-key="redo"]'))
                   : (follow("[data-present-prev]") || follow('[data-key="undo"]'));
    if (done) ev.preventDefault();
  });

  // /explore/<w>/present: a step pushes the plain explorer URL (explorer.js, which says so
  // with "explorer:pushed"); keep /present
  document.addEventListener("explorer:pushed", function () {
    if (!document.body.classList.contains("present-explore")) return;
    var m = location.pathname.match(/^(\/explore\/[^/]+)$/);
    if (m) history.replaceState(history.state, "", m[1] + "/present" + location.search);
  });

  document.addEventListener("DOMContentLoaded", applySettings);
  document.addEventListener("htmx:afterSettle", applySettings);
})();
