"""Small builders of Grafana dashboard JSON (schema 39, Grafana 10.4 and later).

Plain dicts, because the checked-in JSON is the product: what these functions return is
exactly what lands in grafana/dashboards/, with no defaults added behind our back. Panels are
placed by `Dashboard.layout`: left to right, wrapping at 24 columns, a row header per section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

JSON = dict[str, Any]

DS: Final = "${DS_PROMETHEUS}"
SCHEMA_VERSION: Final = 39
GRID_WIDTH: Final = 24

#: offsetwatch status values 0..5 (offsetwatch/core/status.py) with their colours
STATUS_COLOURS: Final = (
    ("OK", "green"),
    ("WARN", "yellow"),
    ("REWIND", "blue"),
    ("STALL", "orange"),
    ("STOP", "red"),
    ("ERR", "dark-red"),
)


def datasource() -> JSON:
    return {"type": "prometheus", "uid": DS}


def value_mappings(texts: Sequence[tuple[str, str]]) -> list[JSON]:
    """One value mapping: value i shows texts[i] = (text, colour)."""
    options = {
        str(i): {"text": text, "color": colour, "index": i}
        for i, (text, colour) in enumerate(texts)
    }
    return [{"type": "value", "options": options}]


def thresholds(*steps: tuple[str, float | None]) -> JSON:
    return {"mode": "absolute", "steps": [{"color": c, "value": v} for c, v in steps]}


def status_mappings() -> list[JSON]:
    return value_mappings(STATUS_COLOURS)


def status_thresholds() -> JSON:
    first, *rest = STATUS_COLOURS
    return thresholds((first[1], None), *((colour, i + 1) for i, (_, colour) in enumerate(rest)))


YES_NO: Final = (("no", "red"), ("yes", "green"))


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL target. `instant` for stats and tables; `table` gives Grafana's table format."""

    expr: str
    legend: str = "__auto"
    instant: bool = False
    table: bool = False

    def to_json(self, ref_id: str) -> JSON:
        return {
            "datasource": datasource(),
            "refId": ref_id,
            "expr": self.expr,
            "legendFormat": self.legend,
            "range": not self.instant,
            "instant": self.instant,
            "format": "table" if self.table else "time_series",
            "editorMode": "code",
        }


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel before placement. Width and height are grid units (24 columns)."""

    kind: str
    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    w: int = 12
    h: int = 8
    defaults: Mapping[str, Any] = field(default_factory=dict)
    overrides: tuple[JSON, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    transformations: tuple[JSON, ...] = ()
    links: tuple[JSON, ...] = ()

    def to_json(self, panel_id: int, x: int, y: int) -> JSON:
        defaults: JSON = {
            "color": {"mode": "thresholds"},
            "mappings": [],
            "thresholds": thresholds(("green", None)),
            **self.defaults,
            "unit": self.unit,
        }
        out: JSON = {
            "type": self.kind,
            "title": self.title,
            "id": panel_id,
            "datasource": datasource(),
            "gridPos": {"h": self.h, "w": self.w, "x": x, "y": y},
            "description": self.description,
            "targets": [q.to_json(chr(ord("A") + i)) for i, q in enumerate(self.queries)],
            "fieldConfig": {"defaults": defaults, "overrides": list(self.overrides)},
            "options": dict(self.options),
        }
        if self.transformations:
            out["transformations"] = list(self.transformations)
        if self.links:
            out["links"] = list(self.links)
        return out


def stat(
    title: str,
    description: str,
    unit: str,
    query: Query,
    *,
    steps: tuple[tuple[str, float | None], ...] = (("green", None),),
    mappings: Sequence[tuple[str, str]] = (),
    colour: str = "none",
    text_mode: str = "auto",
    w: int = 3,
    h: int = 4,
) -> Panel:
    return Panel(
        "stat",
        title,
        description,
        unit,
        (query,),
        w=w,
        h=h,
        defaults={
            "mappings": value_mappings(mappings) if mappings else [],
            "thresholds": thresholds(*steps),
        },
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": colour,
            "graphMode": "none",
            "textMode": text_mode,
            "justifyMode": "auto",
            "orientation": "auto",
        },
    )


def timeseries(
    title: str,
    description: str,
    unit: str,
    *queries: Query,
    bars: bool = False,
    steps: tuple[tuple[str, float | None], ...] = (),
    table_legend: bool = True,
    w: int = 12,
    h: int = 8,
) -> Panel:
    """A time series; `steps` shade alert thresholds (line and area)."""
    return Panel(
        "timeseries",
        title,
        description,
        unit,
        queries,
        w=w,
        h=h,
        defaults={
            "color": {"mode": "palette-classic"},
            "thresholds": thresholds(*steps) if steps else thresholds(("green", None)),
            "custom": {
                "drawStyle": "bars" if bars else "line",
                "lineWidth": 1,
                "fillOpacity": 80 if bars else 10,
                "showPoints": "never",
                "spanNulls": False,
                "axisSoftMin": 0,
                "stacking": {"mode": "none", "group": "A"},
                "thresholdsStyle": {"mode": "line+area" if steps else "off"},
            },
        },
        options={
            "legend": {
                "displayMode": "table" if table_legend else "list",
                "placement": "right" if table_legend else "bottom",
                "showLegend": True,
                "calcs": ["lastNotNull", "max"] if table_legend else [],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    )


def state_timeline(
    title: str,
    description: str,
    *queries: Query,
    mappings: Sequence[tuple[str, str]],
    show_values: bool = False,
    w: int = 24,
    h: int = 8,
) -> Panel:
    """Discrete values 0..n-1 as coloured bands (statuses, yes/no)."""
    colours = [colour for _, colour in mappings]
    return Panel(
        "state-timeline",
        title,
        description,
        "none",
        queries,
        w=w,
        h=h,
        defaults={
            "mappings": value_mappings(mappings),
            "thresholds": thresholds(
                (colours[0], None), *((c, i + 1) for i, c in enumerate(colours[1:]))
            ),
            "custom": {"lineWidth": 0, "fillOpacity": 80},
        },
        options={
            "mergeValues": True,
            "showValue": "auto" if show_values else "never",
            "alignValue": "left",
            "rowHeight": 0.9,
            "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "single", "sort": "none"},
        },
    )


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: the query giving its value, its header, unit and extra properties."""

    header: str
    query: Query
    unit: str = "short"
    properties: tuple[JSON, ...] = ()


