// Herald console: one more client of Herald's REST API. Every call sends
// the operator's bearer token in an Authorization header; the server
// checks it as it checks any client's. Nothing here builds HTML from
// strings: data from the server is set as text, never parsed as markup.

const tokenKey = "herald.console.token";
const refreshEvery = 5000; // ms, the overview's live refresh

const $ = (sel) => document.querySelector(sel);
const statusLine = $("#status");

function say(text, isError = false) {
  statusLine.textContent = text;
  statusLine.className = isError ? "error" : "";
}

// el builds an element: attrs set as properties (or attributes for aria-*,
// data-*, for), children appended as nodes or text.
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("aria-") || k.startsWith("data-") || k === "for" || k === "scope") e.setAttribute(k, v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e[k] = v;
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function token() { return sessionStorage.getItem(tokenKey); }

// session is the identity provider's sign-in (GET /console/session) when
// signed in that way: its CSRF token is kept in memory only, and the
// session itself is an HttpOnly cookie this script never sees.
let session = null;
let oidc = false;

// authHeaders are what every API call carries: the pasted token, or the
// session's CSRF token beside its cookie.
function authHeaders() {
  if (session) return { "X-Herald-CSRF": session.csrf };
  return { Authorization: "Bearer " + token() };
}

// APIError is a failed answer: status and the server's own message.
class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { ...authHeaders(), Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    signOut(session ? "The session has ended (401): sign in again." : "The token was refused (401): sign in again.");
    throw new APIError(401, "unauthenticated");
  }
  const text = await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = null; } }
  if (!res.ok) {
    const msg = (data && data.message) || res.statusText;
    throw new APIError(res.status, `${res.status}: ${msg}`);
  }
  return data;
}

// localTime shows a timestamp in the viewer's own zone.
function localTime(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (isNaN(d) || d.getUTCFullYear() < 1971) return "";
  return d.toLocaleString();
}

function age(iso) {
  const ms = Date.now() - new Date(iso).getTime();
  if (!(ms >= 0)) return "";
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

let stopView = () => {};

function signOut(message) {
  sessionStorage.removeItem(tokenKey);
  if (session) {
    // The cookie is HttpOnly: only the server can clear it.
    const csrf = session.csrf;
    session = null;
    fetch("/console/logout", { method: "POST", headers: { "X-Herald-CSRF": csrf }, cache: "no-store", credentials: "same-origin" })
      .catch(() => say("Signing out failed: close the browser to end the session.", true));
  }
  stopView();
  $("#nav").hidden = true;
  $("#view").hidden = true;
  $("#signin").hidden = false;
  $("#oidc").hidden = !oidc;
  $("#whoami").textContent = "";
  if (message) say(message, !/^Signed out/.test(message));
  (oidc ? $("#oidc-signin") : $("#token")).focus();
}

$("#signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const t = $("#token").value.trim();
  if (!t) return;
  sessionStorage.setItem(tokenKey, t);
  $("#token").value = "";
  say("");
  route();
});
$("#signout").addEventListener("click", () => signOut("Signed out."));

const pages = {
  overview: overviewPage,
  consumer: consumerPage,
  "dead-letters": deadLettersPage,
  tail: tailPage,
  publish: publishPage,
  health: healthPage,
};

function route() {
  stopView();
  stopView = () => {};
  if (!token() && !session) { signOut(); return; }
  say("");
  $("#whoami").textContent = session ? "Signed in as " + session.principal : "";
  $("#signin").hidden = true;
  $("#nav").hidden = false;
  const view = $("#view");
  view.hidden = false;
  view.replaceChildren();
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "overview").split("/");
  const page = pages[name] || overviewPage;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === "#/" + name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const stop = page(view, rest.map(decodeURIComponent));
  if (typeof stop === "function") stopView = stop;
  $("#main").focus({ preventScroll: true });
}
window.addEventListener("hashchange", route);

// ---- overview ----

