// Weft console: a single page over the server's own REST API (/rest/v2) and /metrics.
// No framework and nothing fetched from elsewhere: the server embeds these files.
// Every value from the server reaches the page through textContent, never as HTML.
"use strict";

// ---------------------------------------------------------------------------------------
// Talking to the server

const AUTH_KEY = "weft.console.auth";
const USER_KEY = "weft.console.user";

class ApiError extends Error {
  constructor(status, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
  }
}

/** A REST call: credentials from the login form, errors as ApiError with the server's text. */
async function api(method, path, options = {}) {
  const headers = { "X-Requested-With": "XMLHttpRequest", ...(options.headers || {}) };
  const auth = sessionStorage.getItem(AUTH_KEY);
  if (auth) headers.Authorization = auth;
  let response;
  try {
    response = await fetch(path, { method, headers, body: options.body, cache: "no-store" });
  } catch (error) {
    throw new ApiError(0, `The server did not answer (${error.message}).`);
  }
  if (response.status === 401) {
    // A refusal of credentials the user has since replaced (a request still under way when
    // they logged in again) asks for nothing.
    if (auth === sessionStorage.getItem(AUTH_KEY)) askLogin(auth ? "Wrong user or password." : null);
    throw new ApiError(401, "Log in to see this page.");
  }
  if (!response.ok && !(options.allow || []).includes(response.status)) {
    const text = (await response.text()).trim();
    throw new ApiError(response.status, text || `${response.status} ${response.statusText}`);
  }
  return response;
}

async function getJson(path, options) {
  return (await api("GET", path, options)).json();
}

const cachePath = (name) => `/rest/v2/caches/${encodeURIComponent(name)}`;

// Keys and values are bytes. Listings are asked for in Base64 so that any key round-trips
// (to delete it, say); they are shown as text when they are UTF-8, else as hex.
const BINARY = { "Key-Content-Type": "application/octet-stream" };

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

// Control characters other than tab and line breaks make bytes binary, as invalid UTF-8 does.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

function showBytes(bytes) {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    if (!CONTROL.test(text)) return { text, binary: false };
  } catch {
    // Not UTF-8: shown as hex below.
  }
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return { text: `0x${hex}`, binary: true };
}

// ---------------------------------------------------------------------------------------
// Building the page

/** An element: h("td", { class: "num" }, "12", child, ...). Strings become text nodes. */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replaces an element's children: arrays are flattened, null and false left out. */
function fill(element, ...children) {
  element.replaceChildren(
    ...children.flat().filter((child) => child !== undefined && child !== null && child !== false),
  );
}

function table(headings, rows, attributes = {}) {
  return h(
    "table",
    attributes,
    h("thead", {}, h("tr", {}, headings.map(([label, cls]) => h("th", { class: cls }, label)))),
    h("tbody", {}, rows),
  );
}

function badge(status) {
  const tone = { HEALTHY: "ok", HEALTHY_REBALANCING: "warn", DEGRADED: "bad", stable: "ok" }[status];
  return h("span", { class: `badge ${tone || ""}`, dataset: { status } }, status);
}

function formatBytes(bytes) {
  if (!Number.isFinite(bytes)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

function formatNumber(value) {
  if (!Number.isFinite(value)) return "–";
  if (Math.abs(value) >= 1e6) return `${(value / 1e6).toFixed(2)} M`;
  if (Math.abs(value) >= 1e4) return `${(value / 1e3).toFixed(1)} k`;
  return Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 2 : 1);
}

function notify(message, isError = false) {
  const notice = document.getElementById("notice");
  notice.textContent = message;
  notice.className = isError ? "error" : "";
  notice.hidden = false;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => (notice.hidden = true), isError ? 8000 : 3000);
}

function failure(error) {
  if (error instanceof ApiError && error.status === 401) return h("p", { class: "muted" }, error.message);
  return h("p", { class: "error", role: "alert" }, error.message);
}

// ---------------------------------------------------------------------------------------
// Login (only servers with users ask for it)

function askLogin(message) {
  const dialog = document.getElementById("login");
  const error = document.getElementById("login-error");
  error.hidden = !message;
  error.textContent = message || "";
  if (!dialog.open) dialog.showModal();
}

