"""The broker's persister (coordinator/share/persister.py, RoutingPersister): the share coordinator looked
up again after each retriable answer, with a backoff, in-process when it is this broker, by RPC otherwise;
bounded attempts. The RPC path against real brokers is tests/share/test_share_cluster.py's."""

from __future__ import annotations

import asyncio
import uuid

from eoslog.cluster.broker_client import BrokerConnectionError
from eoslog.coordinator.share.log_format import StateBatch
from eoslog.coordinator.share.persister import RoutingPersister
from eoslog.coordinator.share.shard import ShareAnswer
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)


class Local:
    def __init__(self, answers):
        self.answers, self.calls = list(answers), []

    async def write_state(self, group_id, topic_id, partition, **fields):
        self.calls.append((group_id, topic_id, partition, fields))
        return self.answers.pop(0)


class Client:
    """Another broker's connection: answers WriteShareGroupState with the next code, or fails."""

    def __init__(self, codes):
        self.codes, self.requests = list(codes), []

    async def request(self, api_key, version, request, timeout_s):
        self.requests.append((api_key, version, request))
        code = self.codes.pop(0)
        if code is None:
            raise BrokerConnectionError("gone")
        r = messages.WriteShareGroupStateResponse
        return r(results=[r.WriteStateResult(topic_id=request.topics[0].topic_id, partitions=[
            r.PartitionResult(partition=request.topics[0].partitions[0].partition, error_code=int(code),
                              error_message=None)])])


class Clients:
    def __init__(self, clients):
        self.clients = clients

    def client_for(self, broker_id):
        return self.clients.get(broker_id)


def write(persister):
    return asyncio.run(persister.write_state("g", TOPIC, 3, state_epoch=1, leader_epoch=5, start_offset=10,
                                             state_batches=[StateBatch(10, 12, 0, 1)]))


def test_a_remote_coordinator_is_sent_the_rpc_and_retried_where_the_lookup_now_points():
    lookups = iter([2, 2, 3])  # broker 2 says NOT_COORDINATOR, then cannot be reached; broker 3 takes it
    two, three = Client([ErrorCode.NOT_COORDINATOR, None]), Client([ErrorCode.NONE])
    local = Local([])
    persister = RoutingPersister(1, local, lambda key: next(lookups), Clients({2: two, 3: three}),
                                 backoff_s=(0.001, 0.002))
    assert write(persister).error is ErrorCode.NONE
    assert not local.calls and len(two.requests) == 2 and persister.remote_calls == 2
    api_key, version, request = three.requests[0]
    assert (api_key, version, request.group_id) == (85, 1, "g")
    data = request.topics[0].partitions[0]
    assert (data.partition, data.state_epoch, data.leader_epoch, data.start_offset) == (3, 1, 5, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in data.state_batches] \
        == [(10, 12, 0, 1)]


def test_the_local_coordinator_is_called_in_process_and_no_lookup_retries_forever():
    local = Local([ShareAnswer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), ShareAnswer(ErrorCode.NONE)])
    persister = RoutingPersister(1, local, lambda key: 1, Clients({}), backoff_s=(0.001, 0.002))
    assert write(persister).error is ErrorCode.NONE
    assert [c[:3] for c in local.calls] == [("g", TOPIC, 3)] * 2
    nobody = RoutingPersister(1, Local([]), lambda key: None, Clients({}), backoff_s=(0.001, 0.002), max_attempts=3)
    assert write(nobody).error is ErrorCode.COORDINATOR_NOT_AVAILABLE  # given up: the caller retries later


def test_a_final_answer_is_not_retried():
    two = Client([ErrorCode.FENCED_LEADER_EPOCH])
    persister = RoutingPersister(1, Local([]), lambda key: 2, Clients({2: two}), backoff_s=(0.001, 0.002))
    assert write(persister).error is ErrorCode.FENCED_LEADER_EPOCH
    assert len(two.requests) == 1
