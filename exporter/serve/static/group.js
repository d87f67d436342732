// Group detail: facts, the diagnosis (when the exporter has one), charts of the group's
// recent log end against its consumed position and of its lag in seconds, every partition
// with its owner, the members and their assignments, and recent rebalances. A share group
// (KIP-932 queue) shows its share partitions instead: start offset, log end, lag, records by
// delivery state, delivery counts, poison records, and a bar per partition picturing them. A
// streams group (KIP-1071) shows its topology and, per member, its process and tasks.

import { lineChart, shareBar } from "./chart.js";
import {
  causeText, el, every, fmtAgo, fmtInt, fmtSeconds, fmtTime, getJson, groupApi, keepFocus,
  statusBadge,
} from "./util.js";

const REFRESH_MS = 5000;
const MAX_ROWS = 1000;

function fact(label, value) {
  return el("div", {}, el("dt", {}, label), el("dd", {}, value));
}

function missing(main, group) {
  document.title = "No such group · offsetwatch";
  main.replaceChildren(el("section", { class: "notice", "data-view": "missing" },
    el("h1", {}, "No such group"),
    el("p", {}, "The exporter knows no consumer group ", el("code", {}, group),
      ": it never committed offsets, or it was deleted. ",
      el("a", { href: "/groups", "data-nav": true }, "All groups"))));
}

function memberRef(ref) {
  if (typeof ref === "string") return ref;
  return el("div", { title: ref.member_id ?? "" }, `${ref.client_id || "?"} @ ${ref.host || "?"}`);
}

function ownerText(owner) {
  if (!owner) return "–";
  return `${owner.client_id || "?"} @ ${owner.host || "?"}`;
}

function partitionsTable(partitions) {
  const shown = partitions.slice(0, MAX_ROWS);
  const table = el("table", { id: "partitions" },
    el("thead", {}, el("tr", {},
      ["Topic", "Partition", "Committed", "Log end", "Lag", "Lag (s)", "Status", "Owner",
        "Last commit"].map((h, i) => el("th", { scope: "col",
        class: i >= 1 && i <= 5 ? "num" : null }, h)))),
    el("tbody", {}, shown.map((p) => el("tr", { "data-partition": `${p.topic}-${p.partition}` },
      el("td", {}, p.topic),
      el("td", { class: "num" }, p.partition),
      el("td", { class: "num" }, fmtInt(p.committed)),
      el("td", { class: "num" }, fmtInt(p.log_end)),
      el("td", { class: "num" }, fmtInt(p.lag)),
      el("td", { class: "num" }, fmtSeconds(p.lag_seconds)),
      el("td", { "data-col": "status" }, statusBadge(p.status)),
      el("td", { title: p.owner?.member_id ?? "no owner" }, ownerText(p.owner),
        p.owner ? el("div", { class: "muted mono" }, p.owner.member_id) : null),
      el("td", { title: p.last_commit ?? "" }, fmtAgo(p.last_commit_ms))))));
  const note = partitions.length > MAX_ROWS
    ? el("p", { class: "muted" }, `First ${MAX_ROWS} of ${fmtInt(partitions.length)} partitions.`)
    : null;
  return [table, note];
}

/** `0_1, 0_2` for the tasks of one kind (subtopology 0, partitions 1 and 2), or "–". */
function taskIds(tasks) {
  const ids = tasks.flatMap((t) => t.partitions.map((p) => `${t.subtopology}_${p}`));
  return ids.length ? ids.join(", ") : "–";
}

/** A streams group's members run tasks: each with its process, its active, standby and
 * warmup tasks (as Kafka Streams names them), and the partitions those tasks read. */
