// EchoCache dashboard: confirmations for actions and live refresh of counts. Plain script,
// no dependencies; the pages work without it (actions then confirm on a page of their own).
"use strict";
(function () {
  var prefix = document.body.dataset.prefix || "";

  // Confirmations: a form with data-confirm asks in a modal dialog before it posts, and posts
  // with confirm=yes so the server skips its own confirmation page.
  var dialog = document.getElementById("confirm-dialog");
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.dataset || !form.dataset.confirm || !dialog || typeof dialog.showModal !== "function") return;
    e.preventDefault();
    document.getElementById("confirm-text").textContent = form.dataset.confirm;
    dialog.returnValue = "";
    dialog.onclose = function () {
      if (dialog.returnValue !== "yes") return;
      var yes = document.createElement("input");
      yes.type = "hidden"; yes.name = "confirm"; yes.value = "yes";
      form.appendChild(yes);
      form.submit();
    };
    dialog.showModal();
  });

  // Live refresh: every few seconds, one request for the counts of every queue and table the
  // page shows (one pipelined read on the server), written into the cells with data-field.
  var every = 3000;
  var status = document.getElementById("live-status");
  function visible(attr) {
    var seen = {}, out = [];
    document.querySelectorAll("[data-live] [" + attr + "]").forEach(function (el) {
      var n = el.getAttribute(attr);
      if (!seen[n]) { seen[n] = true; out.push(n); }
    });
    return out;
  }
  var queues = visible("data-queue"), tables = visible("data-table");
  if (queues.length === 0 && tables.length === 0) return;

  function fmt(n) { return Number(n).toLocaleString("en-US"); }
  function rate(f) { return Number(f).toFixed(1) + "/s"; }
  function set(row, field, text) {
    row.querySelectorAll('[data-field="' + field + '"]').forEach(function (el) { el.textContent = text; });
  }
  function rows(attr, name) {
    return document.querySelectorAll("[data-live] [" + attr + '="' + CSS.escape(name) + '"]');
  }
  function apply(data) {
    (data.queues || []).forEach(function (q) {
      rows("data-queue", q.name).forEach(function (row) {
        var c = q.counts;
        set(row, "pending", fmt(c.Pending)); set(row, "active", fmt(c.Active));
        set(row, "scheduled", fmt(c.Scheduled)); set(row, "dead", fmt(c.Dead));
        set(row, "inlanes", fmt(c.InLanes)); set(row, "urgent", fmt(c.Urgent));
        row.querySelectorAll('[data-field="lanes"]').forEach(function (el) { el.hidden = !(c.InLanes || c.Urgent); });
        set(row, "completed", rate(q.throughput.completed)); set(row, "failed", rate(q.throughput.failed));
        set(row, "workers", String(q.throughput.workers));
        row.querySelectorAll('[data-field="paused"]').forEach(function (el) { el.hidden = !c.Paused; });
        row.querySelectorAll('[data-field="spark"]').forEach(function (el) { el.setAttribute("points", q.throughput.spark); });
      });
    });
    (data.tables || []).forEach(function (t) {
      rows("data-table", t.name).forEach(function (row) {
        ["l1", "l2", "miss", "propagation"].forEach(function (f) { set(row, f, t[f]); });
        ["reads", "loads", "invalidationsSent", "invalidationsReceived", "flushes"].forEach(function (f) { set(row, f, fmt(t[f])); });
        set(row, "caches", String(t.caches));
        row.querySelectorAll('[data-field="degraded"]').forEach(function (el) { el.hidden = !t.degraded; });
      });
    });
  }
  var url = prefix + "/live?" + queues.map(function (q) { return "q=" + encodeURIComponent(q); })
    .concat(tables.map(function (t) { return "t=" + encodeURIComponent(t); })).join("&");
  function tick() {
    if (document.hidden) return;
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (data) {
        apply(data);
        if (status) { status.textContent = "live · " + new Date().toLocaleTimeString(); status.dataset.refreshed = String(Date.now()); }
      })
      .catch(function (err) { if (status) status.textContent = "live refresh failed: " + err.message; });
  }
  setInterval(tick, every);
})();
