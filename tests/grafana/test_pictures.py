"""The picture script draws both panel kinds it uses, from series shaped like Prometheus'.

The whole run (demo + Prometheus + every picture) is `python -m offsetwatch.dashboards.pictures`;
tests/grafana/test_e2e.py already proves the queries return data, so this only draws.
"""

from __future__ import annotations

from pathlib import Path

from offsetwatch.dashboards.pictures import PICTURES, draw, legend, panel_of


def test_every_picture_names_an_existing_panel() -> None:
    for picture in PICTURES:
        assert panel_of(picture.dashboard, picture.panel)["title"] == picture.panel


def test_legend_fills_labels() -> None:
    assert (
        legend("{{group}} {{topic}}/{{partition}}", {"group": "g", "topic": "t", "partition": "0"})
        == "g t/0"
    )


def test_draws_time_series_and_state_timeline(tmp_path: Path) -> None:
    times = [1_700_000_000.0 + 2 * i for i in range(30)]
    for picture in PICTURES[:2]:  # a state timeline and a time series
        panel = panel_of(picture.dashboard, picture.panel)
        series = [("a", times, [float(i % 6) for i in range(30)]), ("b", times, [0.0] * 30)]
        path = tmp_path / picture.file
        draw(panel, series, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
