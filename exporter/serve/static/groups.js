// Groups: every group (consumer groups and share groups, by kind) with its status, cause, lag,
// lag seconds, members, last commit and a lag-seconds sparkline. Sorted, filtered and paged in the browser: the list
// of 10,000 groups arrives once per refresh (gzipped) and only one page is in the DOM.

import { sparkline } from "./chart.js";
import {
  causeText, el, every, fmtAgo, fmtInt, fmtSeconds, getJson, groupHref, keepFocus, severity,
  statusBadge, STATUSES,
} from "./util.js";

const PAGE_SIZE = 100;
const REFRESH_MS = 5000;

/** Group kinds as Kafka's ListGroups types them (a share group is a KIP-932 queue). */
const KINDS = ["CLASSIC", "CONSUMER", "SHARE", "STREAMS"];

const COLUMNS = [
  { key: "group", label: "Group", value: (g) => g.group },
  { key: "kind", label: "Kind", value: (g) => g.kind ?? "" },
  { key: "status", label: "Status", value: (g) => severity(g.status) },
  { key: "cause", label: "Cause", value: (g) => causeText(g.cause) },
  { key: "lag", label: "Lag", num: true, value: (g) => g.total_lag ?? -1 },
  { key: "lag_seconds", label: "Lag (s)", num: true, value: (g) => g.max_lag_seconds ?? -1 },
  { key: "members", label: "Members", num: true, value: (g) => g.members },
  { key: "last_commit", label: "Last commit", value: (g) => g.last_commit_ms ?? 0 },
  { key: "sparkline", label: "Lag seconds, last hour" },
];

