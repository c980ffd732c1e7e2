"""Reading a broker's Prometheus endpoint in tests: a real HTTP GET, parsed by prometheus_client's own
text parser (the format a Prometheus server reads)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def scrape(port: int, host: str = "127.0.0.1") -> list[Sample]:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def requests_total(port: int, request: str) -> float:
    """How many requests of one API (its Kafka name, e.g. "ListOffsets") the broker has served."""
    return sum(s.value for s in scrape(port)
               if s.name == "kafka_network_requestmetrics_requests_total" and s.labels.get("request") == request)