def status_column_properties() -> tuple[JSON, ...]:
    return (
        {"id": "mappings", "value": status_mappings()},
        {"id": "thresholds", "value": status_thresholds()},
        {"id": "custom.cellOptions", "value": {"type": "color-background", "mode": "basic"}},
        {"id": "custom.width", "value": 100},
    )


def table(
    title: str,
    description: str,
    labels: Sequence[tuple[str, str]],
    columns: Sequence[Column],
    *,
    extra_labels: Sequence[tuple[str, str]] = (),
    sort_by: str,
    label_links: Mapping[str, Sequence[JSON]] | None = None,
    w: int = 24,
    h: int = 10,
) -> Panel:
    """One row per label set: instant queries merged on `labels` ((label, header) pairs).

    A column with an empty header is hidden: an info series whose labels (`extra_labels`,
    shown after the values) are what the table wants from it.
    """
    values = {f"Value #{chr(ord('A') + i)}": c.header for i, c in enumerate(columns)}
    names = dict(labels) | values | dict(extra_labels)
    overrides = [
        {
            "matcher": {"id": "byName", "options": c.header},
            "properties": [{"id": "unit", "value": c.unit}, *c.properties],
        }
        for c in columns
        if c.header
    ]
    for label, cell_links in (label_links or {}).items():
        overrides.append(
            {
                "matcher": {"id": "byName", "options": names[label]},
                "properties": [{"id": "links", "value": list(cell_links)}],
            }
        )
    hidden = {"Time": True} | {v: True for v, h in values.items() if not h}
    return Panel(
        "table",
        title,
        description,
        "short",
        tuple(c.query for c in columns),
        w=w,
        h=h,
        defaults={
            "custom": {
                "align": "auto",
                "cellOptions": {"type": "auto"},
                "inspect": False,
                "filterable": True,
            }
        },
        overrides=tuple(overrides),
        options={
            "showHeader": True,
            "cellHeight": "sm",
            "footer": {"show": False, "reducer": ["sum"], "fields": ""},
            "sortBy": [{"displayName": sort_by, "desc": True}],
        },
        transformations=(
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": hidden,
                    "indexByName": {name: i for i, name in enumerate(names)},
                    "renameByName": {k: v for k, v in names.items() if v},
                },
            },
        ),
    )


