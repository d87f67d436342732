// Exporter health: the problems /readyz lists (topics the exporter may not describe, stale
// __consumer_offsets partitions, failing sinks and parts), each with what to do; then ready,
// source up and lag, decode errors, checkpoint and snapshot ages, the live stream and the
// HTTP server, from /api/v1/health every two seconds.

import { el, every, fmtAgo, fmtInt, fmtSeconds, getJson, keepFocus, yesNo } from "./util.js";

const REFRESH_MS = 2000;

function row(label, value, id) {
  return el("tr", { id }, el("th", { scope: "row" }, label), el("td", {}, value));
}

function table(caption, rows) {
  return el("table", { class: "health" }, el("caption", {}, caption), el("tbody", {}, rows));
}

/** Short durations (a snapshot build) in milliseconds, longer ones as usual. */
function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  return seconds < 1 ? `${(seconds * 1000).toFixed(1)} ms` : fmtSeconds(seconds);
}

function counts(map) {
  const entries = Object.entries(map ?? {});
  return entries.length ? entries.map(([k, v]) => `${k}: ${fmtInt(v)}`).join(", ") : "none";
}

/** An ISO time of the body with how long ago it was, by the answer's own clock. */
function since(iso, nowMs) {
  if (!iso) return "–";
  return `${iso} (${fmtAgo(Date.parse(iso), nowMs)})`;
}

/** One kind of problem: what it means and what to do, then a row per item. */
function problem(id, title, advice, headers, rows) {
  return el("div", { id, class: "notice error problem" },
    el("h3", {}, title),
    el("p", {}, advice),
    el("table", {},
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)));
}

function notAuthorized(refused) {
  if (!refused?.length) return null;
  return problem("health-not-authorized",
    `Not authorized: ${fmtInt(refused.length)} resource(s) the brokers refuse to the exporter`,
    "The lag of the groups that consume a refused topic is unknown and they show cause "
      + "not_authorized; the rest is right. An administrator grants the ACL with the command "
      + "beside it (one click selects it to copy):",
    ["Resource", "Operation", "Error", "Grant"],
    refused.map((r) => el("tr", { "data-resource": r.resource, "data-name": r.name },
      el("td", { "data-col": "resource" }, `${r.resource} `, el("code", {}, r.name)),
      el("td", { "data-col": "operation" }, r.operation),
      el("td", { "data-col": "error" }, r.error),
      el("td", {}, el("code", { class: "grant", "data-col": "grant" }, r.grant)))));
}

/** Stale partitions of `topic` (__consumer_offsets, or __share_group_state: the share
 * groups' state), `served` saying whose data may be old. */
function stalePartitions(id, topic, served, count, listed) {
  if (!count) return null;
  const shown = listed ?? [];
  return problem(id,
    `Stale: ${fmtInt(count)} ${topic} partition(s) the cluster has not confirmed lately`
      + (shown.length < count ? ` (the first ${shown.length}, the longest unconfirmed first)` : ""),
    `What is served for ${served} may be old, so the exporter is not ready. The `
      + "cause names the answer that is missing: the partition's leader's (check that broker) "
      + "or the exporter's own reader's.",
    ["Partition", "Unconfirmed for", "Last confirmed", "Cause"],
    shown.map((s) => el("tr", { "data-partition": s.partition },
      el("td", { class: "num" }, s.partition),
      el("td", { "data-col": "age" }, fmtSeconds(s.age_seconds)),
      el("td", {}, s.confirmed_at ?? "never since the exporter started tracking it"),
      el("td", { "data-col": "cause" }, s.cause))));
}

function failingSinks(sinks, nowMs) {
  if (!sinks?.length) return null;
  return problem("health-failing-sinks",
    `Failing sinks: ${fmtInt(sinks.length)}`,
    "Ingestion goes on and the metrics stay right. The records a sink refuses are kept and "
      + "retried every second; past the bound they are dropped and read again after a "
      + "restart. Fix what the error names (space under the archive, the publish topic).",
    ["Sink", "Error", "Failing since", "Kept records", "Dropped records"],
    sinks.map((s) => el("tr", { "data-sink": s.sink },
      el("td", {}, s.sink),
      el("td", { "data-col": "error" }, s.error ?? "–"),
      el("td", { "data-col": "since" }, since(s.failing_since, nowMs)),
      el("td", { class: "num", "data-col": "kept" }, fmtInt(s.kept_records)),
      el("td", { class: "num", "data-col": "dropped" }, fmtInt(s.dropped_records)))));
}

