"""One connection to each other broker, shared by every request this broker sends there outside
replication: transaction markers to a partition's leader (coordinator/transaction/markers.py) and the
produce path's KIP-890 questions to a transaction coordinator (cluster/transaction_verification.py).
Replica fetchers keep their own connection, as Kafka's do (a long-poll Fetch must not hold up a marker).

Contract
- Only the broker's event loop calls it. A connection is made on first use and made again when the
  other broker's registered address (for ``inter.broker.listener.name``) changes; requests on one
  connection are pipelined (cluster/broker_client.py).
- A sole broker has no other broker: :meth:`client_for` answers None, as for a broker not registered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eoslog.cluster.broker_client import PLAINTEXT_LINK, BrokerClient, BrokerLink


class BrokerClients:
    def __init__(self, node_id: int, brokers: Callable[[], Mapping[int, Any]],
                 link: BrokerLink = PLAINTEXT_LINK) -> None:
        """``brokers()``: the registrations of the live brokers by id (the cluster view's)."""
        self._client_id = f"eoslog-broker-{node_id}"
        self._brokers = brokers
        self._link = link
        self._clients: dict[int, BrokerClient] = {}

    def client_for(self, broker_id: int) -> BrokerClient | None:
        """The connection to ``broker_id``'s inter-broker listener; None while it has no such endpoint
        registered (not registered, or registered without that listener)."""
        address = self._link.address(self._brokers().get(broker_id))
        if address is None:
            return None
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != address:
            if client is not None:
                client.close()
            client = self._clients[broker_id] = BrokerClient(*address, self._client_id, self._link)
        return client

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