def piechart(title: str, description: str, query: Query, *, w: int = 8, h: int = 8) -> Panel:
    return Panel(
        "piechart",
        title,
        description,
        "short",
        (query,),
        w=w,
        h=h,
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "pieType": "donut",
            "displayLabels": ["name", "value"],
            "legend": {
                "showLegend": True,
                "displayMode": "list",
                "placement": "right",
                "values": ["value"],
            },
            "tooltip": {"mode": "single", "sort": "none"},
        },
    )


@dataclass(frozen=True, slots=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True, slots=True)
class Variable:
    """A `label_values(selector, label)` query variable."""

    name: str
    label: str
    selector: str
    multi: bool = False

    def to_json(self) -> JSON:
        query = f"label_values({self.selector}, {self.name})"
        out: JSON = {
            "type": "query",
            "name": self.name,
            "label": self.label,
            "datasource": datasource(),
            "definition": query,
            "query": query,
            "refresh": 2,
            "sort": 1,
            "multi": self.multi,
            "includeAll": self.multi,
            "current": {},
            "hide": 0,
            "options": [],
            "regex": "",
            "skipUrlSync": False,
        }
        if self.multi:
            out["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
            out["allValue"] = ".*"
        return out


def datasource_variable() -> JSON:
    return {
        "type": "datasource",
        "name": "DS_PROMETHEUS",
        "label": "Data source",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
    }


def dashboard_link(title: str, uid: str, tooltip: str) -> JSON:
    """A link to another offsetwatch dashboard that keeps the time range and variables."""
    return {
        "title": title,
        "type": "link",
        "url": f"/d/{uid}",
        "tooltip": tooltip,
        "icon": "dashboard",
        "includeVars": True,
        "keepTime": True,
        "targetBlank": False,
        "asDropdown": False,
        "tags": [],
    }


def alerts_annotation(selector: str) -> JSON:
    """Firing offsetwatch alerts (the ALERTS series) as annotations."""
    return {
        "datasource": datasource(),
        "enable": True,
        "hide": False,
        "iconColor": "red",
        "name": "offsetwatch alerts",
        "expr": f'ALERTS{{alertname=~"Offsetwatch.*",alertstate="firing",{selector}}}',
        "step": "60s",
        "titleFormat": "{{alertname}}",
        "textFormat": "{{group}} {{instance}} {{severity}}",
        "tagKeys": "severity",
        "useValueForTime": False,
    }


def layout(rows: Sequence[Row]) -> list[JSON]:
    """Panels with ids and grid positions: a row header, then panels left to right."""
    out: list[JSON] = []
    y = 0
    for row in rows:
        out.append(
            {
                "type": "row",
                "title": row.title,
                "id": len(out) + 1,
                "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                "collapsed": False,
                "panels": [],
            }
        )
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.w > GRID_WIDTH:
                y, x, line_height = y + line_height, 0, 0
            out.append(panel.to_json(len(out) + 1, x, y))
            x += panel.w
            line_height = max(line_height, panel.h)
        y += line_height
    return out


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]
    links: tuple[JSON, ...] = ()
    annotation_selector: str = 'instance=~"$instance"'
    refresh: str = "30s"
    time_from: str = "now-6h"

    def to_json(self) -> JSON:
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["kafka", "consumer-lag", "offsetwatch"],
            "editable": True,
            "graphTooltip": 1,
            "fiscalYearStartMonth": 0,
            "liveNow": False,
            "refresh": self.refresh,
            "schemaVersion": SCHEMA_VERSION,
            "version": 1,
            "time": {"from": self.time_from, "to": "now"},
            "timepicker": {},
            "timezone": "browser",
            "weekStart": "",
            "links": list(self.links),
            "annotations": {
                "list": [
                    {
                        "builtIn": 1,
                        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                        "enable": True,
                        "hide": True,
                        "iconColor": "rgba(0, 211, 255, 1)",
                        "name": "Annotations & Alerts",
                        "type": "dashboard",
                    },
                    alerts_annotation(self.annotation_selector),
                ]
            },
            "templating": {"list": [datasource_variable(), *(v.to_json() for v in self.variables)]},
            "panels": layout(self.rows),
        }


def selector(metric: str, *labels: str, extra: str = "") -> str:
    """`metric{job=~"$job",instance=~"$instance",<label>=~"$<label>"...}` (+ raw matchers)."""
    matchers = [f'{name}=~"${name}"' for name in ("job", "instance", *labels)]
    if extra:
        matchers.append(extra)
    return f"{metric}{{{','.join(matchers)}}}"
