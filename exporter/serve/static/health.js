// Exporter health: ready, source up and lag, decode errors, checkpoint and snapshot ages,
// the live stream and the HTTP server, from /api/v1/health every two seconds.

import { el, every, fmtInt, fmtSeconds, getJson, keepFocus, yesNo } from "./util.js";

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
    const stream = h.live_stream ?? {};
    keepFocus(main, () => main.replaceChildren(
      el("h1", {}, "Exporter health"),
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
