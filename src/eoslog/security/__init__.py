"""Security: who a client is (SASL, TLS principals) and what it may do (ACLs).

- ``scram.py``: SCRAM credentials (salted, iterated; never a password) and Kafka's text form of them.
- ``credentials.py``: the durable store of those credentials.
- ``sasl.py``: the server side of one connection's SASL exchange, PLAIN and SCRAM-SHA-256/512, as a pure
  state machine the SaslHandshake / SaslAuthenticate handlers drive.
- ``client.py``: TLS and SASL for eoslog's own clients (admin tools, the Spark sink's driver).
- ``acl.py``, ``acl_format.py``, ``authorizer.py``, ``file_store.py``, ``zk_store.py``: authorization, ACLs
  with Kafka's semantics (docs/security.md, "Authorization (ACLs)").
"""

# The one CLUSTER resource's name, as Kafka spells it (security/acl.py re-exports it). Here so that what every
# request's context needs of ACLs (api/context.py's defaults) does not load acl.py before the port opens.
CLUSTER_NAME = "kafka-cluster"
