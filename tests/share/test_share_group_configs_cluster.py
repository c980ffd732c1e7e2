"""Group configs on a ZooKeeper cluster: kept at /config/groups/<group>, announced under /config/changes,
so a change made through one broker is described by every other (cluster/group_configs_zk.py); a
refused change is written nowhere."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from eoslog.testing.cluster import embedded_cluster

pytestmark = pytest.mark.interop


def test_group_config_changes_reach_every_broker(tmp_path):
    with embedded_cluster(2, tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap})

        def alter(name: str, value: str):
            resource = ConfigResource(ResourceType.GROUP, "zk-group", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            return admin.incremental_alter_configs([resource])[resource].result(30)

        alter("share.isolation.level", "read_committed")
        with pytest.raises(confluent_kafka.KafkaException, match="share.delivery.count.limit"):
            alter("share.delivery.count.limit", "99")
        other = AdminClient({"bootstrap.servers": cluster.broker(2).bootstrap})
        deadline = time.monotonic() + 30
        while True:
            resource = ConfigResource(ResourceType.GROUP, "zk-group")
            entries = other.describe_configs([resource])[resource].result(30)
            if entries["share.isolation.level"].value == "read_committed":
                break
            assert time.monotonic() < deadline, entries["share.isolation.level"].value
            time.sleep(0.1)
        assert entries["share.delivery.count.limit"].value == "5"  # the refused change reached nobody
        assert b"read_committed" in cluster._client().get("/config/groups/zk-group")[0]