function failingParts(parts, nowMs) {
  if (!parts?.length) return null;
  return problem("health-failing-parts",
    `Failing parts: ${fmtInt(parts.length)}`,
    "Each is restarted with backoff; until it runs again what it reads is not refreshed. "
      + "The error says what it could not do.",
    ["Part", "Error", "Failing since", "Restarts"],
    parts.map((p) => el("tr", { "data-part": p.part },
      el("td", {}, p.part),
      el("td", { "data-col": "error" }, p.error ?? "–"),
      el("td", { "data-col": "since" }, since(p.failing_since, nowMs)),
      el("td", { class: "num", "data-col": "restarts" }, fmtInt(p.restarts)))));
}

function problemsSection(h) {
  const found = [
    notAuthorized(h.not_authorized),
    stalePartitions("health-stale", "__consumer_offsets", "the groups on them",
      h.stale_partitions, h.stale),
    stalePartitions("health-share-state-stale", "__share_group_state",
      "the share groups whose state they hold", h.share_state_stale_partitions,
      h.share_state_stale),
    failingSinks(h.failing_sinks, h.time_ms),
    failingParts(h.failing_parts, h.time_ms),
  ].filter(Boolean);
  // "no problems" must not read as "all is well" while the exporter is still not ready
  const none = "No problems: every topic is described, every __consumer_offsets and "
    + "__share_group_state partition was confirmed lately, and every sink and part is up."
    + (h.ready || !h.reason ? "" : ` Not ready: ${h.reason}.`);
  return el("section", { id: "health-problems", "aria-labelledby": "health-problems-title" },
    el("h2", { id: "health-problems-title" }, "Problems"),
    found.length ? found : el("p", { id: "health-no-problems" }, none));
}

/** True while text of the page is selected (a grant command being copied): a redraw would
 * drop the selection, so the page waits until it is gone. */
function selecting(main) {
  const selection = document.getSelection();
  return selection !== null && !selection.isCollapsed && main.contains(selection.anchorNode);
}

export function mountHealth(main) {
  document.title = "Exporter health · offsetwatch";
  main.replaceChildren(el("h1", {}, "Exporter health"), el("p", { class: "muted" }, "Loading…"));
  const timer = every(REFRESH_MS, async (signal) => {
    let h;
    try {
      h = await getJson("/api/v1/health", signal);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      main.replaceChildren(el("h1", {}, "Exporter health"),
        el("p", { class: "notice error" }, `Could not load /api/v1/health: ${error.message}`));
      return;
    }
    if (selecting(main)) return;
    const stream = h.live_stream ?? {};
    keepFocus(main, () => main.replaceChildren(
      el("h1", {}, "Exporter health"),
      problemsSection(h),
      el("div", { class: "charts" },
        table("Source", [
          row("Ready", [yesNo(h.ready), h.reason ? ` ${h.reason}` : ""], "health-ready"),
          row("Source up", yesNo(h.source_up), "health-source-up"),
          row("Source lag (records not read yet)", fmtInt(h.source_lag), "health-source-lag"),
          row("Partitions behind", `${fmtInt(h.partitions_behind)} of ${fmtInt(h.partitions)}`),
          row("Records read", fmtInt(h.records_total), "health-records"),
          row("Decode errors", `${fmtInt(h.decode_errors_total)} (${counts(h.decode_errors)})`,
            "health-decode-errors"),
          row("Quarantined", fmtInt(h.quarantined_total)),
          row("Main loop errors", fmtInt(h.loop_errors_total)),
        ]),
        table("State", [
          row("Checkpoint age", h.checkpoint_age_seconds === null ? "no checkpoint yet"
            : fmtSeconds(h.checkpoint_age_seconds), "health-checkpoint-age"),
          row("Snapshot age", fmtSeconds(h.snapshot_age_seconds), "health-snapshot-age"),
          row("Snapshot build", duration(h.snapshot_duration_seconds)),
          row("Log-end sample age", fmtSeconds(h.log_end_sample_age_seconds)),
          row("Groups", fmtInt(h.groups), "health-groups"),
          row("Tracked partitions", fmtInt(h.tracked_partitions)),
          row("Published / errors / dead letters",
            `${fmtInt(h.published_total)} / ${fmtInt(h.publish_errors_total)} / ${fmtInt(h.dlq_total)}`),
          row("Uptime", fmtSeconds(h.uptime_seconds)),
        ]),
        table("Console", [
          row("Live streams open", `${fmtInt(stream.open)} of ${fmtInt(stream.limit)}`),
          row("Live records dropped", fmtInt(stream.records_dropped_total)),
          row("HTTP connections refused (busy)", fmtInt(h.http?.rejected)),
          row("Refused credentials", fmtInt(h.http?.unauthorized)),
        ]),
        table("Records by type", Object.entries(h.records_by_type ?? {})
          .map(([name, n]) => row(name, fmtInt(n)))))));
    main.dataset.ready = "health";
  });
  return { unmount() { timer.stop(); delete main.dataset.ready; } };
}
