"""The pure parts of the metrics: histogram buckets and Kafka's request names."""

from __future__ import annotations

from eoslog.log.telemetry import Histogram
from eoslog.server.request_metrics import RequestMetrics, request_name


def test_histogram_buckets_are_cumulative_and_end_with_inf():
    histogram = Histogram((0.001, 0.01, 0.1))
    for value in (0.0005, 0.001, 0.005, 0.05, 3.0):
        histogram.observe(value)
    value = histogram.value()
    assert value.buckets == ((0.001, 2), (0.01, 3), (0.1, 4), (float("inf"), 5))
    assert abs(value.sum - 3.0565) < 1e-9


def test_request_names_and_counts():
    assert request_name("init_producer_id") == "InitProducerId"
    assert request_name("produce") == "Produce"
    metrics = RequestMetrics()
    metrics.finished(18, 0.0002, None)
    metrics.error(3, 3)
    families = {f.name: f for f in metrics.families()}
    assert families["kafka_network_requestmetrics_requests"].samples == [(("ApiVersions",), 1)]
    assert families["kafka_network_requestmetrics_errors"].samples == [(("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"), 1)]