function setupLogin() {
  const form = document.getElementById("login-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const user = form.elements.user.value;
    const password = form.elements.password.value;
    const bytes = new TextEncoder().encode(`${user}:${password}`);
    sessionStorage.setItem(AUTH_KEY, `Basic ${btoa(String.fromCharCode(...bytes))}`);
    sessionStorage.setItem(USER_KEY, user);
    form.elements.password.value = "";
    document.getElementById("login").close();
    showUser();
    showServer();
    route();
  });
  document.getElementById("logout").addEventListener("click", () => {
    sessionStorage.removeItem(AUTH_KEY);
    sessionStorage.removeItem(USER_KEY);
    location.reload();
  });
}

function showUser() {
  const user = sessionStorage.getItem(USER_KEY);
  document.getElementById("user").textContent = user ? `as ${user}` : "";
  document.getElementById("logout").hidden = !user;
}

async function showServer() {
  try {
    const container = await getJson("/rest/v2/container");
    document.getElementById("server").textContent = `${container.node_name} · ${container.version}`;
  } catch {
    // The page itself says what went wrong.
  }
}

// ---------------------------------------------------------------------------------------
// Pages. Each renders into `main` and returns what stops its timers, if it has any.

async function cachesPage(main) {
  fill(main, h("h1", {}, "Caches"), h("p", { class: "muted" }, "Loading…"));
  const [caches, health] = await Promise.all([
    getJson("/rest/v2/caches?action=detailed"),
    getJson("/rest/v2/container/health"),
  ]);
  const healthOf = new Map((health.cache_health || []).map((c) => [c.cache_name, c.status]));
  const details = await Promise.all(
    caches.map((cache) => getJson(cachePath(cache.name)).catch(() => null)),
  );
  const rows = caches.map((cache, i) => {
    const detail = details[i] || {};
    const stats = detail.stats || {};
    return h(
      "tr",
      { dataset: { cache: cache.name } },
      h("td", {}, h("a", { href: `#/caches/${encodeURIComponent(cache.name)}` }, cache.name)),
      h("td", {}, cache.type),
      h("td", {}, badge(healthOf.get(cache.name) || cache.health)),
      h("td", { class: "num" }, formatNumber(detail.size)),
      h("td", { class: "num" }, formatBytes(stats.data_memory_used)),
      h("td", { class: "num" }, formatNumber(stats.hits)),
      h("td", { class: "num" }, formatNumber(stats.misses)),
      h("td", { class: "num" }, formatNumber(stats.stores)),
    );
  });
  fill(main,
    h("h1", {}, "Caches"),
    caches.length
      ? table(
          [["Name"], ["Mode"], ["Health"], ["Entries", "num"], ["Memory", "num"], ["Hits", "num"], ["Misses", "num"], ["Stores", "num"]],
          rows,
          { id: "caches" },
        )
      : h("p", { class: "muted" }, "No caches."),
    createCacheForm(),
  );
}

function createCacheForm() {
  const templates = ["org.infinispan.LOCAL", "org.infinispan.DIST_SYNC", "org.infinispan.DIST_ASYNC", "org.infinispan.REPL_SYNC", "org.infinispan.REPL_ASYNC"];
  const form = h(
    "form",
    { id: "create-cache" },
    h(
      "div",
      { class: "inline form" },
      h("label", {}, "Name", h("input", { name: "name", required: true, pattern: "[A-Za-z0-9._\\-]+", placeholder: "sessions" })),
      h(
        "label",
        {},
        "From",
        h(
          "select",
          { name: "template" },
          h("option", { value: "" }, "the configuration below"),
          templates.map((t) => h("option", { value: t }, t)),
        ),
      ),
      h("button", { type: "submit", class: "primary" }, "Create"),
    ),
    h(
      "label",
      {},
      "Configuration (JSON, as GET …?action=config shows it; empty for a default local cache)",
      h("textarea", { name: "config", placeholder: '{"local-cache": {"memory": {"max-count": "10000"}}}' }),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = form.elements.name.value.trim();
    const template = form.elements.template.value;
    const config = form.elements.config.value.trim();
    const query = template ? `?template=${encodeURIComponent(template)}` : "";
    const options = template ? {} : { body: config || '{"local-cache":{}}', headers: { "Content-Type": "application/json" } };
    try {
      await api("POST", cachePath(name) + query, options);
      notify(`Cache ${name} created.`);
      location.hash = `#/caches/${encodeURIComponent(name)}`;
    } catch (error) {
      notify(error.message, true);
    }
  });
  return h("div", { class: "panel" }, h("h2", {}, "Create a cache"), form);
}

