"""The registry's metrics at GET /metrics, scraped and parsed with prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.interop


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    samples["text"] = text
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_latency_and_state(http, registry):
    before = scrape(registry.url)
    status, body = http.post("/subjects/metrics-secret-value/versions", {"schema": '"bytes"'})
    assert status == 200
    for _ in range(3):
        assert http.get(f"/schemas/ids/{body['id']}")[0] == 200
    assert http.get("/subjects/metrics-missing-value/versions")[0] == 404
    after = scrape(registry.url)

    lookup = {"method": "GET", "route": "/schemas/ids/{id:int}"}
    assert value(after, "eoslog_schema_registry_requests_total", **lookup, status="200") - \
        value(before, "eoslog_schema_registry_requests_total", **lookup, status="200") == 3
    assert value(after, "eoslog_schema_registry_request_seconds_count", **lookup) - \
        value(before, "eoslog_schema_registry_request_seconds_count", **lookup) == 3
    assert value(after, "eoslog_schema_registry_requests_total", method="GET", route="/subjects/{subject}/versions",
                 status="404") >= 1
    assert value(after, "eoslog_schema_registry_records_written_total") - \
        value(before, "eoslog_schema_registry_records_written_total") == 1
    assert value(after, "eoslog_schema_registry_writer") == 1
    assert value(after, "eoslog_schema_registry_ready") == 1
    assert value(after, "eoslog_schema_registry_subjects") >= 1
    assert value(after, "eoslog_schema_registry_position") > value(before, "eoslog_schema_registry_position")
    assert "metrics-secret-value" not in after["text"]  # subjects never become label values
