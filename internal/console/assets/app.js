// The Lodestar console's page: hash routes, each a view read from the
// console's JSON API (which reads the hub as you); server-sent events tell it
// when to read its view again. No framework, nothing fetched from elsewhere.
"use strict";

const PAGE = 100;
const state = { about: null, offset: 0, q: "", namespace: "", logs: null, pods: false, events: false };

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function status(s) { return `<span class="${esc(s || "Unknown")}">${esc(s || "Unknown")}</span>`; }
// Conditions whose True is bad news (kstatus's abnormal-true polarity).
const ABNORMAL = new Set(["Stalled", "Reconciling"]);
function conditionStatus(c) {
  if (!ABNORMAL.has(c.type)) return status(c.status);
  const cls = c.status === "True" ? (c.type === "Stalled" ? "False" : "Unknown") : "True";
  return `<span class="${cls}">${esc(c.status)}</span>`;
}
function properties(m) {
  const n = Object.keys(m || {}).length;
  return n === 0 ? "-" : `<details><summary>${n} properties</summary>${tags(m)}</details>`;
}
function tags(m) { return Object.entries(m || {}).map(([k, v]) => `<span class="tag">${esc(k)}=${esc(v)}</span>`).join(""); }
function ago(t) {
  if (!t) return "-";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(t)) / 1000));
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
}

async function api(path, options) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, options));
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) {
    const err = new Error(body.error || res.statusText);
    err.status = res.status;
    throw err;
  }
  return body;
}

function say(text, error) {
  document.getElementById("message").innerHTML = text ? `<div class="${error ? "error" : "note"}" id="${error ? "error" : "note"}">${esc(text)}</div>` : "";
}

// absent is what a view shows where the user may not read something.
function absent(err, what) {
  if (err.status === 403) return `<div class="absent" id="forbidden">You may not read ${esc(what)} on this hub (${esc(err.message)}).</div>`;
  return `<div class="absent error">Could not read ${esc(what)}: ${esc(err.message)}</div>`;
}

function pager(total) {
  const from = total === 0 ? 0 : state.offset + 1, to = Math.min(state.offset + PAGE, total);
  return `<span class="muted" id="range">${from}–${to} of ${total}</span>
    <button data-page="-1" ${state.offset === 0 ? "disabled" : ""}>Previous</button>
    <button data-page="1" ${to >= total ? "disabled" : ""}>Next</button>`;
}

// ---- views ----

async function clustersView() {
  const q = encodeURIComponent(state.q);
  let page;
  try {
    page = await api(`/api/clusters?offset=${state.offset}&limit=${PAGE}&q=${q}`);
  } catch (err) {
    return `<h2>Clusters</h2>${absent(err, "clusters (ClusterProfiles)")}`;
  }
  const rows = page.items.map((c) => `<tr data-cluster="${esc(c.name)}">
      <td><b>${esc(c.name)}</b><div class="muted">${esc(c.clusterSet)}</div></td>
      <td>${status(c.healthy)}</td><td>${status(c.reachable)}</td>
      <td>${esc(ago(c.heartbeat))}</td>
      <td>${esc(c.version || "-")}</td>
      <td class="num">${c.works < 0 ? "-" : c.works}</td>
      <td>${tags(c.labels)}</td>
      <td>${(c.taints || []).map((t) => `<span class="tag">${esc(t)}</span>`).join("") || "-"}</td>
      <td>${properties(c.properties)}</td>
      <td>${(c.notReady || []).map((n) => `<div><b>${esc(n.type)}</b> ${esc(n.reason || "")}: ${esc(n.message)}</div>`).join("")}</td>
    </tr>`).join("");
  return `<h2>Clusters <span class="muted">(${page.total}, ${page.unhealthy} not ready)</span></h2>
    <div class="toolbar"><input id="filter" placeholder="Filter by name, set, label or property" value="${esc(state.q)}" size="40">${pager(page.total)}</div>
    <table id="clusters"><thead><tr><th>Cluster</th><th>Healthy</th><th>Reachable</th><th>Heartbeat</th><th>Kubernetes</th><th>Works</th>
      <th>Labels</th><th>Taints</th><th>Properties</th><th>Why not ready</th></tr></thead><tbody>${rows}</tbody></table>`;
}

