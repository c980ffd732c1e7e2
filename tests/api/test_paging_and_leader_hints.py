"""The pure cores behind DescribeTopicPartitions' paging and KIP-951's leader hints: every rule of
Kafka's, checked without a broker."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from eoslog.api._leader_hints import PRODUCE_MIN_VERSION, NodeEndpoint, add_to_produce, hints
from eoslog.api.describe_topic_partitions import page
from eoslog.cluster.zk.layout import (
    BrokerRegistration,
    ClusterView,
    Endpoint,
    PartitionState,
    TopicAssignment,
)


def test_page_fits_everything_without_a_cursor():
    assert page([("a", 2), ("b", 1)], {}, 10, False) == ([("a", range(2)), ("b", range(1))], None)


def test_page_cuts_inside_a_topic_and_resumes_there():
    assert page([("a", 3), ("b", 1)], {}, 2, False) == ([("a", range(2))], ("a", 2))
    assert page([("a", 3), ("b", 1)], {"a": 2}, 2, False) == ([("a", range(2, 3)), ("b", range(1))], None)


def test_page_limit_used_up_exactly_points_at_the_next_topic():
    assert page([("a", 2), ("b", 5)], {}, 2, False) == ([("a", range(2))], ("b", 0))


def test_page_missing_topics_answered_or_skipped():
    assert page([("a", None), ("b", 1)], {}, 1, False) == ([("a", None), ("b", range(1))], None)
    assert page([("a", None), ("b", 1)], {}, 1, True) == ([("b", range(1))], None)


def test_page_limit_zero_answers_nothing_and_points_at_the_first_topic():
    assert page([("a", 1)], {}, 0, False) == ([], ("a", 0))


@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=5), limit=st.integers(1, 7))
def test_paging_visits_every_partition_exactly_once(counts, limit):
    topics = [(f"t{i}", n) for i, n in enumerate(counts)]
    seen, cursor = [], None
    for _ in range(100):
        remaining = [(name, n) for name, n in topics if cursor is None or name >= cursor[0]]
        answered, cursor = page(remaining, {cursor[0]: cursor[1]} if cursor else {}, limit, False)
        seen += [(name, i) for name, indexes in answered for i in indexes]
        if cursor is None:
            break
    assert seen == [(name, i) for name, n in topics for i in range(n)]


def _view() -> ClusterView:
    view = ClusterView(brokers={
        1: BrokerRegistration(1, (Endpoint("CLIENT", "PLAINTEXT", "b1", 9001),), "r1"),
        2: BrokerRegistration(2, (Endpoint("CLIENT", "PLAINTEXT", "b2", 9002), Endpoint("INTERNAL", "PLAINTEXT", "i2", 9102))),
        3: BrokerRegistration(3, (Endpoint("INTERNAL", "PLAINTEXT", "i3", 9103),)),
    })
    view.topics["t"] = TopicAssignment("t", uuid.uuid4(), {0: (1, 2), 1: (2, 1), 2: (3, 1), 3: (4, 1)})
    view.states[("t", 0)] = PartitionState(1, 7, (1, 2), 1)
    view.states[("t", 1)] = PartitionState(2, 3, (2, 1), 1)
    view.states[("t", 2)] = PartitionState(3, 5, (3,), 1)  # its leader has no CLIENT listener
    view.states[("t", 3)] = PartitionState(4, 9, (4,), 1)  # its leader is not a live broker
    return view


def test_hints_name_leaders_and_epochs_and_each_live_endpoint_once():
    leaders, endpoints = hints(_view(), "CLIENT", [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 0), ("u", 0)])
    assert leaders == {("t", 0): (1, 7), ("t", 1): (2, 3), ("t", 2): (3, 5), ("t", 3): (4, 9), ("u", 0): (-1, -1)}
    assert endpoints == [NodeEndpoint(1, "b1", 9001, "r1"), NodeEndpoint(2, "b2", 9002, None)]


def test_hints_use_the_clients_listener():
    _, endpoints = hints(_view(), "INTERNAL", [("t", 1), ("t", 2)])
    assert endpoints == [NodeEndpoint(2, "i2", 9102, None), NodeEndpoint(3, "i3", 9103, None)]


def test_add_to_produce_cancelled_before_the_handler_starts_closes_the_handlers_coroutine():
    """On a cluster a Produce answered later (a transactional one verified with a remote coordinator) gets
    its hints through ``eager_future.mapped``, not a coroutine around the handler's: the dispatcher's
    cancel before the first step (its connection lost) then closes the handler's coroutine instead of
    leaving it unstarted (tests/server/test_request_dispatched_as_connection_lost.py has the case)."""

    async def answer_later():
        return None

    async def scenario():
        coroutine = answer_later()
        context = SimpleNamespace(api_version=PRODUCE_MIN_VERSION)
        task = asyncio.ensure_future(add_to_produce(context, coroutine))  # what the dispatcher does with it
        task.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED

    asyncio.run(scenario())
