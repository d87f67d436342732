// Small helpers shared by the views: DOM building, fetching, formatting, status badges.

/** Element builder: el("td", {class: "num"}, "12"). Children may be strings or nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export class HttpError extends Error {
  constructor(status, body) {
    super(`HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** GET a JSON document of the exporter's API; throws HttpError on a non-2xx answer. */
export async function getJson(path, signal) {
  const response = await fetch(path, { signal, headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    // Aborted while the body was read (a newer request replaced this one): an abort, never
    // an answer of null. An error page that is not JSON is still an HttpError below.
    if (error.name === "AbortError" || response.ok) throw error;
  }
  if (!response.ok) throw new HttpError(response.status, body);
  return body;
}

/** The path of a group's console page and API document (ids may hold any character). */
export const groupHref = (group) => `/groups/${encodeURIComponent(group)}`;
export const groupApi = (group) => `/api/v1/groups/${encodeURIComponent(group)}`;

/** Status names, best to worst, as the exporter's gauge numbers them (0-5). */
export const STATUSES = ["OK", "WARN", "REWIND", "STALL", "STOP", "ERR"];
const ICONS = { OK: "✓", WARN: "▲", REWIND: "↺", STALL: "‖", STOP: "■", ERR: "✕" };
const MEANING = {
  OK: "caught up or consuming normally",
  WARN: "consuming, but the lag grew over the whole window",
  REWIND: "the committed offset went backwards, and there is lag",
  STALL: "committing, but the offset has not moved while messages waited",
  STOP: "no commit for a whole window while messages waited",
  ERR: "log end unknown, or committed offset past the log end",
};

/** A status as text with an icon: colour is never the only signal. */
export function statusBadge(status) {
  const name = STATUSES.includes(status) ? status : "UNKNOWN";
  return el("span", { class: `status status-${name}`, title: MEANING[name] ?? "" },
    el("span", { "aria-hidden": "true" }, ICONS[name] ?? "?"), status ?? "unknown");
}

export const severity = (status) => { const i = STATUSES.indexOf(status); return i < 0 ? -1 : i; };

const integer = new Intl.NumberFormat("en-US");
export function fmtInt(value) {
  return value === null || value === undefined ? "–" : integer.format(value);
}

/** Seconds as "42 s", "3 m 20 s", "2 h 5 m", "3 d 4 h"; null as a dash. */
export function fmtSeconds(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (value < 10) return `${value.toFixed(1)} s`;
  let s = Math.round(value);
  if (s < 60) return `${s} s`;
  const d = Math.floor(s / 86400); s -= d * 86400;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} m`;
  return `${m} m ${s} s`;
}

/** How long ago an epoch-ms time was, relative to `now` ms. */
export function fmtAgo(ms, now = Date.now()) {
  if (!ms) return "never";
  return `${fmtSeconds(Math.max(0, now - ms) / 1000)} ago`;
}

export function fmtTime(ms) {
  if (!ms || ms < 0) return "–";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").replace("Z", "").slice(0, 23);
}

export const yesNo = (flag) => el("span", { class: flag ? "yes" : "no" }, flag ? "✓ yes" : "✕ no");

/** A timer that calls `task` now and then every `ms`, never overlapping; `stop()` ends it. */
export function every(ms, task) {
  let timer = null;
  let stopped = false;
  const controller = new AbortController();
  const run = async () => {
    try {
      await task(controller.signal);
    } catch (error) {
      if (error.name !== "AbortError") console.warn(error);
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return { stop() { stopped = true; clearTimeout(timer); controller.abort(); } };
}

/** The cause of a group, whatever shape the API gives it (string, object, absent). */
export function causeText(cause) {
  if (cause === null || cause === undefined || cause === "") return "";
  if (typeof cause === "string") return cause;
  return cause.cause ?? cause.name ?? cause.kind ?? JSON.stringify(cause);
}

/** Re-render `container` without losing the keyboard focus: the focused control (by id,
 * data-sort or link target) is focused again in the new content. */
export function keepFocus(container, render) {
  const active = document.activeElement;
  let selector = null;
  if (active && container.contains(active) && active !== container) {
    if (active.id) selector = `#${CSS.escape(active.id)}`;
    else if (active.dataset.sort) selector = `[data-sort="${CSS.escape(active.dataset.sort)}"]`;
    else if (active.getAttribute("href")) selector = `a[href="${CSS.escape(active.getAttribute("href"))}"]`;
  }
  render();
  if (selector) container.querySelector(selector)?.focus({ preventScroll: true });
}
