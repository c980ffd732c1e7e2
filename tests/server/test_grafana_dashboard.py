"""docs/grafana-dashboard.json is a dashboard Grafana can import (panels laid out on its 24-column grid,
each with PromQL targets), and every metric it queries is one a live broker exports."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from eoslog.testing.embedded import EmbeddedBroker

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
METRIC = re.compile(r"\b(?:kafka|eoslog)_[a-zA-Z0-9_]+")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def _panels(dashboard: dict) -> list[dict]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def test_dashboard_is_importable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    assert {v["name"] for v in dashboard["templating"]["list"]} >= {"datasource", "instance"}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    for panel in _panels(dashboard):
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert METRIC.search(target["expr"]), (panel["title"], target["expr"])
    titles = " ".join(p["title"].lower() for p in _panels(dashboard))
    for topic in ("bytes in", "latency", "lag", "transaction", "under-replicated"):
        assert topic in titles


def test_every_queried_metric_is_exported(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data", properties={"eoslog.metrics.listen": "127.0.0.1:0"}) as broker:
        port = broker.broker.metrics.bound_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    exported = {family.name + suffix for family in text_string_to_metric_families(text)
                for suffix in SUFFIXES.get(family.type, ("",))}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {name for panel in _panels(dashboard) for target in panel["targets"]
               for name in METRIC.findall(target["expr"])}
    queried |= set(METRIC.findall(json.dumps(dashboard["templating"])))
    assert len(queried) > 25
    assert sorted(queried - exported) == []
