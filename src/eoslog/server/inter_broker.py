"""How a cluster member connects to the others: ``inter.broker.listener.name`` picks the listener (by
name) of every other broker's registration, and that listener's security protocol says how to speak
to it. The same ``ssl.*`` properties (``listener.name.<name>.ssl.*`` first) that configure the
listener for incoming connections configure the outgoing ones, as in Kafka.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from eoslog.cluster.broker_client import AfterConnect, BrokerLink
from eoslog.server.listeners import Listener


class InterBrokerError(ValueError):
    """The inter-broker listener cannot be used to connect to other brokers (a configuration error)."""


def client_security(protocol: str, properties: Mapping[str, str], listener: Listener
                    ) -> tuple[ssl.SSLContext | None, AfterConnect | None]:
    """(TLS context or None, step after connecting or None) for connections to a listener of this
    protocol. SASL_PLAINTEXT and SASL_SSL will add their authentication as the step after connecting."""
    if protocol == "PLAINTEXT":
        return None, None
    if protocol == "SSL":
        from eoslog.server.tls import TlsConfigError, client_context

        try:
            return client_context(properties, listener), None
        except TlsConfigError as exc:
            raise InterBrokerError(f"inter-broker listener {listener.name}: {exc}") from exc
    raise InterBrokerError(f"inter-broker listener {listener.name} is {protocol}: SASL between brokers comes "
                           "with SASL support; use a PLAINTEXT or SSL listener for inter.broker.listener.name")


def inter_broker_link(listener: Listener, properties: Mapping[str, str]) -> BrokerLink:
    context, after_connect = client_security(listener.protocol, properties, listener)
    return BrokerLink(listener.name, context, after_connect)
