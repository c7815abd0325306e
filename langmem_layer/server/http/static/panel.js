// The memory panel: plain JavaScript over the /v1 REST API (no build step, no CDN).
"use strict";

const KEY = "langmem.apiKey";
const LAYERS = ["identity", "semantic", "episodic", "procedural"];
const PAGE = 500;
const MAX_MEMORIES = 10000;
const $ = (id) => document.getElementById(id);
const state = { memories: [], query: "", status: "" };

// -- the API --------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

function headers(extra) {
  const h = Object.assign({ Accept: "application/json" }, extra || {});
  const key = sessionStorage.getItem(KEY);
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) {
    let detail = r.statusText;
    try {
      detail = (await r.json()).detail || detail;
    } catch (e) { /* not a problem document */ }
    throw new ApiError(r.status, detail);
  }
  return r;
}

const json = async (method, path, body) => (await api(method, path, body)).json();

// -- status line ----------------------------------------------------------------------

function say(text, isError) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", !!isError);
}

function failed(e) {
  if (e instanceof ApiError && e.status === 401) {
    sessionStorage.removeItem(KEY);
    showLogin("Your key was refused: " + e.message);
    return;
  }
  say(e.message || String(e), true);
}

// -- sign in --------------------------------------------------------------------------

function showLogin(message) {
  $("main").hidden = true;
  $("account").hidden = true;
  $("login").hidden = false;
  say(message || "", !!message);
  $("api-key").focus();
}

async function start() {
  try {
    const me = await json("GET", "/v1/me");
    const keyed = !!sessionStorage.getItem(KEY);
    $("who").textContent = "Signed in as " + me.user_id + (keyed ? "" : " (dev mode)");
    $("logout").hidden = !keyed;
    $("login").hidden = true;
    $("account").hidden = false;
    $("main").hidden = false;
    await load();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      const hadKey = !!sessionStorage.getItem(KEY);
      sessionStorage.removeItem(KEY);
      showLogin(hadKey ? "That key was refused: " + e.message : "");
    } else {
      say("The memory service is unavailable: " + e.message, true);
    }
  }
}

// -- loading --------------------------------------------------------------------------

function query(offset) {
  const p = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
  if (state.query) p.set("q", state.query);
  if (state.status) p.set("status", state.status);
  return "/v1/memories?" + p.toString();
}

// What the list shows. A search lists only the memories that match (the server applies
// recall's relevance floor), best match first in each group; the rest are not shown.
function summary(n) {
  const count = n + (n === 1 ? " memory" : " memories");
  if (!state.query) return count + ".";
  const q = "“" + state.query + "”";
  if (n === 0) return "No memory matches " + q + ".";
  return count + (n === 1 ? " matches " : " match ") + q +
    (n > 1 ? ", best match first in each group." : ".");
}

async function load(focusId) {
  say("Loading…");
  const found = [];
  let offset = 0;
  while (offset !== null && found.length < MAX_MEMORIES) {
    const page = await json("GET", query(offset));
    found.push(...page.items);
    offset = page.next_offset;
  }
  state.memories = found;
  render();
  say(summary(found.length));
  if (focusId) {
    const el = document.querySelector('[data-id="' + CSS.escape(focusId) + '"]');
    if (el) el.focus();
  }
}

// -- rendering ------------------------------------------------------------------------

const when = (iso) => (iso ? new Date(iso).toLocaleString(undefined,
  { dateStyle: "medium", timeStyle: "short" }) : "—");
const day = (iso) => (iso ? new Date(iso).toLocaleDateString(undefined,
  { weekday: "short", day: "numeric", month: "short" }) : "no due date");
const label = (s) => s.replace(/_/g, " ");

function fact(dl, name, value, cls) {
  // A div per pair (allowed in a dl) keeps a name and its value on one line.
  const pair = document.createElement("div");
  const dt = document.createElement("dt");
  dt.textContent = name;
  const dd = document.createElement("dd");
  dd.textContent = value;
  if (cls) dd.className = cls;
  pair.append(dt, dd);
  dl.append(pair);
}

