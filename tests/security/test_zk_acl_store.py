"""The ZooKeeper ACL store (security/zk_store.py) against a real ZooKeeper: Kafka's znodes, every store
reloading on a change made through another, concurrent writers to one pattern both landing, and old
change notifications pruned."""

from __future__ import annotations

import json
import threading

import pytest
from kazoo.client import KazooClient

from eoslog.security import zk_store
from eoslog.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from eoslog.security.zk_store import ZooKeeperAclStore
from eoslog.testing.wait import wait_until


def binding(principal: str, name: str = "orders", pattern_type: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern_type),
                      AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW))


class Store:
    """A store on its own ZooKeeper session, recording what its watch reloads."""

    def __init__(self, connect: str) -> None:
        self.client = KazooClient(hosts=connect, timeout=10)
        self.client.start(timeout=30)
        self.seen: set[AclBinding] = set()
        self.lock = threading.Lock()
        self.store = ZooKeeperAclStore(self.client, self._reloaded)
        self.seen = set(self.store.load())

    def _reloaded(self, bindings) -> None:
        with self.lock:
            self.seen = set(bindings)

    def close(self) -> None:
        self.client.stop()
        self.client.close()



@pytest.fixture
def stores(zookeeper):
    made = [Store(zookeeper.connect_string + "/eoslog") for _ in range(2)]
    yield made
    for store in made:
        store.close()


def test_changes_land_in_kafkas_znodes_and_reach_every_store(stores):
    a, b = stores
    alice, prefixed = binding("User:alice"), binding("User:bob", "ord", PatternType.PREFIXED)
    a.store.add(frozenset(), [alice, prefixed])
    wait_until(lambda: b.seen == {alice, prefixed}, 15, "the other store reloading")
    data, _ = a.client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert a.client.exists("/kafka-acl-extended/prefixed/Topic/ord") is not None
    assert a.client.get_children("/kafka-acl-changes") and a.client.get_children("/kafka-acl-extended-changes")

    b.store.remove(frozenset(), {alice})
    wait_until(lambda: a.seen == {prefixed}, 15, "the first store reloading the removal")
    assert a.client.exists("/kafka-acl/Topic/orders") is None  # an empty pattern's znode is deleted


def test_concurrent_writers_to_one_pattern_both_land(stores):
    a, b = stores
    principals = [f"User:u{i}" for i in range(20)]
    threads = [threading.Thread(target=store.store.add, args=(frozenset(), [binding(p)]))
               for store, p in zip([a, b] * 10, principals)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {binding(p) for p in principals}
    assert set(a.store.read_all()) == expected
    wait_until(lambda: a.seen == expected and b.seen == expected, 15, "both stores reloading every write")


def test_old_change_notifications_are_pruned(stores, monkeypatch):
    a, _ = stores
    a.store.add(frozenset(), [binding("User:alice")])
    a.store.add(frozenset(), [binding("User:bob")])
    assert len(a.client.get_children("/kafka-acl-changes")) == 2
    monkeypatch.setattr(zk_store, "CHANGE_EXPIRATION_MS", -1)  # everything already written is old
    a.store.add(frozenset(), [binding("User:carol")])
    assert len(a.client.get_children("/kafka-acl-changes")) <= 1
