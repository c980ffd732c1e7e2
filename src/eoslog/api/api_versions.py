"""ApiVersions (key 18): which versions of which APIs this broker serves, and (v3+) its features.

Features (KIP-584, in the v3+ tagged fields): ``transaction.version`` 2 is finalized, so clients that
know KIP-890 part 2 use transaction version 2 (EndTxn v5, partitions added by Produce v12, through
AddPartitionsToTxn v5 from the partition leader when the coordinator is another broker).

Old librdkafka (kcat 1.7 here, librdkafka 2.0) cannot parse an ApiVersions v3 response with
tagged fields in it, and it says who it is in the request (ClientSoftwareName / Version); such a
client is answered without features, which leaves it where it is anyway: on transaction version 1.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from eoslog import api
from eoslog.protocol.messages import ApiVersionsResponse

if TYPE_CHECKING:
    from eoslog.api.context import RequestContext
    from eoslog.protocol.messages import ApiVersionsRequest

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

FEATURES_SINCE = 3
TRANSACTION_VERSION_FEATURE = "transaction.version"
# Supported levels of transaction.version. 1 and 0 behave alike here (KIP-890 part 1's verification is
# always on), and KAFKA-17011: clients before ApiVersions v4 choke on a supported minimum of 0.
TRANSACTION_VERSION_RANGE = (1, 2)
FINALIZED_TRANSACTION_VERSION = 2
# Features never change while a broker runs; any epoch >= 0 says "this information is valid".
FINALIZED_FEATURES_EPOCH = 1
# librdkafka's own software version, whichever name the application gave itself: "2.0.2", or
# "2.16.1-rdkafka-2.16.1" for confluent-kafka.
_RDKAFKA_VERSION = re.compile(r"(?:.*rdkafka-)?(\d+)\.(\d+)")


def handle(context: RequestContext, request: ApiVersionsRequest):
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in api.supported_versions().items()
        ],
        throttle_time_ms=0,
    )
    if context.api_version >= FEATURES_SINCE and not _misreads_tagged_fields(request):
        low, high = TRANSACTION_VERSION_RANGE
        response.supported_features = [ApiVersionsResponse.SupportedFeatureKey(
            name=TRANSACTION_VERSION_FEATURE, min_version=low, max_version=high)]
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
        response.finalized_features = [ApiVersionsResponse.FinalizedFeatureKey(
            name=TRANSACTION_VERSION_FEATURE, max_version_level=FINALIZED_TRANSACTION_VERSION,
            min_version_level=FINALIZED_TRANSACTION_VERSION)]
    return response


def _misreads_tagged_fields(request) -> bool:
    """librdkafka before 2.2 (see the module docstring)."""
    name = getattr(request, "client_software_name", "") or ""
    version = getattr(request, "client_software_version", "") or ""
    if "rdkafka" not in name and "rdkafka" not in version and name not in ("kcat", "kafkacat"):
        return False
    match = _RDKAFKA_VERSION.match(version)
    return match is None or (int(match.group(1)), int(match.group(2))) < (2, 2)