function streamsMembersTable(members) {
  if (!members.length) return el("p", { class: "muted" }, "No members: no instance runs now.");
  return el("table", { id: "members" },
    el("thead", {}, el("tr", {}, ["Member", "Client id", "Process", "Active tasks",
      "Standby", "Warmup", "Reads"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, members.map((m) => el("tr", { "data-member": m.member_id },
      el("td", { class: "mono" }, m.member_id),
      el("td", {}, m.client_id),
      el("td", { class: "mono" }, m.tasks.process_id || "–"),
      el("td", { "data-col": "active" }, taskIds(m.tasks.active)),
      el("td", { "data-col": "standby" }, taskIds(m.tasks.standby)),
      el("td", { "data-col": "warmup" }, taskIds(m.tasks.warmup)),
      el("td", {}, m.assignment.length
        ? m.assignment.map((a) => el("div", {}, `${a.topic}: ${a.partitions.join(", ")}`))
        : "nothing assigned")))));
}

/** The topology of a streams group: per subtopology, what it reads, writes and keeps. */
function topologySection(topology) {
  const list = (topics) => topics.length ? topics.join(", ") : "–";
  return el("section", { id: "topology", "aria-labelledby": "topology-title" },
    el("h2", { id: "topology-title" },
      `Topology (epoch ${topology.epoch}, ${topology.subtopologies.length} subtopologies)`),
    el("table", { id: "subtopologies" },
      el("thead", {}, el("tr", {}, ["Subtopology", "Source topics", "Repartition sources",
        "Repartition sinks", "Changelogs"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, topology.subtopologies.map((s) => el("tr", { "data-subtopology": s.subtopology },
        el("td", {}, s.subtopology),
        el("td", {}, list(s.source_topics)),
        el("td", {}, list(s.repartition_source_topics)),
        el("td", {}, list(s.repartition_sink_topics)),
        el("td", {}, list(s.changelog_topics)))))));
}

function membersTable(members) {
  if (members.some((m) => m.tasks)) return streamsMembersTable(members);
  if (!members.length) return el("p", { class: "muted" }, "No members: nobody consumes now.");
  return el("table", { id: "members" },
    el("thead", {}, el("tr", {}, ["Member", "Client id", "Host", "Instance", "Assignment"]
      .map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, members.map((m) => el("tr", {},
      el("td", { class: "mono" }, m.member_id),
      el("td", {}, m.client_id),
      el("td", {}, m.host),
      el("td", {}, m.instance_id ?? "–"),
      el("td", {}, m.assignment.length
        ? m.assignment.map((a) => el("div", {}, `${a.topic}: ${a.partitions.join(", ")}`))
        : "nothing assigned")))));
}

function diagnosisSection(diagnosis) {
  if (!diagnosis) return null;
  const suspects = diagnosis.suspects ?? [];
  return el("section", { id: "diagnosis", "aria-labelledby": "diagnosis-title" },
    el("h2", { id: "diagnosis-title" }, "Diagnosis"),
    el("p", { id: "diagnosis-reason" }, diagnosis.reason || "Nothing to explain: the group is OK."),
    el("dl", { class: "facts" },
      fact("Cause", causeText(diagnosis.cause) || "none"),
      fact("Catch-up time", diagnosis.catch_up_seconds === null
        || diagnosis.catch_up_seconds === undefined
        ? (diagnosis.falling_behind ? "never at this rate" : "–")
        : fmtSeconds(diagnosis.catch_up_seconds)),
      fact("Falling behind", diagnosis.falling_behind === undefined ? "–"
        : (diagnosis.falling_behind ? "yes" : "no"))),
    suspects.length ? el("table", { id: "suspects" },
      el("caption", {}, "Suspect members"),
      el("thead", {}, el("tr", {}, ["Member", "Client id", "Host", "Partitions"]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, suspects.map((s) => el("tr", {},
        el("td", { class: "mono" }, s.member_id ?? "–"),
        el("td", {}, s.client_id ?? "–"),
        el("td", {}, s.host ?? "–"),
        el("td", {}, (s.partitions ?? []).map((p) => `${p.topic}-${p.partition}`).join(", ")))))
    ) : null);
}

const SHARE_STATES = [
  ["state-available", "available (released, waits for redelivery)"],
  ["state-acknowledged", "acknowledged"],
  ["state-archived", "archived (rejected or at the delivery limit)"],
  ["waiting", "not delivered yet, or acquired now"],
];

function poisonText(row) {
  return row.poison.map((b) => `${b.first_offset}–${b.last_offset} (${b.delivery_state}, `
    + `${b.delivery_count} deliveries)`).join("; ");
}

/** The share partitions of a queue: numbers, and a bar per partition from start offset to
 * log end with the in-flight batches Kafka persisted (docs/console.md). */
function shareSection(share) {
  const rows = share.partitions.slice(0, MAX_ROWS);
  const poisoned = share.partitions.filter((r) => r.poison.length);
  return el("section", { id: "share", "aria-labelledby": "share-title" },
    el("h2", { id: "share-title" }, `Share partitions (${share.partitions.length})`),
    el("dl", { class: "facts", id: "share-facts" },
      fact("Queue status", statusBadge(share.status)),
      fact("Share lag", fmtInt(share.total_lag)),
      fact("Oldest waiting record", fmtSeconds(share.max_lag_seconds)),
      fact("Poison records", fmtInt(share.poison_records))),
    el("div", { class: "swatches", "aria-hidden": "true" }, SHARE_STATES.map(([cls, text]) =>
      el("span", {}, el("span", { class: `swatch ${cls}` }), text))),
    el("table", { id: "share-partitions" },
      el("thead", {}, el("tr", {},
        ["Topic", "Partition", "Start offset", "Log end", "Lag", "Lag (s)", "Status",
          "Available", "Acknowledged", "Archived", "Max deliveries", "In flight"]
          .map((h, i) => el("th", { scope: "col", class: i >= 1 && i <= 5 || (i >= 7 && i <= 10)
            ? "num" : null }, h)))),
      el("tbody", {}, rows.map((r) => el("tr", { "data-partition": `${r.topic}-${r.partition}` },
        el("td", { title: r.topic_named ? r.topic_id : "topic id: no name known yet" }, r.topic),
        el("td", { class: "num" }, r.partition),
        el("td", { class: "num", "data-col": "start_offset" }, fmtInt(r.start_offset)),
        el("td", { class: "num", "data-col": "log_end" }, fmtInt(r.log_end)),
        el("td", { class: "num", "data-col": "lag" }, fmtInt(r.lag)),
        el("td", { class: "num" }, fmtSeconds(r.lag_seconds)),
        el("td", { "data-col": "status" }, statusBadge(r.status)),
        el("td", { class: "num", "data-col": "available" }, fmtInt(r.records.available)),
        el("td", { class: "num", "data-col": "acknowledged" }, fmtInt(r.records.acknowledged)),
        el("td", { class: "num", "data-col": "archived" }, fmtInt(r.records.archived)),
        el("td", { class: "num", "data-col": "max_delivery_count" }, fmtInt(r.max_delivery_count)),
        el("td", { "data-col": "in_flight" }, shareBar({ start: r.start_offset, logEnd: r.log_end,
          batches: r.in_flight, poison: r.poison,
          label: `offsets ${r.start_offset} to ${r.log_end ?? "?"}: ${r.records.available} `
            + `available, ${r.records.acknowledged} acknowledged, ${r.records.archived} archived, `
            + `at most ${r.max_delivery_count} deliveries` })))))),
    rows.length < share.partitions.length ? el("p", { class: "muted" },
      `First ${MAX_ROWS} of ${fmtInt(share.partitions.length)} share partitions.`) : null,
    poisoned.length ? el("div", { id: "poison" },
      el("h3", {}, "Poison records"),
      el("ul", {}, poisoned.map((r) => el("li", { "data-partition": `${r.topic}-${r.partition}` },
        `${r.topic}-${r.partition}: ${poisonText(r)}`)))) : null);
}

function rebalancesSection(detail) {
  const rebalances = detail.diagnosis?.rebalances;
  let content;
  if (rebalances === undefined) {
    content = el("p", { class: "muted" },
      `Current generation ${detail.generation ?? "–"}; this exporter keeps no rebalance history.`);
  } else if (!rebalances.length) {
    content = el("p", { class: "muted" }, "No rebalance in the exporter's recent history.");
  } else {
    content = el("table", { id: "rebalances" },
      el("thead", {}, el("tr", {}, ["Time", "Generation", "Joined", "Left"]
        .map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rebalances.slice(0, 20).map((r) => el("tr", {},
        el("td", {}, typeof r.time === "number" ? fmtTime(r.time) : (r.time ?? "–")),
        el("td", { class: "num" }, r.generation ?? "–"),
        el("td", {}, (r.joined ?? []).length ? r.joined.map(memberRef) : "–"),
        el("td", {}, (r.left ?? []).length ? r.left.map(memberRef) : "–")))));
  }
  return el("section", { "aria-labelledby": "rebalances-title" },
    el("h2", { id: "rebalances-title" }, "Recent rebalances"), content);
}

const NO_HISTORY = { times_ms: [], log_end: [], consumed: [], lag_seconds: [] };

function charts(history) {
  const times = history.times_ms;
  return el("div", { class: "charts" },
    el("figure", { id: "offsets-chart" },
      el("figcaption", {}, "Log end and consumed position, summed over the group's partitions"),
      lineChart({ times, label: "log end and consumed position over time", series: [
        { name: "log end", values: history.log_end, cls: "s1" },
        { name: "consumed", values: history.consumed, cls: "s2" }] }),
      el("div", { class: "legend" }, el("span", { class: "s1" }, "log end"),
        el("span", { class: "s2" }, "consumed (log end − lag)"))),
    el("figure", { id: "lag-seconds-chart" },
      el("figcaption", {}, "Largest lag in seconds"),
      lineChart({ times, unit: " s", label: "lag in seconds over time", series: [
        { name: "lag seconds", values: history.lag_seconds, cls: "s1" }] })));
}

export function mountGroup(main, group) {
  document.title = `${group} · offsetwatch`;
  let first = true;
  const timer = every(REFRESH_MS, async (signal) => {
    let detail, history;
    try {
      [detail, history] = await Promise.all([
        getJson(groupApi(group), signal),
        getJson(`${groupApi(group)}/history`, signal).catch((error) => {
          if (error.name === "AbortError") throw error;
          return NO_HISTORY;  // the page still shows the group, with empty charts
        }),
      ]);
    } catch (error) {
      if (error.status === 404) { missing(main, group); main.dataset.ready = "missing"; return; }
      if (error.name === "AbortError") throw error;
      if (first) main.replaceChildren(el("p", { class: "notice error" }, `Could not load: ${error.message}`));
      return;
    }
    const scroll = window.scrollY;
    keepFocus(main, () => main.replaceChildren(...[
      el("p", {}, el("a", { href: "/groups", "data-nav": true }, "← All groups")),
      el("h1", {}, group, " ", statusBadge(detail.status)),
      detail.ready === false ? el("p", { class: "notice" }, "Warming up: lag and status are "
        + "not final until the exporter has read all of __consumer_offsets.") : null,
      el("dl", { class: "facts", id: "group-facts" },
        fact("Kind / state", `${detail.kind} / ${detail.state}`),
        fact("Cause", causeText(detail.cause ?? detail.diagnosis?.cause) || "–"),
        fact("Total lag", fmtInt(detail.total_lag)),
        fact("Largest lag", fmtSeconds(detail.max_lag_seconds)),
        fact("Commits per second", detail.commit_rate === null ? "–" : detail.commit_rate.toFixed(2)),
        fact("Last commit", fmtAgo(detail.last_commit_ms)),
        fact("Generation / epoch", detail.generation ?? "–"),
        fact("Protocol", detail.protocol || "–")),
      diagnosisSection(detail.diagnosis),
      el("h2", {}, "History"),
      charts(history),
      detail.share ? shareSection(detail.share) : null,
      detail.topology ? topologySection(detail.topology) : null,
      // a share group commits no offsets: its table of committed partitions is left out
      ...(detail.share && !detail.partitions.length ? [] : [
        el("h2", {}, `Partitions (${detail.partitions.length})`),
        ...partitionsTable(detail.partitions)]),
      el("h2", {}, `Members (${detail.members.length})`),
      membersTable(detail.members),
      rebalancesSection(detail),
    ].filter(Boolean)));
    if (!first) window.scrollTo(0, scroll);
    first = false;
    main.dataset.ready = "group";
  });
  return { unmount() { timer.stop(); delete main.dataset.ready; } };
}