async function cachePage(main, name, tab) {
  const base = `#/caches/${encodeURIComponent(name)}`;
  const tabs = [["entries", "Entries"], ["configuration", "Configuration"], ["statistics", "Statistics"]];
  const details = await getJson(cachePath(name));
  const header = h(
    "div",
    { class: "row" },
    h(
      "div",
      {},
      h("h1", {}, `Cache `, h("span", { id: "cache-name" }, name)),
      h("p", { class: "muted" }, `${details.mode || details.configuration?.mode || ""} · ${formatNumber(details.size)} entries`),
    ),
    h("span", { class: "spacer" }),
    h(
      "div",
      {},
      h("button", { type: "button", id: "clear-cache", onclick: () => clearCache(name) }, "Clear"),
      " ",
      h("button", { type: "button", class: "danger", id: "delete-cache", onclick: () => deleteCache(name) }, "Delete cache"),
    ),
  );
  const nav = h(
    "nav",
    { class: "tabs" },
    tabs.map(([id, label]) => h("a", { href: `${base}/${id}`, class: id === tab ? "active" : "" }, label)),
  );
  const body = h("div", { id: `tab-${tab}` });
  fill(main, h("p", {}, h("a", { href: "#/caches" }, "← Caches")), header, nav, body);
  if (tab === "configuration") {
    const config = await getJson(`${cachePath(name)}?action=config`);
    body.append(h("pre", { id: "configuration" }, JSON.stringify(config, null, 2)));
  } else if (tab === "statistics") {
    const stats = await getJson(`${cachePath(name)}?action=stats`);
    body.append(
      table(
        [["Statistic"], ["Value", "num"]],
        Object.entries(stats).map(([key, value]) => h("tr", {}, h("td", {}, key), h("td", { class: "num" }, String(value)))),
        { id: "statistics" },
      ),
    );
  } else {
    await entriesTab(body, name);
  }
}

async function clearCache(name) {
  if (!confirm(`Remove every entry of ${name}?`)) return;
  try {
    await api("POST", `${cachePath(name)}?action=clear`);
    notify(`Cache ${name} cleared.`);
    route();
  } catch (error) {
    notify(error.message, true);
  }
}

async function deleteCache(name) {
  if (!confirm(`Delete the cache ${name} and all its data?`)) return;
  try {
    await api("DELETE", cachePath(name));
    notify(`Cache ${name} deleted.`);
    location.hash = "#/caches";
  } catch (error) {
    notify(error.message, true);
  }
}

const ENTRY_LIMITS = [50, 200, 1000];

