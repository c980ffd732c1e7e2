"""ApiVersions (key 18): which versions of which APIs this broker serves.

We never emit tagged fields (no SupportedFeatures/FinalizedFeatures): librdkafka before 2.2 (kcat here)
misparses them, and advertising no `transaction.version` feature keeps clients on transaction
version 1, whose semantics we implement.
"""

from eoslog import api
from eoslog.protocol.messages import ApiVersionsResponse

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def handle(context, request):
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in api.supported_versions().items()
        ],
        throttle_time_ms=0,
    )