function overviewPage(view) {
  let sortKey = "behind", sortDesc = true, rows = [], dlCounts = new Map();
  const table = el("table", {}, el("caption", { className: "muted" }, "Consumers and queues, most behind first; lag is what the broker holds for each, not yet handed out. Refreshed every 5 s."));
  const cols = [
    ["id", "Consumer"], ["type", "Type", "hide-narrow"], ["paused", "State"],
    ["behind", "Lag (events)", "num"], ["oldest", "Oldest waiting", "hide-narrow"], ["in_flight", "In flight", "num"], ["requeued", "Requeued", "num"], ["dead", "Dead letters", "num"],
    ["live_sessions", "Streams", "num hide-narrow"], ["committed", "Committed cursor", "hide-narrow"],
  ];
  function header() {
    return el("thead", {}, el("tr", {}, cols.map(([k, label, cls]) =>
      el("th", { scope: "col", className: cls || "", "aria-sort": sortKey === k ? (sortDesc ? "descending" : "ascending") : "none" },
        el("button", { type: "button", className: "sort", onclick: () => { sortDesc = sortKey === k ? !sortDesc : true; sortKey = k; draw(); } }, label)))));
  }
  function value(d, k) {
    if (k === "dead") return dlCounts.get(d.id) || 0;
    if (k === "behind") return d.lag ? d.lag.events : -1;
    if (k === "oldest") return d.lag && d.lag.oldest_published_at ? Date.now() - new Date(d.lag.oldest_published_at).getTime() : -1;
    if (k === "paused") return d.paused ? 1 : 0;
    return d[k];
  }
  function draw() {
    const sorted = [...rows].sort((a, b) => {
      const x = value(a, sortKey), y = value(b, sortKey);
      const c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return sortDesc ? -c : c;
    });
    const body = el("tbody", {}, sorted.map((d) => el("tr", { "data-id": d.id },
      el("td", {}, el("a", { href: "#/consumer/" + encodeURIComponent(d.id) }, d.id)),
      el("td", { className: "hide-narrow" }, d.type),
      el("td", {}, d.paused ? "paused" : "active"),
      el("td", { className: "num" + (d.lag && d.lag.events > 0 ? " behind" : ""), "data-col": "lag" }, d.lag ? d.lag.events : "unknown"),
      el("td", { className: "hide-narrow" }, d.lag && d.lag.oldest_published_at ? age(d.lag.oldest_published_at) : (d.lag && d.lag.events === 0 ? "—" : "")),
      el("td", { className: "num" + (d.in_flight > 0 ? " behind" : ""), "data-col": "in_flight" }, d.in_flight),
      el("td", { className: "num" }, d.requeued),
      el("td", { className: "num" + (dlCounts.get(d.id) ? " behind" : ""), "data-col": "dead" },
        dlCounts.get(d.id) ? el("a", { href: "#/dead-letters/" + encodeURIComponent(d.id) }, dlCounts.get(d.id)) : "0"),
      el("td", { className: "num hide-narrow" }, d.live_sessions),
      el("td", { className: "hide-narrow muted" }, d.committed))));
    table.replaceChildren(table.firstChild, header(), body);
    if (!rows.length) body.append(el("tr", {}, el("td", { colSpan: cols.length }, "No consumers yet.")));
  }
  async function load() {
    try {
      const [ds, dls] = await Promise.all([api("GET", "/v1/event-destinations?lag=true"), deadLetterCounts()]);
      rows = ds.destinations || [];
      dlCounts = dls;
      draw();
      say(`Updated ${new Date().toLocaleTimeString()}.`);
    } catch (e) { if (e.status !== 401) say(e.message, true); }
  }
  view.append(el("h2", {}, "Overview"),
    el("div", { className: "row" }, el("button", { type: "button", id: "refresh", className: "secondary", onclick: load }, "Refresh now")),
    el("div", { className: "table-wrap" }, table));
  load();
  const timer = setInterval(load, refreshEvery);
  return () => clearInterval(timer);
}

// deadLetterCounts counts dead letters per origin queue (up to 1,000, the
// first pages); a principal without the dead-letter permission sees none.
async function deadLetterCounts() {
  const counts = new Map();
  try {
    let page = "";
    for (let i = 0; i < 10; i++) {
      const res = await api("GET", "/api/v1beta/dead-letters?limit=100" + (page ? "&page_token=" + encodeURIComponent(page) : ""));
      for (const d of res.dead_letters || []) counts.set(d.origin_queue, (counts.get(d.origin_queue) || 0) + 1);
      page = res.next_page_token;
      if (!page) break;
    }
  } catch (e) { if (e.status !== 403) throw e; }
  return counts;
}

// ---- one consumer ----

