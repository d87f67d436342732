// Charts as plain SVG: a sparkline and a small time-series line chart.
// No library: the console draws a few lines over time, which SVG does in a few dozen lines,
// accessibly (role="img" with a text summary) and styled by the page's light/dark colours.

const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/** "M x y L x y ..." over the points with a value; a null value breaks the line. */
function pathOf(times, values, x, y) {
  let d = "";
  let pen = false;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined || Number.isNaN(v)) { pen = false; continue; }
    d += `${pen ? "L" : "M"}${x(times[i]).toFixed(1)} ${y(v).toFixed(1)}`;
    pen = true;
  }
  return d;
}

function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (v === null || v === undefined || Number.isNaN(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo === Infinity ? null : [lo, hi];
}

/** A 120x24 sparkline of `values` (aligned to the end of `times`) over [from, to] ms. */
export function sparkline(times, values, from, to, label) {
  const width = 120, height = 24;
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", "aria-label": label, class: "sparkline" });
  const t = times.slice(times.length - values.length);
  const range = extent(values);
  if (!range || t.length === 0) return node;
  const top = Math.max(range[1], 1);
  const x = (ms) => ((ms - from) / Math.max(1, to - from)) * (width - 2) + 1;
  const y = (v) => height - 2 - (v / top) * (height - 4);
  node.append(svg("path", { d: pathOf(t, values, x, y), class: "spark" }));
  return node;
}

const clock = (ms) => new Date(ms).toISOString().slice(11, 19);

/** Compact numbers for an axis: 1.2k, 3.4M. */
function short(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

/**
 * A line chart: `series` = [{name, values, cls}] over `times` (ms). `label` describes it for
 * screen readers; the axes show the time range and the value range.
 */
export function lineChart({ times, series, label, unit = "" }) {
  const width = 560, height = 200, left = 56, right = 10, top = 10, bottom = 24;
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart",
    role: "img", "aria-label": label });
  const all = series.flatMap((s) => s.values);
  const range = extent(all);
  if (!range || times.length === 0) {
    const text = svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" });
    text.textContent = "no history yet";
    node.append(text);
    return node;
  }
  let [lo, hi] = range;
  if (lo === hi) { lo = Math.min(0, lo); hi = hi === 0 ? 1 : hi * 1.05; }
  const t0 = times[0], t1 = Math.max(times[times.length - 1], t0 + 1);
  const x = (ms) => left + ((ms - t0) / (t1 - t0)) * (width - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (height - top - bottom);
  node.append(svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, class: "axis" }));
  node.append(svg("line", { x1: left, y1: height - bottom, x2: width - right,
    y2: height - bottom, class: "axis" }));
  const labels = [
    [left - 4, top + 9, "end", `${short(hi)}${unit}`],
    [left - 4, height - bottom, "end", `${short(lo)}${unit}`],
    [left, height - 6, "start", clock(t0)],
    [width - right, height - 6, "end", clock(t1)],
  ];
  for (const [lx, ly, anchor, content] of labels) {
    const text = svg("text", { x: lx, y: ly, "text-anchor": anchor });
    text.textContent = content;
    node.append(text);
  }
  for (const s of series) {
    node.append(svg("path", { d: pathOf(times, s.values, x, y), class: `line ${s.cls}`,
      "data-series": s.name }));
  }
  return node;
}

/** The delivery state of a batch as a class name: "unknown(7)" is "unknown". */
const stateClass = (state) => (state.startsWith("unknown") ? "unknown" : state);

/**
 * A share partition's records from its start offset to its log end as one bar (a queue seen
 * from the side): each persisted in-flight batch a segment coloured by delivery state, with its
 * delivery count written on it when there is room (and in its tooltip); poison batches are
 * outlined. The bar's background is the records past the batches: not delivered yet, or
 * acquired by a consumer right now (Kafka never persists "acquired").
 */
export function shareBar({ start, logEnd, batches, poison, label }) {
  const width = 360, height = 30, top = 3, bar = 20;
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", "aria-label": label, class: "share-bar" });
  const last = Math.max(start + 1, logEnd ?? 0, ...batches.map((b) => b.last_offset + 1));
  const x = (offset) => ((offset - start) / (last - start)) * width;
  node.append(svg("rect", { x: 0, y: top, width, height: bar, class: "waiting" }));
  const poisoned = new Set(poison.map((b) => `${b.first_offset}-${b.last_offset}`));
  for (const b of batches) {
    if (b.last_offset < start) continue;
    const first = Math.max(b.first_offset, start);
    const x0 = x(first), w = Math.max(1, x(b.last_offset + 1) - x0);
    const cls = `state-${stateClass(b.delivery_state)}`
      + (poisoned.has(`${b.first_offset}-${b.last_offset}`) ? " poison" : "");
    const rect = svg("rect", { x: x0, y: top, width: w, height: bar, class: cls,
      "data-state": b.delivery_state, "data-first": first, "data-last": b.last_offset,
      "data-count": b.delivery_count });
    const tip = svg("title");
    tip.textContent = `${first}–${b.last_offset}: ${b.delivery_state}, `
      + `delivered ${b.delivery_count} time${b.delivery_count === 1 ? "" : "s"}`;
    rect.append(tip);
    node.append(rect);
    if (w >= 22) {
      const count = svg("text", { x: x0 + w / 2, y: top + bar / 2 + 4, "text-anchor": "middle",
        class: "count" });
      count.textContent = `×${b.delivery_count}`;
      node.append(count);
    }
  }
  return node;
}