async function entriesTab(body, name) {
  const state = entriesTab.state.name === name ? entriesTab.state : (entriesTab.state = { name, limit: ENTRY_LIMITS[0], filter: "" });
  const entryPath = (key) => `${cachePath(name)}/${encodeURIComponent(key)}`;

  // Look up one key.
  const lookup = h("form", { id: "lookup", class: "inline" },
    h("label", {}, "Key", h("input", { name: "key", required: true, placeholder: "exact key" })),
    h("button", { type: "submit" }, "Get"));
  const found = h("div", { id: "lookup-result" });
  lookup.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = lookup.elements.key.value;
    fill(found);
    try {
      const response = await api("GET", entryPath(key), { allow: [404], headers: { Accept: "text/plain" } });
      if (response.status === 404) {
        found.append(h("p", { class: "muted", dataset: { missing: key } }, `No entry for ${key}.`));
        return;
      }
      const value = showBytes(new Uint8Array(await response.arrayBuffer()));
      const ttl = response.headers.get("timeToLiveSeconds");
      found.append(
        h("dl", { class: "kv panel" },
          h("dt", {}, "Key"), h("dd", {}, h("code", {}, key)),
          h("dt", {}, "Value"), h("dd", { class: "value", id: "lookup-value" }, value.text),
          h("dt", {}, "Version"), h("dd", {}, (response.headers.get("ETag") || "").replaceAll('"', "")),
          h("dt", {}, "Lifespan"), h("dd", {}, ttl && ttl !== "-1" ? `${ttl} s` : "none")),
      );
    } catch (error) {
      found.append(failure(error));
    }
  });

  // Write one entry.
  const put = h("form", { id: "put", class: "inline" },
    h("label", {}, "Key", h("input", { name: "key", required: true })),
    h("label", {}, "Value", h("input", { name: "value", size: 40 })),
    h("label", {}, "Lifespan (s)", h("input", { name: "lifespan", type: "number", min: 1, size: 6 })),
    h("label", {}, "Max idle (s)", h("input", { name: "maxidle", type: "number", min: 1, size: 6 })),
    h("button", { type: "submit", class: "primary" }, "Put"));
  put.addEventListener("submit", async (event) => {
    event.preventDefault();
    const headers = { "Content-Type": "text/plain; charset=UTF-8" };
    if (put.elements.lifespan.value) headers.timeToLiveSeconds = put.elements.lifespan.value;
    if (put.elements.maxidle.value) headers.maxIdleTimeSeconds = put.elements.maxidle.value;
    const key = put.elements.key.value;
    try {
      await api("PUT", entryPath(key), { body: put.elements.value.value, headers });
      notify(`Stored ${key}.`);
      put.reset();
      await loadList();
    } catch (error) {
      notify(error.message, true);
    }
  });

  // The listing: the first `limit` entries, filtered here by key.
  const filter = h("input", { id: "filter", placeholder: "filter listed keys", value: state.filter });
  const limit = h("select", { id: "limit" }, ENTRY_LIMITS.map((n) => h("option", { value: n, selected: n === state.limit }, `first ${n}`)));
  const list = h("div", { id: "entries" });
  filter.addEventListener("input", () => {
    state.filter = filter.value;
    draw();
  });
  limit.addEventListener("change", async () => {
    state.limit = Number(limit.value);
    await loadList();
  });
  let entries = [];
  function draw() {
    const needle = state.filter.toLowerCase();
    const shown = entries.filter((entry) => !needle || entry.key.text.toLowerCase().includes(needle));
    const rows = shown.map((entry) =>
      h("tr", { dataset: { key: entry.key.text } },
        h("td", { class: "value" }, entry.key.text),
        h("td", { class: "value" }, entry.value.text.length > 300 ? `${entry.value.text.slice(0, 300)}…` : entry.value.text),
        h("td", { class: "num" }, entry.ttl > 0 ? `${entry.ttl} s` : "–"),
        h("td", { class: "num" }, entry.version ?? ""),
        h("td", {}, h("button", { type: "button", class: "danger", onclick: () => remove(entry) }, "Delete"))),
    );
    fill(list,
      shown.length
        ? table([["Key"], ["Value"], ["Lifespan", "num"], ["Version", "num"], [""]], rows)
        : h("p", { class: "muted" }, entries.length ? "No listed key matches." : "The cache is empty."),
      entries.length >= state.limit ? h("p", { class: "muted" }, `Showing the first ${state.limit} entries; look a key up above to reach any other.`) : null,
    );
  }
  async function remove(entry) {
    try {
      await api("DELETE", `${cachePath(name)}/${encodeURIComponent(entry.rawKey)}`, { headers: BINARY, allow: [404] });
      notify(`Deleted ${entry.key.text}.`);
      await loadList();
    } catch (error) {
      notify(error.message, true);
    }
  }
  async function loadList() {
    try {
      const listed = await getJson(`${cachePath(name)}?action=entries&metadata=true&limit=${state.limit}`, { headers: BINARY });
      entries = listed.map((entry) => ({
        rawKey: entry.key,
        key: showBytes(fromBase64(entry.key)),
        value: showBytes(fromBase64(entry.value)),
        ttl: entry.timeToLiveSeconds,
        version: entry.version,
      }));
      entries.sort((a, b) => (a.key.text < b.key.text ? -1 : a.key.text > b.key.text ? 1 : 0));
      draw();
    } catch (error) {
      fill(list, failure(error));
    }
  }

  body.append(
    h("div", { class: "row" },
      h("div", { class: "panel" }, h("h2", {}, "Find an entry"), lookup, found),
      h("div", { class: "panel" }, h("h2", {}, "Put an entry"), put)),
    h("div", { class: "panel" }, h("div", { class: "inline form" }, filter, limit), list),
  );
  await loadList();
}
entriesTab.state = {};