function consumerPage(view, [id]) {
  const facts = el("dl");
  const actions = el("div", { className: "row" });
  const leases = el("table", { id: "leases" });
  view.append(el("h2", {}, "Consumer ", el("code", {}, id)), facts, actions,
    el("p", {}, el("a", { href: "#/dead-letters/" + encodeURIComponent(id) }, "Its dead letters")),
    el("h3", {}, "Leases in flight"), el("div", { className: "table-wrap" }, leases));
  async function loadLeases() {
    try {
      const res = await api("GET", `/v1/event-destinations/${encodeURIComponent(id)}/leases`);
      const list = res.leases || [];
      leases.replaceChildren(
        el("caption", { className: "muted" }, `${list.length} lease(s): what is handed out and not yet acknowledged, or waiting for redelivery`),
        el("thead", {}, el("tr", {}, ["First event", "Events", "Attempt", "State", "Expires or due"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, list.length ? list.map((l) => el("tr", { "data-first": l.first },
          el("td", { className: "muted" }, l.first), el("td", { className: "num" }, l.count),
          el("td", { className: "num", "data-col": "attempt" }, l.attempt),
          el("td", { "data-col": "state" }, l.state + (l.session ? " (stream)" : "")),
          el("td", {}, l.expires_at ? localTime(l.expires_at) : "now"))) : el("tr", {}, el("td", { colSpan: 5 }, "None."))));
    } catch (e) { if (e.status !== 401) say(e.message, true); }
  }
  async function load() {
    try {
      const d = await api("GET", "/v1/event-destinations/" + encodeURIComponent(id));
      const rp = d.retry_policy, dp = d.dead_letter_policy;
      const pairs = [
        ["State", d.paused ? "paused" : "active"], ["Event type", d.type],
        ["Filter groups", JSON.stringify(d.filter_groups)], ["Created", localTime(d.created_at)],
        ["Lag", d.lag ? `${d.lag.events} events` + (d.lag.oldest_published_at ? `, oldest published ${localTime(d.lag.oldest_published_at)}` : "") : "unknown (the broker does not tell)"],
        ["Committed cursor", d.committed], ["In flight", d.in_flight], ["Requeued", d.requeued],
        ["Streams attached", d.live_sessions],
        ["Retry policy", rp ? JSON.stringify(rp) : "redeliver at once"],
        ["Dead-letter policy", dp ? JSON.stringify(dp) : "the deployment's delivery limit"],
        ["Ack timeout", d.ack_timeout ? d.ack_timeout + " s" : "the deployment's"],
      ];
      facts.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
      actions.replaceChildren(
        el("button", { type: "button", id: "pause", onclick: () => act(d.paused ? "resume" : "pause") }, d.paused ? "Resume" : "Pause"),
        el("button", { type: "button", id: "delete", className: "danger", onclick: remove }, "Delete"));
      loadLeases();
    } catch (e) { say(e.message, true); }
  }
  async function act(verb) {
    try { await api("POST", `/v1/event-destinations/${encodeURIComponent(id)}/${verb}`); say(`${id}: ${verb}d.`); load(); }
    catch (e) { say(e.message, true); }
  }
  async function remove() {
    if (!confirm(`Delete ${id}? Its cursor and in-flight leases are lost.`)) return;
    try { await api("DELETE", "/v1/event-destinations/" + encodeURIComponent(id)); say(`${id} deleted.`); location.hash = "#/overview"; }
    catch (e) { say(e.message, true); }
  }
  load();
}

// ---- dead letters ----

function deadLettersPage(view, [origin]) {
  const fOrigin = el("input", { type: "text", id: "dl-origin", value: origin || "" });
  const fReason = el("input", { type: "text", id: "dl-reason" });
  const fAge = el("select", { id: "dl-age" }, el("option", { value: "" }, "any age"),
    el("option", { value: "3600" }, "older than 1 h"), el("option", { value: "86400" }, "older than 1 day"));
  const table = el("table");
  const detail = el("pre", { id: "dl-detail", hidden: true, tabIndex: 0, "aria-label": "Selected dead letter" });
  let all = [];
  const bulk = (action) => el("button", { type: "button", className: action === "DISCARD" ? "danger" : "secondary", "data-bulk": action, onclick: () => triage(selected(), action) }, `${action[0] + action.slice(1).toLowerCase()} selected`);
  view.append(el("h2", {}, "Dead letters"),
    el("div", { className: "row" },
      el("div", {}, el("label", { for: "dl-origin" }, "Consumer"), fOrigin),
      el("div", {}, el("label", { for: "dl-reason" }, "Reason"), fReason),
      el("div", {}, el("label", { for: "dl-age" }, "Age"), fAge),
      el("button", { type: "button", onclick: draw }, "Filter")),
    el("div", { className: "row" }, bulk("REPLAY"), bulk("DISCARD"), bulk("LEAVE")),
    el("div", { className: "table-wrap" }, table), detail);
  function visible() {
    const o = fOrigin.value.trim(), r = fReason.value.trim().toUpperCase(), a = Number(fAge.value || 0);
    return all.filter((d) => (!o || d.origin_queue === o) && (!r || d.reason.includes(r)) &&
      (!a || Date.now() - new Date(d.dead_lettered_at).getTime() >= a * 1000));
  }
  function selected() {
    return [...table.querySelectorAll("input[type=checkbox][data-id]:checked")].map((c) => c.dataset.id);
  }
  function draw() {
    const list = visible();
    table.replaceChildren(
      el("caption", { className: "muted" }, `${list.length} of ${all.length} dead letters`),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, el("span", { className: "muted" }, "Select")),
        ["Event type", "Consumer", "Reason", "Deliveries", "Dead-lettered", "Actions"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, list.map((d) => el("tr", { "data-id": d.id },
        el("td", {}, el("input", { type: "checkbox", "data-id": d.id, "aria-label": "Select " + d.id })),
        el("td", {}, el("button", { type: "button", className: "secondary", onclick: () => show(d) }, d.event ? d.event.event_type : d.id)),
        el("td", {}, d.origin_queue), el("td", {}, d.reason), el("td", { className: "num" }, d.delivery_count),
        el("td", { title: d.dead_lettered_at }, `${localTime(d.dead_lettered_at)} (${age(d.dead_lettered_at)} ago)`),
        el("td", {}, ["REPLAY", "DISCARD", "LEAVE"].map((a) =>
          el("button", { type: "button", className: a === "DISCARD" ? "danger" : "secondary", "data-action": a, "aria-label": `${a} ${d.id}`, onclick: () => triage([d.id], a) }, a[0] + a.slice(1).toLowerCase())))))));
  }
  function show(d) {
    detail.hidden = false;
    detail.textContent = JSON.stringify(d, null, 2);
    detail.focus();
  }
  async function load() {
    try {
      all = [];
      let page = "";
      for (let i = 0; i < 10; i++) {
        const res = await api("GET", "/api/v1beta/dead-letters?limit=100" + (page ? "&page_token=" + encodeURIComponent(page) : ""));
        all.push(...(res.dead_letters || []));
        page = res.next_page_token;
        if (!page) break;
      }
      draw();
    } catch (e) { say(e.message, true); }
  }
  async function triage(ids, action) {
    if (!ids.length) { say("Select dead letters first.", true); return; }
    if (action === "DISCARD" && !confirm(`Discard ${ids.length} dead letter(s)? They are gone for good.`)) return;
    try {
      const res = await api("POST", "/api/v1beta/dead-letters/actions", { actions: ids.map((id) => ({ id, action })) });
      const outs = res.outcomes || [];
      const failed = outs.filter((o) => o.detail);
      say(`${action}: ${outs.map((o) => o.outcome).join(", ")}` + (failed.length ? ` (${failed.map((o) => o.detail).join("; ")})` : ""), failed.length > 0);
      load();
    } catch (e) { say(e.message, true); }
  }
  load();
}

// ---- live tail ----

function tailPage(view) {
  const fType = el("input", { type: "text", id: "tail-type", placeholder: "myapp.user.created" });
  const start = el("button", { type: "submit", id: "tail-start" }, "Start");
  const stop = el("button", { type: "button", id: "tail-stop", className: "secondary", disabled: true }, "Stop");
  const list = el("ol", { className: "tail", id: "tail-events", "aria-live": "polite" });
  let ctrl = null;
  const form = el("form", { className: "row" },
    el("div", {}, el("label", { for: "tail-type" }, "Event type"), fType), start, stop);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); begin(); });
  stop.addEventListener("click", end);
  view.append(el("h2", {}, "Live tail"),
    el("p", { className: "muted" }, "Opens a non-durable stream with one filter; events arrive below, newest first."), form, list);
  function end() {
    if (ctrl) ctrl.abort();
    ctrl = null;
    start.disabled = false; stop.disabled = true;
  }
  async function begin() {
    const type = fType.value.trim();
    if (!type) { say("An event type is needed.", true); return; }
    end();
    ctrl = new AbortController();
    start.disabled = true; stop.disabled = false;
    const q = new URLSearchParams({ filter_groups: JSON.stringify([{ event_type: type }]) });
    try {
      const res = await fetch("/api/v1beta/events/stream?" + q, {
        headers: { ...authHeaders(), Accept: "text/event-stream" }, signal: ctrl.signal, cache: "no-store", credentials: "same-origin",
      });
      if (!res.ok) {
        let msg = res.statusText;
        try { msg = (await res.json()).message || msg; } catch { /* not JSON */ }
        throw new APIError(res.status, `${res.status}: ${msg}`);
      }
      await readSSE(res.body, (name, data) => {
        if (name === "connected") { say(`Tailing ${type}.`); list.dataset.connected = "true"; }
        else if (name === "event") {
          let ev = {};
          try { ev = JSON.parse(data); } catch { /* shown raw */ }
          list.prepend(el("li", { "data-type": ev.event_type || "" },
            el("strong", {}, ev.event_type || "event"), " ", el("span", { className: "muted" }, localTime(ev.published_at)),
            el("pre", {}, JSON.stringify(ev.message ?? data, null, 2))));
        } else if (name === "error") { say("The stream ended: " + data, true); }
      });
    } catch (e) { if (e.name !== "AbortError") say(e.message, true); }
    end();
  }
  return end;
}

