"""Pictures of the main dashboard panels, drawn from a demo run's Prometheus data.

    python -m offsetwatch.dashboards.pictures            # about 3 minutes; writes docs/images/

Runs the demo workload, the exporter and a real Prometheus (offsetwatch.dashboards.live),
then takes the panels below from the generated dashboards, fills their variables, asks
Prometheus for each query's range and draws it with matplotlib the way the panel shows it:
lines in the panel's unit, or coloured bands for a state timeline. The pictures therefore show
the real queries on real data, not a mock-up.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from offsetwatch.dashboards import exporter_health, group_detail, overview
from offsetwatch.dashboards.grafana import JSON
from offsetwatch.dashboards.live import DemoStack, Prometheus, shorten_rules
from offsetwatch.dashboards.outputs import RULES_FILE


@dataclass(frozen=True, slots=True)
class Picture:
    file: str
    dashboard: str
    panel: str
    group: str = ".*"
    topic: str = ".*"


PICTURES: Final = (
    Picture("overview-status-history.png", overview.UID, "Group status history"),
    Picture("overview-lag-seconds.png", overview.UID, "Lag in seconds per group"),
    Picture("overview-lag.png", overview.UID, "Lag per group"),
    Picture(
        "group-detail-committed-vs-log-end.png",
        group_detail.UID,
        "Committed offset and log end",
        group="etl-stalled",
    ),
    Picture(
        "group-detail-lag-per-partition.png",
        group_detail.UID,
        "Lag per partition",
        group="reports-lagging",
    ),
    Picture("exporter-records-by-type.png", exporter_health.UID, "Records read by type"),
)

#: Grafana colour names used by the dashboards -> matplotlib colours
_COLOURS: Final = {
    "green": "#73bf69",
    "yellow": "#fade2a",
    "blue": "#5794f2",
    "orange": "#ff9830",
    "red": "#f2495c",
    "dark-red": "#c4162a",
}
_UNITS: Final = {"s": "seconds", "cps": "per second", "short": "messages", "none": "offset"}


def _day(epoch_s: float) -> float:
    """matplotlib's date axis unit: days since 1970-01-01."""
    return epoch_s / 86400.0


def _clock(day: float, _position: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(day * 86400.0))


def panel_of(uid: str, title: str) -> JSON:
    builders = {m.UID: m.build for m in (overview, group_detail, exporter_health)}
    dashboard = builders[uid]().to_json()
    found: JSON = next(p for p in dashboard["panels"] if p.get("title") == title)
    return found


def _fill(expr: str, values: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "8s").replace("$__interval", "2s")
    for name, value in values.items():
        expr = expr.replace(f"${name}", value)
    return expr


def legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template).strip()


def _series(
    prometheus: Prometheus, panel: JSON, values: dict[str, str], start: float, end: float
) -> list[tuple[str, list[float], list[float]]]:
    out = []
    for target in panel["targets"]:
        expr = _fill(target["expr"], values)
        for series in prometheus.query_range(expr, start, end, 2):
            times = [float(t) for t, _ in series["values"]]
            points = [float(v) for _, v in series["values"]]
            out.append((legend(target["legendFormat"], series["metric"]), times, points))
    return sorted(out, key=lambda s: s[0])


def draw(panel: JSON, series: Sequence[tuple[str, list[float], list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plt.style.use("dark_background")
    timeline = panel["type"] == "state-timeline"
    height = 0.45 * len(series) + 1.4 if timeline else 4.2
    figure, axes = plt.subplots(figsize=(10, height), dpi=100)
    figure.patch.set_facecolor("#181b1f")
    axes.set_facecolor("#111217")
    axes.set_title(panel["title"], loc="left", fontsize=12)
    if timeline:
        _draw_timeline(axes, panel, series)
    else:
        for label, times, points in series:
            axes.plot([_day(t) for t in times], points, label=label, lw=1.4)
        axes.set_ylabel(_UNITS.get(panel["fieldConfig"]["defaults"]["unit"], ""))
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.15)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    axes.xaxis.set_major_formatter(FuncFormatter(_clock))
    figure.tight_layout()
    figure.savefig(path, facecolor=figure.get_facecolor())
    plt.close(figure)


def _draw_timeline(
    axes: Any, panel: JSON, series: Sequence[tuple[str, list[float], list[float]]]
) -> None:
    from matplotlib.patches import Patch

    (mapping,) = panel["fieldConfig"]["defaults"]["mappings"]
    options = mapping["options"]
    for row, (_, times, points) in enumerate(series):
        for t, value in zip(times, points, strict=True):
            option = options.get(str(int(value)), {"color": "blue"})
            axes.barh(
                row,
                2 / 86400,
                left=_day(t),
                color=_COLOURS.get(option["color"], option["color"]),
                height=0.8,
            )
    axes.set_yticks(range(len(series)), [label for label, _, _ in series], fontsize=9)
    axes.invert_yaxis()
    handles = [
        Patch(color=_COLOURS.get(o["color"], o["color"]), label=o["text"])
        for _, o in sorted(options.items())
    ]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def render(duration_s: float, out_dir: Path, prometheus_binary: str) -> list[Path]:
    rules = shorten_rules(yaml.safe_load(RULES_FILE.read_text()), 1 / 30)
    written = []
    with DemoStack(status_window_s=30.0) as stack:
        prometheus = Prometheus(prometheus_binary, stack.target, rules)
        prometheus.start()
        try:
            start = time.time()
            time.sleep(duration_s)
            end = time.time()
            out_dir.mkdir(parents=True, exist_ok=True)
            for picture in PICTURES:
                panel = panel_of(picture.dashboard, picture.panel)
                values = {
                    "job": "offsetwatch",
                    "instance": stack.target,
                    "group": picture.group,
                    "topic": picture.topic,
                }
                path = out_dir / picture.file
                draw(panel, _series(prometheus, panel, values, start, end), path)
                written.append(path)
        finally:
            prometheus.stop()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m offsetwatch.dashboards.pictures",
        description="Run the demo with a real Prometheus and draw the main dashboard panels.",
        epilog="example:\n  python -m offsetwatch.dashboards.pictures --duration 180",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of demo data")
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="PNG folder")
    parser.add_argument("--prometheus", default="prometheus", help="the Prometheus binary")
    args = parser.parse_args(argv)
    binary = shutil.which(args.prometheus)
    if binary is None:
        parser.error(
            f"{args.prometheus} not found; install it (Debian: apt-get install prometheus)"
        )
    if not RULES_FILE.is_file():
        parser.error(f"{RULES_FILE} not found; run from the repository root")
    for path in render(args.duration, args.out, binary):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