// Colours for members in ownership charts, stable by position in the member list.
const PALETTE = ["#2f75b5", "#e07b39", "#3a9d5d", "#b8457c", "#7a5cc2", "#c9a227", "#2aa3a3", "#8c6d5a"];

async function clusterPage(main) {
  const draw = async () => {
    const [container, health, topology, rebalance] = await Promise.all([
      getJson("/rest/v2/container"),
      getJson("/rest/v2/container/health"),
      getJson("/rest/v2/cluster/topology"),
      getJson("/rest/v2/cluster/rebalance"),
    ]);
    const cluster = health.cluster_health || {};
    const members = topology.members || [];
    const unreachable = new Set(cluster.unreachable_nodes || []);
    const memberRows = members.map((member) =>
      h("tr", { dataset: { member: member.name } },
        h("td", {}, member.name, member.name === topology.node_name ? h("span", { class: "muted" }, " (this node)") : null),
        h("td", {}, member.address || "–"),
        h("td", {}, member.name === topology.coordinator ? "coordinator" : ""),
        h("td", {}, unreachable.has(member.name) ? badge("DEGRADED") : h("span", { class: "badge ok" }, "reachable"))),
    );
    const summary = h("div", { class: "panel" },
      h("dl", { class: "kv" },
        h("dt", {}, "Cluster"), h("dd", {}, cluster.cluster_name || container.cluster_name),
        h("dt", {}, "Health"), h("dd", { id: "cluster-health" }, badge(cluster.health_status || "HEALTHY")),
        h("dt", {}, "Members"), h("dd", { id: "member-count" }, String(members.length || container.cluster_size || 1)),
        h("dt", {}, "Answered by"), h("dd", {}, topology.node_name),
        h("dt", {}, "Unreachable"), h("dd", {}, [...unreachable].join(", ") || "none")));
    const progressByCache = new Map((rebalance.caches || []).map((c) => [c.cache, c]));
    const caches = (topology.caches || []).map((cache) => cacheTopology(cache, progressByCache.get(cache.cache)));
    fill(main,
      h("h1", {}, "Cluster"),
      summary,
      h("h2", {}, "Members"),
      table([["Name"], ["Address"], ["Role"], ["State"]], memberRows, { id: "members" }),
      h("h2", {}, "Clustered caches"),
      caches.length ? caches : h("p", { class: "muted", id: "no-clustered-caches" }, "No clustered cache: this node's caches are local. Declare a cache distributed or replicated to see its segments here."),
      h("p", { class: "muted" }, "Refreshed every 2 seconds."),
    );
  };
  await draw();
  const timer = setInterval(() => draw().catch((error) => notify(error.message, true)), 2000);
  return () => clearInterval(timer);
}