// readSSE parses a text/event-stream body, calling onFrame(event, data)
// per frame; comments (keep-alives) are skipped.
async function readSSE(body, onFrame) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
      let name = "message";
      const data = [];
      for (const line of frame.split(/\r?\n/)) {
        if (line.startsWith(":")) continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "event") name = val;
        else if (field === "data") data.push(val);
      }
      if (data.length) onFrame(name, data.join("\n"));
    }
  }
}

// ---- publish ----

function publishPage(view) {
  const fType = el("input", { type: "text", id: "pub-type", required: true, placeholder: "myapp.user.created" });
  const fResource = el("input", { type: "text", id: "pub-resource", placeholder: "optional, e.g. /users/123" });
  const fMsg = el("textarea", { id: "pub-message", value: '{"hello": "world"}' });
  const out = el("pre", { id: "pub-result", hidden: true });
  const form = el("form", {},
    el("label", { for: "pub-type" }, "Event type"), fType,
    el("label", { for: "pub-resource" }, "Resource id"), fResource,
    el("label", { for: "pub-message" }, "Message (a JSON object)"), fMsg,
    el("div", { className: "row" }, el("button", { type: "submit", id: "pub-send" }, "Publish")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    let message;
    try { message = JSON.parse(fMsg.value); } catch (e) { say("The message is not JSON: " + e.message, true); return; }
    const event = { event_type: fType.value.trim(), message };
    if (fResource.value.trim()) event.resource = { resource_id: fResource.value.trim() };
    try {
      const res = await api("POST", "/api/v1beta/events", { event });
      out.hidden = false;
      out.textContent = JSON.stringify(res, null, 2);
      say("Published.");
    } catch (e) { say(e.message, true); }
  });
  view.append(el("h2", {}, "Publish a test event"), form, out);
}

