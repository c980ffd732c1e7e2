"""Per-API request counts, latency histograms and error codes, kept by the dispatcher.

Kafka's RequestMetrics (kafka.network:type=RequestMetrics,name=RequestsPerSec|TotalTimeMs|ErrorsPerSec,
request=<API>[,error=<code>]). Only the event loop writes and reads these dicts (server/metrics.py takes
its copy there), so a request pays for a clock read, a bisect and a few dict updates, with no lock.
Produce and Fetch answer most refusals per partition inside a successful response; those codes are
counted too, since "produce errors by code" is what an operator looks for.
"""

from __future__ import annotations

from eoslog.log.telemetry import COUNTER, HISTOGRAM, Family, Histogram

PRODUCE_KEY = 0
FETCH_KEY = 1


def request_name(api_module: str) -> str:
    """Kafka's name for an API (``init_producer_id`` -> ``InitProducerId``)."""
    return "".join(part.capitalize() for part in api_module.split("_"))


class RequestMetrics:
    def __init__(self) -> None:
        self.latency: dict[int, Histogram] = {}  # api key -> seconds from decoded to answered
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> responses carrying it

    def finished(self, api_key: int, seconds: float, response: object) -> None:
        histogram = self.latency.get(api_key)
        if histogram is None:
            histogram = self.latency[api_key] = Histogram()
        histogram.observe(seconds)
        if response is not None and api_key <= FETCH_KEY:
            self._partition_errors(api_key, response)

    def error(self, api_key: int, code: int) -> None:
        key = (api_key, int(code))
        self.errors[key] = self.errors.get(key, 0) + 1

    def _partition_errors(self, api_key: int, response) -> None:
        if api_key == PRODUCE_KEY:
            for topic in response.responses:
                for partition in topic.partition_responses:
                    if partition.error_code:
                        self.error(api_key, partition.error_code)
        else:
            if response.error_code:
                self.error(api_key, response.error_code)
            for topic in response.responses:
                for partition in topic.partitions:
                    if partition.error_code:
                        self.error(api_key, partition.error_code)

    def families(self) -> list[Family]:
        """On the event loop: a consistent copy for the metrics thread."""
        from eoslog import api
        from eoslog.protocol.errors import ErrorCode

        names = {key: request_name(module) for module, (key, _, _) in api.APIS.items()}
        requests = Family("kafka_network_requestmetrics_requests", COUNTER,
                          "Requests answered, per API (RequestsPerSec)", ("request",))
        total_time = Family("kafka_network_requestmetrics_totaltime_seconds", HISTOGRAM,
                            "Time from a request decoded to its response ready, per API (TotalTimeMs)",
                            ("request",))
        errors = Family("kafka_network_requestmetrics_errors", COUNTER,
                        "Error codes in responses, per API; Produce and Fetch count each partition's "
                        "(ErrorsPerSec)", ("request", "error"))
        for key, histogram in sorted(self.latency.items()):
            value = histogram.value()
            requests.add(value.buckets[-1][1], names.get(key, str(key)))
            total_time.add(value, names.get(key, str(key)))
        for (key, code), count in sorted(self.errors.items()):
            try:
                error = ErrorCode(code).name
            except ValueError:
                error = str(code)
            errors.add(count, names.get(key, str(key)), error)
        return [requests, total_time, errors]