function cacheTopology(cache, progress) {
  const members = cache.members || [];
  const colour = (member) => PALETTE[Math.max(0, members.indexOf(member)) % PALETTE.length];
  const primaries = new Map(members.map((m) => [m, 0]));
  const copies = new Map(members.map((m) => [m, 0]));
  for (const owners of cache.owners || []) {
    if (owners.length) primaries.set(owners[0], (primaries.get(owners[0]) || 0) + 1);
    for (const owner of owners) copies.set(owner, (copies.get(owner) || 0) + 1);
  }
  const grid = h("div", { class: "segments", role: "img", "aria-label": `Primary owner of each of ${(cache.owners || []).length} segments` },
    (cache.owners || []).map((owners, segment) => {
      const cell = h("span", { title: `segment ${segment}: ${owners.join(", ") || "no owner"}` });
      cell.style.background = owners.length ? colour(owners[0]) : "#ccc";
      return cell;
    }));
  const legend = h("div", { class: "legend" }, members.map((member) => {
    const swatch = h("i");
    swatch.style.background = colour(member);
    return h("span", {}, swatch, `${member}: ${primaries.get(member) || 0} primary, ${copies.get(member) || 0} copies`);
  }));
  const fraction = progress ? progress.progress : 1;
  const bar = h("div");
  bar.style.width = `${Math.round(fraction * 100)}%`;
  const rebalancing = progress && progress.phase_number > 0;
  return h("section", { class: "panel", dataset: { cache: cache.cache } },
    h("h2", {}, cache.cache, " ", badge(cache.degraded ? "DEGRADED" : rebalancing ? "HEALTHY_REBALANCING" : "HEALTHY")),
    h("dl", { class: "kv" },
      h("dt", {}, "Topology"), h("dd", {}, `${cache.topology_id} (rebalance ${cache.rebalance_id})`),
      h("dt", {}, "Phase"), h("dd", {}, cache.phase),
      h("dt", {}, "This node"), h("dd", {}, `primary of ${cache.primary_segments}, holds ${cache.owned_segments} segments`)),
    h("h2", {}, "Rebalance"),
    h("div", { class: "progress", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": Math.round(fraction * 100) }, bar),
    h("p", { class: "muted rebalance" }, rebalancing
      ? `${Math.round(fraction * 100)} % · phase ${progress.phase_number} of 3 (${progress.phase}) · ${progress.segments_done} of ${progress.segments_total} segment copies · ${progress.members_confirmed} of ${progress.members_total} members confirmed`
      : "No rebalance under way."),
    h("h2", {}, "Segment ownership"),
    grid,
    legend);
}

// ---------------------------------------------------------------------------------------
// Metrics: /metrics sampled every 2 seconds, rates from counters, drawn on canvases.

const SAMPLE_MS = 2000;
const HISTORY = 90;
const samples = [];

/** Prometheus text format: the sum of every series of each metric name. */
function parseMetrics(text) {
  const totals = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([A-Za-z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[2]);
    if (Number.isFinite(value)) totals.set(match[1], (totals.get(match[1]) || 0) + value);
  }
  return totals;
}

const CHARTS = [
  { id: "requests", title: "Requests per second", unit: formatNumber, lines: [["all protocols", (s, p) => rate(s, p, "weft_request_duration_seconds_count")]] },
  {
    id: "operations",
    title: "Cache operations per second",
    unit: formatNumber,
    lines: [
      ["reads (hits)", (s, p) => rate(s, p, "weft_container_hits_total")],
      ["reads (misses)", (s, p) => rate(s, p, "weft_container_misses_total")],
      ["writes", (s, p) => rate(s, p, "weft_container_stores_total")],
      ["removes", (s, p) => rate(s, p, "weft_container_remove_hits_total") + rate(s, p, "weft_container_remove_misses_total")],
    ],
  },
  { id: "entries", title: "Entries", unit: formatNumber, lines: [["entries", (s) => s.values.get("weft_container_entries")]] },
  { id: "memory", title: "Memory", unit: formatBytes, lines: [["entries", (s) => s.values.get("weft_container_memory_bytes")], ["process (RSS)", (s) => s.values.get("process_resident_memory_bytes")]] },
  { id: "connections", title: "Client connections", unit: formatNumber, lines: [["open", (s) => s.values.get("weft_client_connections")]] },
  { id: "cpu", title: "CPU (cores busy)", unit: formatNumber, lines: [["process", (s, p) => rate(s, p, "process_cpu_seconds_total")]] },
];

function rate(sample, previous, name) {
  if (!previous) return NaN;
  const now = sample.values.get(name);
  const before = previous.values.get(name);
  if (now === undefined || before === undefined || now < before) return NaN;
  return (now - before) / ((sample.at - previous.at) / 1000);
}

async function sample() {
  const text = await (await api("GET", "/metrics")).text();
  samples.push({ at: Date.now(), values: parseMetrics(text) });
  if (samples.length > HISTORY + 1) samples.shift();
}

async function metricsPage(main) {
  const panels = CHARTS.map((chart) =>
    h("div", { class: "panel chart", id: `chart-${chart.id}` },
      h("span", { class: "now" }),
      h("h2", {}, chart.title),
      h("canvas", { width: 400, height: 170, "aria-label": chart.title }),
      h("div", { class: "legend" })));
  fill(main,
    h("h1", {}, "Metrics"),
    h("p", { class: "muted" }, `Sampled from /metrics every ${SAMPLE_MS / 1000} s; the last ${(HISTORY * SAMPLE_MS) / 60000} minutes.`),
    h("div", { class: "charts" }, panels),
  );
  const drawAll = () => CHARTS.forEach((chart, i) => drawChart(panels[i], chart));
  const tick = async () => {
    await sample();
    drawAll();
  };
  await tick();
  const timer = setInterval(() => tick().catch((error) => notify(error.message, true)), SAMPLE_MS);
  const resize = () => drawAll();
  addEventListener("resize", resize);
  return () => {
    clearInterval(timer);
    removeEventListener("resize", resize);
  };
}

function drawChart(panel, chart) {
  const canvas = panel.querySelector("canvas");
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 400;
  const height = canvas.clientHeight || 170;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);

  const series = chart.lines.map(([label, read]) => ({
    label,
    points: samples.map((s, i) => read(s, samples[i - 1])),
  }));
  const finite = series.flatMap((s) => s.points.filter(Number.isFinite));
  const top = niceCeiling(Math.max(1e-9, ...finite));
  const left = 62;
  const bottom = height - 18;
  const plotWidth = width - left - 8;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#5f6b7a";
  ctx.strokeStyle = "#e3e8ee";
  for (let i = 0; i <= 4; i++) {
    const y = 8 + ((bottom - 8) * i) / 4;
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(width - 8, y);
    ctx.stroke();
    ctx.fillText(chart.unit(top * (1 - i / 4)), 4, y + 4);
  }
  ctx.fillText(`${(HISTORY * SAMPLE_MS) / 60000} min ago`, left, height - 4);
  ctx.fillText("now", width - 30, height - 4);
  const x = (i) => left + plotWidth * ((HISTORY - (samples.length - 1 - i)) / HISTORY);
  const y = (v) => bottom - ((bottom - 8) * v) / top;
  series.forEach((s, n) => {
    ctx.strokeStyle = PALETTE[n % PALETTE.length];
    ctx.lineWidth = 2;
    ctx.beginPath();
    let pen = false;
    s.points.forEach((v, i) => {
      if (!Number.isFinite(v)) {
        pen = false;
        return;
      }
      if (pen) ctx.lineTo(x(i), y(v));
      else ctx.moveTo(x(i), y(v));
      pen = true;
    });
    ctx.stroke();
    // A sample between two gaps (or the first) has no line: a dot shows it.
    ctx.fillStyle = ctx.strokeStyle;
    s.points.forEach((v, i) => {
      if (Number.isFinite(v) && !Number.isFinite(s.points[i - 1]) && !Number.isFinite(s.points[i + 1])) {
        ctx.beginPath();
        ctx.arc(x(i), y(v), 2.5, 0, 2 * Math.PI);
        ctx.fill();
      }
    });
  });
  const latest = series.map((s) => s.points[s.points.length - 1]);
  panel.querySelector(".now").textContent = latest.map((v) => (Number.isFinite(v) ? chart.unit(v) : "–")).join(" · ");
  fill(panel.querySelector(".legend"),
    ...series.map((s, n) => {
      const swatch = h("i");
      swatch.style.background = PALETTE[n % PALETTE.length];
      return h("span", {}, swatch, s.label);
    }),
  );
}

function niceCeiling(value) {
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

// ---------------------------------------------------------------------------------------
// Routing: #/caches, #/caches/NAME[/TAB], #/cluster, #/metrics

let stopPage = null;
let generation = 0;

async function route() {
  if (stopPage) stopPage();
  stopPage = null;
  const mine = ++generation;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const main = document.getElementById("page");
  const section = parts[0] || "caches";
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.classList.toggle("active", link.dataset.nav === section);
  }
  document.title = `Weft · ${section}`;
  try {
    let stop;
    if (section === "caches" && parts[1]) stop = await cachePage(main, parts[1], parts[2] || "entries");
    else if (section === "caches") stop = await cachesPage(main);
    else if (section === "cluster") stop = await clusterPage(main);
    else if (section === "metrics") stop = await metricsPage(main);
    else fill(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/caches" }, "Back to the caches")));
    if (mine === generation) stopPage = stop || null;
    else if (stop) stop();
  } catch (error) {
    if (mine === generation) fill(main, h("h1", {}, "Weft"), failure(error));
  }
  if (mine === generation) document.body.dataset.page = section;
}

addEventListener("hashchange", route);
addEventListener("DOMContentLoaded", () => {
  setupLogin();
  showUser();
  showServer();
  route();
});