// ---- health ----

function healthPage(view) {
  const facts = el("dl", { id: "health" });
  view.append(el("h2", {}, "Health"), facts);
  (async () => {
    const pairs = [];
    try {
      const live = await (await fetch("/health", { cache: "no-store" })).json();
      pairs.push(["Version", live.version || "unknown"], ["Live", live.status || "ok"]);
    } catch (e) { pairs.push(["Live", "unreachable: " + e.message]); }
    try {
      const res = await fetch("/health/ready", { cache: "no-store" });
      const body = await res.json().catch(() => ({}));
      pairs.push(["Ready", res.ok ? "ready" : `not ready (${res.status})`]);
      for (const [k, v] of Object.entries(body.checks || {})) pairs.push([`Ready: ${k}`, v]);
      if (body.failed && body.failed.length) pairs.push(["Failed", body.failed.join(", ")]);
    } catch (e) { pairs.push(["Ready", "unreachable: " + e.message]); }
    try {
      const info = await api("GET", "/v1/info");
      const v = info.version || {};
      if (v.commit || v.date) pairs.push(["Build", [v.commit, v.date].filter(Boolean).join(", ")]);
      pairs.push(["Profile", info.profile], ["Function", info.function],
        ["Broker", info.broker || "none"], ["Store", info.store || "none"],
        ["Accepted tokens", info.auth], ["Console sign-in", info.console_sign_in],
        ["Telemetry", info.telemetry]);
    } catch (e) {
      if (e.status === 403) pairs.push(["Configuration", "not shown: it needs the manage:destinations permission"]);
      else if (e.status !== 401) pairs.push(["Configuration", e.message]);
    }
    facts.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
  })();
}

// start asks the server whether sign-in through the identity provider is
// on and whether this browser holds a session, then shows a page.
async function start() {
  try {
    const res = await fetch("/console/session", { cache: "no-store", credentials: "same-origin" });
    if (res.ok) {
      const info = await res.json();
      oidc = !!info.oidc;
      if (info.signed_in && !token()) session = info;
    }
  } catch { /* no session endpoint: tokens only */ }
  route();
}
start();