export function mountGroups(main) {
  document.title = "Groups · offsetwatch";
  const params = new URLSearchParams(location.search);
  const state = {
    query: params.get("q") ?? "",
    status: params.get("status") ?? "",
    kind: params.get("kind") ?? "",
    sort: params.get("sort") ?? "status",
    descending: (params.get("order") ?? (params.get("sort") ? "asc" : "desc")) === "desc",
    page: Math.max(0, Number(params.get("page") ?? 1) - 1),
    groups: [],
    history: { times_ms: [], groups: {} },
    shown: [],
    health: null,
    loaded: false,
    error: null,
  };

  const filter = el("input", { type: "search", id: "group-filter", "data-filter": true,
    value: state.query, placeholder: "part of a group name", autocomplete: "off",
    "aria-describedby": "filter-hint" });
  const statusSelect = el("select", { id: "status-filter" },
    el("option", { value: "" }, "any status"),
    STATUSES.map((s) => el("option", { value: s, selected: s === state.status }, s)));
  const kindSelect = el("select", { id: "kind-filter" },
    el("option", { value: "" }, "any kind"),
    KINDS.map((k) => el("option", { value: k, selected: k === state.kind }, k)));
  const banner = el("div", { role: "status" });
  const counts = el("p", { class: "summary", id: "group-count", "aria-live": "polite" });
  const head = el("tr");
  const body = el("tbody");
  const pageInfo = el("span", { id: "page-info" });
  const prev = el("button", { type: "button", id: "prev-page" }, "← Previous");
  const next = el("button", { type: "button", id: "next-page" }, "Next →");

  main.replaceChildren(
    el("h1", {}, "Consumer groups"),
    banner,
    el("div", { class: "controls", role: "search" },
      el("label", { for: "group-filter" }, "Filter by name", filter),
      el("label", { for: "status-filter" }, "Status", statusSelect),
      el("label", { for: "kind-filter" }, "Kind", kindSelect),
      el("span", { id: "filter-hint", class: "muted" },
        "Press ", el("span", { class: "kbd" }, "/"), " to filter")),
    counts,
    el("table", { id: "groups", "aria-describedby": "group-count" },
      el("thead", {}, head), body),
    el("nav", { class: "pager", "aria-label": "Pages" }, prev, pageInfo, next),
  );

  function syncUrl() {
    const p = new URLSearchParams();
    if (state.query) p.set("q", state.query);
    if (state.status) p.set("status", state.status);
    if (state.kind) p.set("kind", state.kind);
    if (state.sort !== "status" || !state.descending) {
      p.set("sort", state.sort);
      p.set("order", state.descending ? "desc" : "asc");
    }
    if (state.page) p.set("page", String(state.page + 1));
    const search = p.toString();
    history.replaceState(null, "", `/groups${search ? `?${search}` : ""}`);
  }

  function renderHead() {
    head.replaceChildren(...COLUMNS.map((column) => {
      if (!column.value) return el("th", { scope: "col" }, column.label);
      const sorted = state.sort === column.key;
      return el("th", { scope: "col", class: column.num ? "num" : null,
        "aria-sort": sorted ? (state.descending ? "descending" : "ascending") : "none" },
        el("button", { type: "button", "data-sort": column.key, onclick: () => {
          state.descending = sorted ? !state.descending : column.key !== "group";
          state.sort = column.key;
          state.page = 0;
          syncUrl();
          renderHead();
          renderRows();
          head.querySelector(`[data-sort="${column.key}"]`).focus();
        } }, column.label));
    }));
  }

  function visible() {
    const query = state.query.toLowerCase();
    const rows = state.groups.filter((g) => (!query || g.group.toLowerCase().includes(query))
      && (!state.status || g.status === state.status) && (!state.kind || g.kind === state.kind));
    const column = COLUMNS.find((c) => c.key === state.sort) ?? COLUMNS[1];
    const sign = state.descending ? -1 : 1;
    rows.sort((a, b) => {
      const va = column.value(a), vb = column.value(b);
      if (va < vb) return -sign;
      if (va > vb) return sign;
      return a.group < b.group ? -1 : a.group > b.group ? 1 : 0;
    });
    return rows;
  }

  function renderRows() {
    const rows = visible();
    const pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const slice = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
    const now = Date.now();
    state.shown = slice.map((g) => g.group);
    body.replaceChildren(...slice.map((g) => {
      return el("tr", { "data-group": g.group },
        el("th", { scope: "row" }, el("a", { href: groupHref(g.group), "data-nav": true }, g.group)),
        el("td", { "data-col": "kind" }, g.kind ?? "–"),
        el("td", { "data-col": "status" }, statusBadge(g.status)),
        el("td", { "data-col": "cause" }, causeText(g.cause)),
        el("td", { class: "num", "data-col": "lag" }, fmtInt(g.total_lag)),
        el("td", { class: "num", "data-col": "lag_seconds" }, fmtSeconds(g.max_lag_seconds)),
        el("td", { class: "num", "data-col": "members" }, fmtInt(g.members)),
        // a share group never commits offsets: its consumers acknowledge records instead
        el("td", { "data-col": "last_commit", title: g.last_commit ?? "" },
          g.kind === "SHARE" ? "–" : fmtAgo(g.last_commit_ms, now)),
        el("td", { "data-col": "sparkline" }, sparkCell(g.group, now)));
    }));
    loadSparklines();
    const byStatus = {};
    for (const g of state.groups) byStatus[g.status] = (byStatus[g.status] ?? 0) + 1;
    const tally = STATUSES.filter((s) => byStatus[s]).map((s) => `${byStatus[s]} ${s}`).join(", ");
    counts.textContent = `${fmtInt(rows.length)} of ${fmtInt(state.groups.length)} groups shown`
      + (tally ? ` (all: ${tally})` : "");
    pageInfo.textContent = `Page ${state.page + 1} of ${pages}`;
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    if (state.loaded && rows.length === 0) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: COLUMNS.length, class: "muted" },
        state.groups.length ? "No group matches the filter." : "No consumer groups yet.")));
    }
  }

  function sparkCell(group, now) {
    const times = state.history.times_ms;
    const spark = state.history.groups[group] ?? [];
    const peak = Math.max(0, ...spark.filter((v) => v !== null));
    // the last hour, or less while the exporter has not been up that long
    const from = Math.max(now - 3600 * 1000, times.length ? times[0] : now - 3600 * 1000);
    return sparkline(times, spark, from, now,
      `lag seconds over the last hour, at most ${fmtSeconds(peak)}`);
  }

  // Sparklines only for the rows on screen: one small request per page shown, so 10,000
  // groups cost the same as 100. Rows are drawn first and never wait for them.
  let sparkTimer = null;
  let sparkAbort = null;
  function loadSparklines() {
    clearTimeout(sparkTimer);
    sparkTimer = setTimeout(async () => {
      sparkAbort?.abort();
      sparkAbort = new AbortController();
      const names = state.shown;
      if (!names.length) return;
      const query = names.map((n) => `group=${encodeURIComponent(n)}`).join("&");
      let answer;
      try {
        answer = await getJson(`/api/v1/history/lag-seconds?${query}`, sparkAbort.signal);
      } catch {
        return;
      }
      state.history = { times_ms: answer.times_ms, groups: answer.groups };
      const now = Date.now();
      for (const row of body.querySelectorAll("tr[data-group]")) {
        row.querySelector('[data-col="sparkline"]')?.replaceChildren(sparkCell(row.dataset.group, now));
      }
    }, 50);
  }

  function renderBanner() {
    const h = state.health;
    if (state.error) {
      banner.replaceChildren(el("p", { class: "notice error" }, state.error));
    } else if (h && !h.ready) {
      banner.replaceChildren(el("p", { class: "notice" },
        `Warming up: ${h.reason ?? "the exporter is not ready"}. Lag and status settle once `
        + "it has read all of __consumer_offsets."));
    } else {
      banner.replaceChildren();
    }
  }

  let debounce = null;
  filter.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      state.query = filter.value.trim();
      state.page = 0;
      syncUrl();
      renderRows();
    }, 120);
  });
  statusSelect.addEventListener("change", () => {
    state.status = statusSelect.value;
    state.page = 0;
    syncUrl();
    renderRows();
  });
  kindSelect.addEventListener("change", () => {
    state.kind = kindSelect.value;
    state.page = 0;
    syncUrl();
    renderRows();
  });
  prev.addEventListener("click", () => { state.page--; syncUrl(); renderRows(); });
  next.addEventListener("click", () => { state.page++; syncUrl(); renderRows(); });

  renderHead();
  const timer = every(REFRESH_MS, async (signal) => {
    try {
      const [groups, health] = await Promise.all([
        getJson("/api/v1/groups", signal),
        getJson("/api/v1/health", signal).catch(() => null),
      ]);
      state.groups = groups;
      state.health = health;
      state.error = null;
    } catch (error) {
      if (error.name === "AbortError") throw error;
      state.error = `Could not load the groups (${error.message}); retrying.`;
    }
    const first = !state.loaded;
    state.loaded = true;
    renderBanner();
    keepFocus(body, renderRows);
    if (first) {
      main.dataset.ready = "groups";
      performance.mark("offsetwatch:groups-usable");
    }
  });
  return {
    unmount() {
      timer.stop();
      clearTimeout(debounce);
      clearTimeout(sparkTimer);
      sparkAbort?.abort();
      delete main.dataset.ready;
    },
  };
}