async function placementsView(ns) {
  let namespaces = { items: [state.about.namespace] };
  try { namespaces = await api("/api/namespaces"); } catch (err) { /* the console's own namespace stays */ }
  ns = ns || state.namespace || state.about.namespace;
  state.namespace = ns;
  const options = [...new Set([ns, ...namespaces.items])].map((n) => `<option ${n === ns ? "selected" : ""}>${esc(n)}</option>`).join("");
  let page;
  try {
    page = await api(`/api/placements?namespace=${encodeURIComponent(ns)}&offset=${state.offset}&limit=${PAGE}&q=${encodeURIComponent(state.q)}`);
  } catch (err) {
    return `<h2>Placements</h2><div class="toolbar"><select id="namespace">${options}</select></div>${absent(err, "Placements in " + ns)}`;
  }
  const cond = (p, t) => (p.conditions.find((c) => c.type === t) || {}).status;
  const rows = page.items.map((p) => `<tr data-placement="${esc(p.name)}">
      <td><a href="#/placement/${encodeURIComponent(p.namespace)}/${encodeURIComponent(p.name)}">${esc(p.name)}</a></td>
      <td class="num">${p.selected}</td><td class="num">${p.applied}</td><td class="num">${p.available}</td>
      <td>${status(cond(p, "Scheduled"))}</td><td>${status(cond(p, "Available"))}</td>
      <td>${esc(p.strategy)}${p.paused ? ' <span class="warn">paused</span>' : ""}</td><td>${esc(p.rollout || "-")}</td></tr>`).join("");
  return `<h2>Placements</h2>
    <div class="toolbar"><label>Namespace <select id="namespace">${options}</select></label>
      <input id="filter" placeholder="Filter by name" value="${esc(state.q)}">${pager(page.total)}</div>
    <table id="placements"><thead><tr><th>Placement</th><th>Selected</th><th>Applied</th><th>Available</th><th>Scheduled</th>
      <th>Available</th><th>Strategy</th><th>Rollout</th></tr></thead><tbody>${rows}</tbody></table>`;
}

function rolloutSection(p) {
  const ro = p.rolloutStatus;
  const buttons = `<button id="pause" data-action="pause" ${p.paused ? "disabled" : ""}>Pause</button>
    <button id="resume" data-action="resume" ${p.paused ? "" : "disabled"}>Resume</button>
    <select id="undo-revision">${(p.revisions || []).slice(1).map((r) => `<option value="${r.number}">revision ${r.number}</option>`).join("")}</select>
    <button id="undo" data-action="undo" ${(p.revisions || []).length < 2 ? "disabled" : ""}>Undo to</button>`;
  if (!ro) return `<h3>Rollout</h3><div class="toolbar">${buttons}</div><p class="muted">No rollout yet.</p>`;
  const stages = (ro.stages || []).map((s) => {
    const current = s.name === ro.currentStage;
    const approve = s.approval ? `<button class="primary" id="approve-${esc(s.name)}" data-action="approve" data-stage="${esc(s.name)}"
      ${ro.stable ? "disabled" : ""}>Approve</button>` : "";
    return `<span class="stage ${current ? "current" : ""}" data-stage-name="${esc(s.name)}">${esc(s.name)}${current ? " (current)" : ""}
      ${s.approval ? '<span class="muted">approval required</span>' : ""} ${approve}</span>`;
  }).join("");
  const clusters = (ro.clusters || []).map((c) => `<tr><td>${esc(c.name)}</td><td>${esc(c.stage || "-")}</td><td>${esc(c.state)}</td><td>${esc(c.revision || "")}</td></tr>`).join("");
  return `<h3>Rollout</h3>
    <p id="rollout-state">${esc(p.rollout || "")}</p>
    <p>Target revision <b>${ro.target}</b> ${ro.stable ? '<span class="ok">(stable)</span>' : '<span class="warn">(rolling out)</span>'}
      ${ro.waitingForApproval ? '<span class="warn" id="waiting">waiting for approval</span>' : ""}</p>
    <div>${stages}</div><div class="toolbar">${buttons}</div>
    ${clusters ? `<table id="rollout-clusters"><thead><tr><th>Cluster</th><th>Stage</th><th>State</th><th>Revision</th></tr></thead><tbody>${clusters}</tbody></table>` : ""}`;
}