function render() {
  const groups = $("groups");
  groups.replaceChildren();
  $("count").textContent = "(" + state.memories.length + ")";
  const byLayer = new Map();
  for (const m of state.memories) {
    if (!byLayer.has(m.layer)) byLayer.set(m.layer, new Map());
    const kinds = byLayer.get(m.layer);
    if (!kinds.has(m.kind)) kinds.set(m.kind, []);
    kinds.get(m.kind).push(m);
  }
  const layers = [...byLayer.keys()].sort((a, b) => LAYERS.indexOf(a) - LAYERS.indexOf(b));
  for (const layer of layers) {
    const section = document.createElement("section");
    section.className = "layer";
    section.dataset.layer = layer;
    const h = document.createElement("h3");
    h.textContent = label(layer);
    section.append(h);
    for (const [kind, items] of byLayer.get(layer)) {
      const group = document.createElement("section");
      group.className = "kind";
      group.dataset.kind = kind;
      group.setAttribute("aria-label", label(layer) + ": " + label(kind));
      const h4 = document.createElement("h4");
      h4.textContent = label(kind) + " (" + items.length + ")";
      group.append(h4);
      for (const m of items) group.append(card(m));
      section.append(group);
    }
    groups.append(section);
  }
  if (!layers.length) {
    const p = document.createElement("p");
    p.textContent = state.query ? "Nothing matches." : "No memories yet.";
    groups.append(p);
  }
  renderLoops();
}

function renderLoops() {
  const list = $("loop-list");
  list.replaceChildren();
  const loops = state.memories
    .filter((m) => m.kind === "open_loop" && m.status !== "archived" &&
      (m.loop_status === null || m.loop_status === "open" || m.loop_status === "deferred"))
    .sort((a, b) => (a.due_at || "9999").localeCompare(b.due_at || "9999"));
  for (const m of loops) {
    const li = document.createElement("li");
    const due = document.createElement("time");
    if (m.due_at) due.dateTime = m.due_at;
    due.textContent = day(m.due_at);
    const a = document.createElement("a");
    a.href = "#m-" + m.id;
    a.textContent = m.content;
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      const el = $("m-" + m.id);
      if (el) { el.scrollIntoView({ block: "center" }); el.focus(); }
    });
    li.append(due, " ", a);
    if (m.loop_status && m.loop_status !== "open") li.append(" (" + label(m.loop_status) + ")");
    list.append(li);
  }
  $("loops").hidden = loops.length === 0;
}

function card(m) {
  const el = $("memory-template").content.firstElementChild.cloneNode(true);
  el.id = "m-" + m.id;
  el.dataset.id = m.id;
  el.dataset.status = m.status;
  el.setAttribute("aria-label", m.content);
  if (m.pinned) el.classList.add("pinned");
  el.classList.add("status-" + m.status);
  el.querySelector(".content").textContent = m.content;
  const dl = el.querySelector(".facts");
  fact(dl, "Status", label(m.status), "badge status-" + m.status);
  fact(dl, "Confidence", Math.round(m.confidence * 100) + "%");
  if (m.pinned) fact(dl, "Pinned", "recalled first");
  if (m.profile) fact(dl, "Scope", m.profile);
  if (m.due_at) fact(dl, "Due", when(m.due_at));
  if (m.loop_status) fact(dl, "Loop", label(m.loop_status));
  fact(dl, "Remembered", when(m.occurred_at));
  fact(dl, "Last used", when(m.last_accessed_at));
  if (m.expires_at) fact(dl, "Expires", when(m.expires_at));
  const short = m.content.length > 60 ? m.content.slice(0, 57) + "…" : m.content;

  const edit = el.querySelector(".edit");
  const text = edit.querySelector("textarea");
  const doEdit = el.querySelector(".do-edit");
  doEdit.setAttribute("aria-label", "Correct: " + short);
  doEdit.addEventListener("click", () => {
    text.value = m.content;
    edit.hidden = false;
    text.focus();
  });
  edit.querySelector(".cancel").addEventListener("click", () => {
    edit.hidden = true;
    doEdit.focus();
  });
  edit.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(m.id, "Corrected.", () => json("POST", path(m, "/correct"), { content: text.value }));
  });
  edit.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") { edit.hidden = true; doEdit.focus(); }
  });

  const pin = el.querySelector(".do-pin");
  pin.textContent = m.pinned ? "Unpin" : "Pin";
  pin.setAttribute("aria-pressed", String(m.pinned));
  pin.setAttribute("aria-label", (m.pinned ? "Unpin: " : "Pin: ") + short);
  pin.addEventListener("click", () => act(m.id, m.pinned ? "Unpinned." : "Pinned.",
    () => json("POST", path(m, m.pinned ? "/unpin" : "/pin"))));

  const policy = el.querySelector(".do-policy");
  policy.value = m.policy;
  policy.setAttribute("aria-label", "Surface policy: " + short);
  policy.addEventListener("change", () => act(m.id, "Surface policy: " + policy.value + ".",
    () => json("PATCH", path(m, ""), { policy: policy.value })));

  const why = el.querySelector(".do-why");
  why.setAttribute("aria-label", "Why is this remembered: " + short);
  why.addEventListener("click", () => toggleWhy(m, el, why));

  const archive = el.querySelector(".do-archive");
  archive.setAttribute("aria-label", "Archive: " + short);
  archive.hidden = m.status === "archived";
  archive.addEventListener("click", () => act(m.id, "Archived: it will not be recalled.",
    () => json("DELETE", path(m, ""))));

  const del = el.querySelector(".do-delete");
  del.setAttribute("aria-label", "Delete permanently: " + short);
  del.addEventListener("click", () => confirmDelete(m, del));
  return el;
}

