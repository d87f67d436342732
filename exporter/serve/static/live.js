// Live records: decoded __consumer_offsets records as the exporter ingests them, from the
// Server-Sent Events stream /api/v1/records/stream. Filters go to the server (it sends only
// what matches); Pause keeps receiving but stops the table from moving until Resume.

import { el, fmtInt, fmtTime } from "./util.js";

const MAX_ROWS = 500;

function summary(record) {
  const key = record.key ?? {};
  const value = record.value;
  const parts = [];
  if (key.topic !== undefined) parts.push(`${key.topic}-${key.partition}`);
  else if (key.member_id !== undefined) parts.push(`member ${key.member_id}`);
  else if (key.topic_id !== undefined) parts.push(`topic ${key.topic_id}`);
  if (record.tombstone) parts.push("tombstone (deleted)");
  else if (value?.truncated) parts.push(`value of ${fmtInt(value.chars)} characters`);
  else if (value) {
    if (value.offset !== undefined) parts.push(`offset ${value.offset}`);
    if (value.generation !== undefined) parts.push(`generation ${value.generation}`);
    if (value.epoch !== undefined) parts.push(`epoch ${value.epoch}`);
    if (value.members !== undefined) parts.push(`${value.members.length} members`);
    if (value.protocol) parts.push(`protocol ${value.protocol}`);
    if (value.metadata) parts.push(`metadata "${value.metadata}"`);
  }
  return parts.join(" · ");
}

export function mountLive(main) {
  document.title = "Live records · offsetwatch";
  const params = new URLSearchParams(location.search);
  const group = el("input", { type: "search", id: "live-group", "data-filter": true,
    value: params.get("group") ?? "", placeholder: "part of a group name", autocomplete: "off" });
  const type = el("select", { id: "live-type" }, el("option", { value: "" }, "any type"));
  const partition = el("input", { type: "number", id: "live-partition", min: 0,
    value: params.get("partition") ?? "", placeholder: "any", inputmode: "numeric" });
  const offset = el("input", { type: "number", id: "live-offset", min: 0,
    value: params.get("min_offset") ?? "", placeholder: "any", inputmode: "numeric" });
  const pause = el("button", { type: "button", id: "pause", "aria-pressed": "false" }, "Pause");
  const clear = el("button", { type: "button", id: "clear" }, "Clear");
  const state = el("span", { id: "stream-state", role: "status" }, "connecting…");
  const received = el("span", { id: "received" }, "0");
  const shown = el("span", { id: "shown" }, "0");
  const dropped = el("span", { id: "dropped" }, "0");
  const waiting = el("span", { id: "waiting" }, "0");
  const body = el("tbody");
  main.replaceChildren(
    el("h1", {}, "Live records"),
    el("p", { class: "muted" }, "Decoded __consumer_offsets records as the exporter reads them,"
      + " newest first. The exporter sends each browser at most about 1,000 records a second;"
      + " what it cannot send is counted as dropped."),
    el("div", { class: "controls", role: "search" },
      el("label", { for: "live-group" }, "Group", group),
      el("label", { for: "live-type" }, "Record type", type),
      el("label", { for: "live-partition" }, "Partition", partition),
      el("label", { for: "live-offset" }, "From offset", offset),
      pause, clear),
    el("p", { class: "counters" }, state,
      el("span", {}, "received ", received), el("span", {}, "shown ", shown),
      el("span", {}, "dropped by the exporter ", dropped),
      el("span", {}, "waiting while paused ", waiting)),
    el("table", { class: "records", id: "records" },
      el("thead", {}, el("tr", {}, ["Time", "Partition @ offset", "Type", "Group", "Detail"]
        .map((h) => el("th", { scope: "col" }, h)))), body));

  let source = null;
  let paused = false;
  let held = [];
  let counts = { received: 0, shown: 0 };
  const wantedType = params.get("type") ?? "";

  function row(record) {
    return el("tr", { "data-type": record.type, "data-group": record.group ?? "" },
      el("td", {}, fmtTime(record.timestamp)),
      el("td", {}, `${record.partition} @ ${record.offset}`),
      el("td", {}, record.type),
      el("td", {}, record.group ?? "–"),
      el("td", { class: "detail" }, summary(record)));
  }

  function show(records) {
    const rows = records.slice(-MAX_ROWS).reverse().map(row);
    body.prepend(...rows);
    while (body.childElementCount > MAX_ROWS) body.lastElementChild.remove();
    counts.shown += records.length;
    shown.textContent = fmtInt(counts.shown);
  }

  function connect(initial = false) {
    source?.close();
    if (!initial) {
      // what is on screen must match the new filter: start over
      body.replaceChildren();
      held = [];
      waiting.textContent = "0";
    }
    const query = new URLSearchParams();
    if (group.value.trim()) query.set("group", group.value.trim());
    if (type.value || wantedType) query.set("type", type.value || wantedType);
    if (partition.value !== "") query.set("partition", partition.value);
    if (offset.value !== "") query.set("min_offset", offset.value);
    const search = query.toString();
    history.replaceState(null, "", `/live${search ? `?${search}` : ""}`);
    state.textContent = "connecting…";
    source = new EventSource(`/api/v1/records/stream${search ? `?${search}` : ""}`);
    source.addEventListener("hello", (event) => {
      const hello = JSON.parse(event.data);
      if (type.options.length === 1) {
        for (const name of hello.types) {
          type.append(el("option", { value: name, selected: name === wantedType }, name));
        }
      }
      state.textContent = "connected";
      main.dataset.ready = "live";
    });
    source.addEventListener("records", (event) => {
      const records = JSON.parse(event.data);
      counts.received += records.length;
      received.textContent = fmtInt(counts.received);
      if (paused) {
        held = held.concat(records).slice(-MAX_ROWS);
        waiting.textContent = fmtInt(held.length);
      } else {
        show(records);
      }
    });
    source.addEventListener("dropped", (event) => {
      dropped.textContent = fmtInt(Number(event.data));
    });
    source.onerror = () => {
      state.textContent = source.readyState === EventSource.CLOSED
        ? "disconnected" : "reconnecting…";
    };
  }

  function setPaused(flag) {
    paused = flag;
    pause.setAttribute("aria-pressed", String(flag));
    pause.textContent = flag ? "Resume" : "Pause";
    if (!flag && held.length) {
      show(held);
      held = [];
      waiting.textContent = "0";
    }
  }

  let debounce = null;
  const reconnect = () => { clearTimeout(debounce); debounce = setTimeout(() => connect(), 300); };
  group.addEventListener("input", reconnect);
  partition.addEventListener("input", reconnect);
  offset.addEventListener("input", reconnect);
  type.addEventListener("change", () => connect());
  pause.addEventListener("click", () => setPaused(!paused));
  clear.addEventListener("click", () => {
    body.replaceChildren();
    counts = { received: 0, shown: 0 };
    received.textContent = shown.textContent = "0";
  });
  connect(true);
  return {
    unmount() {
      clearTimeout(debounce);
      source?.close();
      delete main.dataset.ready;
    },
  };
}
