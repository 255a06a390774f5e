// The dashboard's only script (served from the dashboard itself: the CSP allows no other).
// Live refresh: every few seconds the page's data is fetched again and swapped in, unless the
// operator is reading: text selected, a field focused, a job ticked, a preview open, the pointer
// moved over the page in the last few seconds, or the tab hidden. Untick "live" to stop it.
(function () {
  "use strict";
  var PERIOD = 5000;
  var READING_AFTER_POINTER = 4000;
  var lastPointer = 0;
  var live = document.getElementById("live");
  var state = document.getElementById("live-state");
  var key = "schedule-dashboard-live";

  function reading() {
    var selection = window.getSelection && window.getSelection();
    if (selection && String(selection).length > 0) return "text selected";
    var focused = document.activeElement;
    if (focused && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(focused.tagName) && focused !== live) return "a field is in use";
    if (document.querySelector("input.pick:checked")) return "jobs selected";
    if (document.querySelector("#main details[open]")) return "a preview is open";
    if (Date.now() - lastPointer < READING_AFTER_POINTER) return "you are reading";
    if (document.hidden) return "tab hidden";
    return null;
  }

  function show(text) {
    if (state) state.textContent = text;
  }

  function refresh() {
    if (!live || !live.checked) { show(""); return; }
    var why = reading();
    if (why) { show("(paused: " + why + ")"); return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "x-live-refresh": "1" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null || reading()) return;
        var fresh = new DOMParser().parseFromString(html, "text/html");
        ["main", "alarm-slot"].forEach(function (id) {
          var now = document.getElementById(id), next = fresh.getElementById(id);
          if (now && next) now.innerHTML = next.innerHTML;
        });
        bind();
        show("(updated " + new Date().toLocaleTimeString() + ")");
      })
      .catch(function () { show("(unreachable)"); });
  }

  function bind() {
    var all = document.getElementById("select-all");
    if (all) {
      all.addEventListener("change", function () {
        document.querySelectorAll("input.pick").forEach(function (box) { box.checked = all.checked; });
      });
    }
  }

  if (live) {
    live.checked = window.localStorage.getItem(key) !== "off";
    live.addEventListener("change", function () {
      window.localStorage.setItem(key, live.checked ? "on" : "off");
      show("");
    });
  }
  var main = document.getElementById("main");
  if (main) {
    ["mousemove", "wheel", "touchstart", "keydown"].forEach(function (name) {
      main.addEventListener(name, function () { lastPointer = Date.now(); }, { passive: true });
    });
  }
  // Say at once that a tick, a focus or a selection pauses the refresh, not at the next period.
  ["change", "focusin", "selectionchange"].forEach(function (name) {
    document.addEventListener(name, function () {
      if (!live || !live.checked) return;
      var why = reading();
      if (why) show("(paused: " + why + ")");
    });
  });
  bind();
  window.setInterval(refresh, PERIOD);
})();
