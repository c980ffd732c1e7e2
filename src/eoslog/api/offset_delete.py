"""OffsetDelete (key 47), v0 (KIP-496): deletes committed offsets of topics the group does not consume."""

from __future__ import annotations

from eoslog.api._group_common import code, resolve, service
from eoslog.protocol.messages import OffsetDeleteResponse

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition


def handle(context, request):
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    return _respond(request, service(context).call("delete_offsets", request.group_id, wanted))


async def _respond(request, answer):
    resp = await resolve(answer)
    if code(resp.error):
        return OffsetDeleteResponse(error_code=code(resp.error), throttle_time_ms=0, topics=[])
    errors = {(r.topic, r.partition): code(r.error) for r in resp.partitions}
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index,
                                                 error_code=errors.get((t.name, p.partition_index), 0))
                                       for p in t.partitions])
        for t in request.topics])


def error_response(context, request, error_code):
    return OffsetDeleteResponse(error_code=int(error_code), throttle_time_ms=0, topics=[])