async function placementView(ns, name) {
  let p;
  try {
    p = await api(`/api/placement?namespace=${encodeURIComponent(ns)}&name=${encodeURIComponent(name)}`);
  } catch (err) {
    return `<h2>${esc(ns)}/${esc(name)}</h2>${absent(err, "this Placement")}`;
  }
  state.placement = { ns, name };
  const conds = p.conditions.map((c) => `<tr><td>${esc(c.type)}</td><td>${conditionStatus(c)}</td><td>${esc(c.reason)}</td><td>${esc(c.message)}</td></tr>`).join("");
  const clusters = p.clusters.map((c) => `<tr data-cluster="${esc(c.name)}"><td>${esc(c.name)}</td><td>${status(c.applied)}</td><td>${status(c.available)}</td>
      <td>${esc(c.reason || "")}</td><td>${esc(c.message || "")}</td><td>${esc(c.drift || "")}</td></tr>`).join("");
  const whyNot = (p.whyNot || []).map((c) => `<tr><td>${esc(c.name)}</td><td>${esc(c.reason)}</td></tr>`).join("");
  const excluded = (p.excluded || []).map((e) => `<span class="tag">${esc(JSON.stringify(e))}</span>`).join("");
  return `<h2><a href="#/placements/${encodeURIComponent(ns)}">${esc(ns)}</a> / ${esc(name)}</h2>
    <table id="conditions"><thead><tr><th>Condition</th><th>Status</th><th>Reason</th><th>Message</th></tr></thead><tbody>${conds}</tbody></table>
    ${rolloutSection(p)}
    <h3>Clusters <span class="muted">(${p.selected} selected, ${p.applied} applied, ${p.available} available${p.unlisted ? `, ${p.unlisted} more not listed` : ""})</span></h3>
    <table id="placement-clusters"><thead><tr><th>Cluster</th><th>Applied</th><th>Available</th><th>Reason</th><th>Message</th><th>Drift</th></tr></thead><tbody>${clusters}</tbody></table>
    ${whyNot || excluded ? `<h3>Clusters left out</h3>${excluded}<table id="why-not"><thead><tr><th>Cluster</th><th>Why not</th></tr></thead><tbody>${whyNot}</tbody></table>` : ""}
    <h3>Pods <button id="load-pods" data-action="pods">Show pods</button></h3><div id="pods"></div>
    <div id="logs-box"></div>
    <h3>Events <button id="load-events" data-action="events">Show events</button></h3><div id="events"></div>`;
}

async function showPods() {
  const { ns, name } = state.placement;
  state.pods = true;
  const box = document.getElementById("pods");
  try {
    const pods = await api(`/api/pods?namespace=${encodeURIComponent(ns)}&placement=${encodeURIComponent(name)}`);
    const rows = pods.items.map((p) => `<tr><td>${esc(p.cluster)}</td><td>${esc(p.name)}</td><td>${esc(p.phase)}</td><td>${esc(p.ready)}</td>
      <td class="num">${p.restarts}</td><td>${p.containers.map((c) => `<button class="logs" data-action="logs" data-cluster="${esc(p.cluster)}"
        data-pod="${esc(p.name)}" data-container="${esc(c)}">${esc(c)} logs</button>`).join(" ")}</td></tr>`).join("");
    const errs = Object.entries(pods.errors || {}).map(([c, e]) => `<div class="absent">${esc(c)}: ${esc(e)}</div>`).join("");
    box.innerHTML = `<table id="pod-list"><thead><tr><th>Cluster</th><th>Pod</th><th>Phase</th><th>Ready</th><th>Restarts</th><th>Logs</th></tr></thead><tbody>${rows}</tbody></table>${errs}`;
  } catch (err) {
    box.innerHTML = absent(err, "the pods (the debug API)");
  }
}

async function showLogs(cluster, pod, container) {
  const { ns, name } = state.placement;
  const box = document.getElementById("logs-box");
  state.logs = { cluster, pod, container };
  box.innerHTML = `<h3>Logs of ${esc(cluster)}/${esc(pod)} (${esc(container)})</h3><pre class="logs" id="logs">reading…</pre>`;
  try {
    const logs = await api(`/api/logs?namespace=${encodeURIComponent(ns)}&placement=${encodeURIComponent(name)}&cluster=${encodeURIComponent(cluster)}` +
      `&pod=${encodeURIComponent(pod)}&container=${encodeURIComponent(container)}&tail=200`);
    document.getElementById("logs").textContent = logs.text || "(empty)";
  } catch (err) {
    box.innerHTML = absent(err, "these logs");
  }
}

