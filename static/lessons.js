/* Lesson player: the explorer's own toolbar, sent to the lesson's endpoint.
 * On a lesson page (#lesson-config present) a primitive form posts to
 * /lessons/<id>/apply?step=k instead of /explore/<w>/apply, so the step is checked against
 * the lesson and the address bar keeps the lesson URL. Nothing here builds HTML from text. */
(function () {
  "use strict";
  function config() { return document.getElementById("lesson-config"); }

  document.addEventListener("htmx:configRequest", function (ev) {
    var cfg = config();
    if (!cfg) return;
    var path = ev.detail.path || "";
    if (ev.detail.verb === "post" && /^\/explore\/[^/]+\/apply$/.test(path)) {
      ev.detail.path = cfg.getAttribute("data-apply-url");
    }
  });

  // the pane the current step points at gets a frame, and comes into view
  function markLook() {
    var pane = document.getElementById("lesson-pane");
    if (!pane) return;
    document.querySelectorAll(".look-here").forEach(function (e) { e.classList.remove("look-here"); });
    var look = pane.getAttribute("data-look");
    var target = {
      program: "#col-program", diff: "#col-program", code: "#col-program",
      diagram: "#diagram-pane", runtime: "#measure-pane", cache: "#measure-pane",
      trace: "#lesson-pane", tune: "#col-program"
    }[look];
    var el = target && document.querySelector(target);
    if (el) el.classList.add("look-here");
    if (look === "diff" || look === "code" || look === "tune") {
      var tab = document.querySelector('.tab[data-tab="' + ({diff: "panel-diff", code: "panel-ll", tune: "panel-tune"}[look]) + '"]');
      if (tab && !pane.hasAttribute("data-tab-opened")) { pane.setAttribute("data-tab-opened", "1"); tab.click(); }
    }
    if (look === "cache") {
      var c = document.getElementById("cache-body");
      if (c && c.scrollIntoView) c.scrollIntoView({ block: "nearest" });
    }
  }
  // a step reached in the page (its link followed with htmx) gets the step's title
  function retitle() {
    var cfg = config();
    var title = cfg && cfg.getAttribute("data-title");
    if (title && document.title !== title) document.title = title;
  }
  // another step's narrative starts at its top (the lesson column keeps its scroll across
  // the swap of its pane; a "try it yourself" answer for the same step keeps it)
  var shownStep = null;
  function toTopOnNewStep() {
    var pane = document.getElementById("lesson-pane");
    if (!pane) return;
    var k = pane.getAttribute("data-step");
    if (shownStep !== null && k !== shownStep) {
      var col = pane.closest(".col-lesson");
      if (col) col.scrollTop = 0;
    }
    shownStep = k;
  }
  document.addEventListener("DOMContentLoaded", function () { markLook(); toTopOnNewStep(); });
  document.addEventListener("htmx:afterSettle", function () { toTopOnNewStep(); markLook(); retitle(); });
})();
