"""Share sessions: opening, epochs, partition sets, closing, the cache limit and closed connections."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eoslog.share import ShareError, ShareSessions
from eoslog.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, next_epoch

E = ShareError
T0, T1, T2 = ("t", 0), ("t", 1), ("u", 0)


def opened(cache=None, member="m", partitions=(T0, T1), connection="c1"):
    cache = ShareSessions() if cache is None else cache
    update = cache.share_fetch("g", member, INITIAL_EPOCH, partitions, acknowledges=False, connection_id=connection)
    assert update.error is E.NONE
    return cache


def test_epoch_zero_opens_a_session_that_fetches_the_requests_partitions():
    cache = ShareSessions()
    update = cache.share_fetch("g", "m", 0, [T0, T1], [T1], acknowledges=False, connection_id="c1")
    assert (update.error, update.fetch, update.final, update.release) == (E.NONE, (T0, T1), False, ())
    session = cache.get("g", "m")
    assert (session.epoch, list(session.partitions), session.connection_id) == (1, [T0, T1], "c1")
    assert len(cache) == 1 and cache.members("g") == 1 and cache.members("h") == 0


def test_an_opening_request_may_not_acknowledge():
    cache = opened()
    update = cache.share_fetch("g", "m", 0, [T2], acknowledges=True, connection_id="c1")
    assert update.error is E.INVALID_REQUEST and list(cache.get("g", "m").partitions) == [T0, T1]


def test_next_requests_add_then_forget_and_fetch_the_sessions_partitions():
    cache = opened()
    update = cache.share_fetch("g", "m", 1, [T2, T0], [T1], acknowledges=True, connection_id="c1")
    assert update.error is E.NONE and update.fetch == (T0, T2)
    assert cache.share_fetch("g", "m", 2, [], acknowledges=False, connection_id="c1").fetch == (T0, T2)
    # added and forgotten in the same request: forgotten (Kafka adds first)
    assert cache.share_fetch("g", "m", 3, [T1], [T1], acknowledges=False, connection_id="c1").fetch == (T0, T2)
    assert cache.get("g", "m").epoch == 4


@pytest.mark.parametrize("epoch", [0 + 2, 5, -2, 2**31 - 1])
def test_a_wrong_epoch_is_refused_and_changes_nothing(epoch):
    cache = opened()
    update = cache.share_fetch("g", "m", epoch, [T2], acknowledges=False, connection_id="c1")
    assert update.error is E.INVALID_SHARE_SESSION_EPOCH and update.fetch == ()
    assert cache.get("g", "m").epoch == 1 and list(cache.get("g", "m").partitions) == [T0, T1]


@pytest.mark.parametrize("epoch", [1, 7, FINAL_EPOCH])
def test_no_session_is_not_found(epoch):
    cache = opened()
    update = cache.share_fetch("g", "other", epoch, [T0], acknowledges=False, connection_id="c2")
    assert update.error is E.SHARE_SESSION_NOT_FOUND
    assert cache.share_acknowledge("h", "m", epoch).error is E.SHARE_SESSION_NOT_FOUND


def test_epoch_minus_one_closes_and_releases():
    cache = opened()
    update = cache.share_fetch("g", "m", FINAL_EPOCH, [T2], acknowledges=True, connection_id="c1")
    assert (update.error, update.final, update.fetch, update.release) == (E.NONE, True, (), (T0, T1))
    assert cache.get("g", "m") is None and cache.members("g") == 0
    assert cache.connection_closed("c1") is None  # already gone: nothing more to release


def test_epoch_zero_replaces_a_session_without_releasing():
    cache = opened()
    cache.share_fetch("g", "m", 1, [], acknowledges=False, connection_id="c1")
    update = cache.share_fetch("g", "m", 0, [T2], acknowledges=False, connection_id="c2")
    assert (update.error, update.fetch, update.release) == (E.NONE, (T2,), ())
    assert cache.get("g", "m").epoch == 1 and len(cache) == 1
    # the old connection closing leaves the new session alone (KAFKA-19950)
    assert cache.connection_closed("c1") is None and cache.get("g", "m") is not None
    assert cache.connection_closed("c2").key == ("g", "m") and len(cache) == 0


def test_share_acknowledge_epochs():
    cache = opened()
    assert cache.share_acknowledge("g", "m", 0).error is E.INVALID_SHARE_SESSION_EPOCH
    assert cache.share_acknowledge("g", "m", 2).error is E.INVALID_SHARE_SESSION_EPOCH
    assert cache.share_acknowledge("g", "m", 1).error is E.NONE
    assert cache.get("g", "m").epoch == 2 and list(cache.get("g", "m").partitions) == [T0, T1]
    closing = cache.share_acknowledge("g", "m", FINAL_EPOCH)
    assert (closing.error, closing.final, closing.release) == (E.NONE, True, (T0, T1))
    assert cache.get("g", "m") is None


def test_the_limit_refuses_new_sessions_and_evicts_none():
    cache = ShareSessions(max_sessions=2)
    opened(cache, "a", connection="ca")
    opened(cache, "b", connection="cb")
    update = cache.share_fetch("g", "c", 0, [T0], acknowledges=False, connection_id="cc")
    assert update.error is E.SHARE_SESSION_LIMIT_REACHED and cache.get("g", "c") is None and len(cache) == 2
    opened(cache, "a", partitions=[T2], connection="ca")  # replacing one's own session still works
    cache.share_fetch("g", "b", FINAL_EPOCH, [], acknowledges=False, connection_id="cb")
    opened(cache, "c", connection="cc")
    with pytest.raises(ValueError):
        ShareSessions(max_sessions=0)


def test_a_closed_connection_removes_its_session_for_release():
    cache = opened()
    opened(cache, "n", partitions=[T2], connection="c2")
    session = cache.connection_closed("c2")
    assert session.key == ("g", "n") and list(session.partitions) == [T2]
    assert cache.get("g", "n") is None and cache.get("g", "m") is not None
    assert cache.connection_closed("c2") is None and cache.connection_closed("never") is None


def test_next_epoch_wraps_to_one():
    assert [next_epoch(e) for e in (0, 1, 41, 2**31 - 1, -1, -5)] == [1, 2, 42, 1, -1, -1]


PARTITIONS = st.lists(st.sampled_from([T0, T1]), max_size=2)
REQUESTS = st.lists(st.tuples(
    st.sampled_from(["fetch", "fetch", "fetch", "ack", "close"]), st.sampled_from(["a", "b"]),
    st.sampled_from([-1, 0, 0, 0, 1, 1, 2, 3, 9]), PARTITIONS, PARTITIONS, st.sampled_from([False, False, True]),
    st.sampled_from(["c1", "c2"])), max_size=40)


@settings(max_examples=400, deadline=None)
@given(REQUESTS)
def test_random_requests_follow_a_simple_model(requests):
    """Each answer and the cache afterwards, against a model written from the module's rules in a few lines."""
    cache = ShareSessions(max_sessions=1)
    model = {}  # member -> [expected epoch, partitions, connection]
    connections = {}  # connection -> the member whose session it opened, None once that session went otherwise

    def remove(member):
        _, partitions, connection = model.pop(member)
        if connections.get(connection) == member:
            connections[connection] = None
        return partitions

    for kind, member, epoch, partitions, forgotten, acknowledges, connection in requests:
        known = model.get(member)
        if kind == "close":
            closed = cache.connection_closed(connection)
            owner = connections.pop(connection, None)
            if owner is not None and owner in model:
                assert (closed.key.member_id, list(closed.partitions)) == (owner, model[owner][1])
                remove(owner)
            else:
                assert closed is None
        elif kind == "ack" and epoch == 0:
            assert cache.share_acknowledge("g", member, epoch).error is E.INVALID_SHARE_SESSION_EPOCH
        elif epoch == 0:
            update = cache.share_fetch("g", member, epoch, partitions, forgotten, acknowledges=acknowledges,
                                       connection_id=connection)
            if acknowledges:
                assert update.error is E.INVALID_REQUEST
            else:
                if known is not None:
                    remove(member)
                if model:
                    assert update.error is E.SHARE_SESSION_LIMIT_REACHED
                else:
                    assert (update.error, update.fetch) == (E.NONE, tuple(dict.fromkeys(partitions)))
                    model[member] = [1, list(dict.fromkeys(partitions)), connection]
                    connections[connection] = member
        else:
            update = (cache.share_fetch("g", member, epoch, partitions, forgotten, acknowledges=acknowledges,
                                        connection_id=connection) if kind == "fetch"
                      else cache.share_acknowledge("g", member, epoch))
            if known is None:
                assert update.error is E.SHARE_SESSION_NOT_FOUND
            elif epoch == -1:
                assert (update.error, update.final, update.release) == (E.NONE, True, tuple(known[1]))
                remove(member)
            elif epoch != known[0]:
                assert update.error is E.INVALID_SHARE_SESSION_EPOCH
            else:
                assert update.error is E.NONE
                if kind == "fetch":
                    known[1] = [p for p in dict.fromkeys(known[1] + partitions) if p not in forgotten]
                    assert update.fetch == tuple(known[1])
                known[0] += 1
        sessions = {m: cache.get("g", m) for m in ("a", "b")}
        assert {m: [s.epoch, list(s.partitions), s.connection_id] for m, s in sessions.items() if s} == model