const path = (m, tail) => "/v1/memories/" + encodeURIComponent(m.id) + tail;

async function act(id, done, call) {
  try {
    await call();
    await load(id);
    say(done);
  } catch (e) {
    failed(e);
  }
}

function confirmDelete(m, opener) {
  const dialog = $("confirm");
  $("confirm-text").textContent = "“" + m.content + "” will be erased with its vectors, " +
    "links and history. This cannot be undone.";
  dialog.returnValue = "";
  dialog.addEventListener("close", async () => {
    if (dialog.returnValue !== "delete") { opener.focus(); return; }
    try {
      await api("DELETE", path(m, "?hard=true"));
      await load();
      say("Deleted permanently.");
      $("main").focus();
    } catch (e) {
      failed(e);
    }
  }, { once: true });
  dialog.showModal();
}

async function toggleWhy(m, el, button) {
  const box = el.querySelector(".why");
  if (!box.hidden) {
    box.hidden = true;
    button.setAttribute("aria-expanded", "false");
    return;
  }
  try {
    const why = await json("GET", path(m, "/why"));
    box.replaceChildren(...whyView(why));
    box.hidden = false;
    button.setAttribute("aria-expanded", "true");
  } catch (e) {
    failed(e);
  }
}

function whyView(why) {
  const out = [];
  const add = (tag, text, cls) => {
    const e = document.createElement(tag);
    e.textContent = text;
    if (cls) e.className = cls;
    out.push(e);
    return e;
  };
  add("h5", "Source");
  const s = why.source;
  if (s.text) add("blockquote", s.text, "source-text");
  else add("p", "No source text was kept (written directly or imported).");
  const where = [s.thread_id && "thread " + s.thread_id, s.agent_id && "agent " + s.agent_id,
    s.message_id && "message " + s.message_id].filter(Boolean);
  if (where.length) add("p", "From " + where.join(", ") + ".", "help");
  add("h5", "Decisions");
  if (!why.decisions.length) add("p", "No write-gate decision names it (written directly).");
  const ul = document.createElement("ul");
  for (const d of why.decisions) {
    const li = document.createElement("li");
    li.className = "decision";
    li.textContent = when(d.at) + ": " + (d.accepted ? "admitted" : "refused") + " (" +
      (d.op || "?") + (d.proposed && d.proposed !== d.op ? ", proposed " + d.proposed : "") +
      ") — " + (d.reason || "no reason given");
    ul.append(li);
  }
  if (why.decisions.length) out.push(ul);
  add("h5", "History");
  const ol = document.createElement("ol");
  for (const h of why.history) {
    const li = document.createElement("li");
    li.textContent = when(h.at) + ": " + h.event + (h.old !== null ? " from “" + h.old + "”" : "") +
      (h.new !== null ? " to “" + h.new + "”" : "") + (h.reason ? " (" + h.reason + ")" : "");
    ol.append(li);
  }
  if (why.history.length) out.push(ol);
  else add("p", "Unchanged since it was remembered.");
  return out;
}

// -- export and import ----------------------------------------------------------------

async function exportAll() {
  try {
    const r = await api("GET", "/v1/export");
    const name = /filename="([^"]+)"/.exec(r.headers.get("Content-Disposition") || "");
    const url = URL.createObjectURL(await r.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = name ? name[1] : "langmem-export.json";
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    say("Exported.");
  } catch (e) {
    failed(e);
  }
}

async function importFile(input) {
  const file = input.files && input.files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file, file.name);
  try {
    const result = await json("POST", "/v1/import", form);
    await load();
    say("Imported " + result.imported + " item" + (result.imported === 1 ? "" : "s") + ".");
  } catch (e) {
    failed(e);
  } finally {
    input.value = "";
  }
}

// -- wiring ---------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, $("api-key").value.trim());
    $("api-key").value = "";
    start();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    state.memories = [];
    $("groups").replaceChildren();
    showLogin("Signed out.");
  });
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.query = $("q").value.trim();
    state.status = $("status-filter").value;
    load().catch(failed);
  });
  $("clear-search").addEventListener("click", () => {
    $("q").value = "";
    $("status-filter").value = "";
    state.query = "";
    state.status = "";
    load().catch(failed);
  });
  $("export").addEventListener("click", exportAll);
  $("import-file").addEventListener("change", (ev) => importFile(ev.target));
  start();
});