async function showEvents() {
  const { ns, name } = state.placement;
  state.events = true;
  const box = document.getElementById("events");
  try {
    const evs = await api(`/api/events?namespace=${encodeURIComponent(ns)}&placement=${encodeURIComponent(name)}`);
    const rows = evs.items.map((e) => `<tr><td>${esc(ago(e.time))}</td><td>${esc(e.cluster)}</td><td class="${e.type === "Warning" ? "bad" : ""}">${esc(e.type)}</td>
      <td>${esc(e.reason)}</td><td>${esc(e.object)}</td><td>${esc(e.message)}</td></tr>`).join("");
    const errs = Object.entries(evs.errors || {}).map(([c, e]) => `<div class="absent">${esc(c)}: ${esc(e)}</div>`).join("");
    box.innerHTML = `<table id="event-list"><thead><tr><th>When</th><th>Where</th><th>Type</th><th>Reason</th><th>Object</th><th>Message</th></tr></thead><tbody>${rows}</tbody></table>${errs}`;
  } catch (err) {
    box.innerHTML = absent(err, "the events");
  }
}

// ---- routing and live updates ----

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  return { view: parts[0] || "placements", args: parts.slice(1) };
}

let rendering = Promise.resolve();
function render(keepMessage) {
  rendering = rendering.then(async () => {
    const { view, args } = route();
    for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.id === `nav-${view === "placement" ? "placements" : view}`);
    if (!keepMessage) say("");
    let html;
    if (view === "clusters") html = await clustersView();
    else if (view === "placement") html = await placementView(args[0], args[1]);
    else html = await placementsView(args[0]);
    // What the user opened, by what they asked for (not by what is on the
    // page: a list still being read when the next update comes stays open).
    const logs = view === "placement" && state.logs ? state.logs : null;
    const { pods, events } = state;
    const focused = document.activeElement && document.activeElement.id === "filter";
    document.getElementById("view").innerHTML = html;
    // What the user opened stays open across live updates.
    if (view === "placement") {
      if (pods) showPods();
      if (events) showEvents();
      if (logs) showLogs(logs.cluster, logs.pod, logs.container);
    }
    if (focused) { const f = document.getElementById("filter"); f.focus(); f.setSelectionRange(f.value.length, f.value.length); }
  }).catch((err) => say(err.message, true));
  return rendering;
}

async function act(action, stage) {
  const { ns, name } = state.placement;
  const body = { namespace: ns, name, action };
  if (stage) body.stage = stage;
  if (action === "undo") body.revision = Number(document.getElementById("undo-revision").value);
  try {
    const res = await api("/api/rollout", { method: "POST", headers: { "Content-Type": "application/json", "X-Lodestar-Console": "1" }, body: JSON.stringify(body) });
    say(res.message);
  } catch (err) {
    say(err.message, true);
  }
  render(true);
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button");
  if (!b) return;
  if (b.dataset.page) { state.offset = Math.max(0, state.offset + Number(b.dataset.page) * PAGE); render(); return; }
  switch (b.dataset.action) {
    case "pods": showPods(); break;
    case "events": showEvents(); break;
    case "logs": showLogs(b.dataset.cluster, b.dataset.pod, b.dataset.container); break;
    case "approve": case "pause": case "resume": case "undo": b.disabled = true; act(b.dataset.action, b.dataset.stage); break;
  }
});
let filterTimer;
document.addEventListener("input", (ev) => {
  if (ev.target.id !== "filter") return;
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => { state.q = ev.target.value; state.offset = 0; render(); }, 250);
});
document.addEventListener("change", (ev) => {
  if (ev.target.id === "namespace") location.hash = `#/placements/${encodeURIComponent(ev.target.value)}`;
});
window.addEventListener("hashchange", () => { state.offset = 0; state.q = ""; state.logs = null; state.pods = false; state.events = false; render(); });

function live() {
  const el = document.getElementById("live");
  const source = new EventSource("/api/watch");
  let timer;
  source.onopen = () => { el.textContent = "live"; el.classList.add("on"); };
  source.onerror = () => { el.textContent = "reconnecting…"; el.classList.remove("on"); };
  source.onmessage = (ev) => {
    const { view } = route();
    const wanted = view === "clusters" ? "clusters" : "placements";
    if (ev.data !== wanted) return;
    clearTimeout(timer);
    timer = setTimeout(() => render(true), 300);
  };
}

(async function start() {
  try {
    state.about = await api("/api/about");
    document.getElementById("about").textContent =
      `${state.about.user ? state.about.user + " @ " : ""}${state.about.server} · ${state.about.version}`;
  } catch (err) {
    say(err.message, true);
    return;
  }
  live();
  // Heartbeats age without a change to watch: read the clusters again now and then.
  setInterval(() => { if (route().view === "clusters") render(true); }, 30000);
  render();
})();
