"""A schema registry speaking the Confluent Schema Registry REST API (v1), with its state in a compacted
``_schemas`` topic in the record format Confluent's registry and Karapace write (docs/schema-registry.md).

The layers, bottom up:

- ``errors.py``: the registry's error codes and the one exception type that carries them;
- ``record_format.py``: the ``_schemas`` keys and values (documented once, in docs/schema-registry.md);
- ``state.py``: the registry's state as the records make it, no I/O;
- ``formats/``: Avro, JSON Schema and Protobuf parsed with their libraries, and their compatibility rules;
- ``compatibility.py``: the levels (BACKWARD, FORWARD, FULL, their TRANSITIVE forms, NONE) over a format;
- ``decisions.py``: what a request changes, as records to write, or its answer, no I/O;
- ``store.py``: the topic (its reader thread and the transactional writer), ``election.py``: one writer
  among several instances through a Kafka group, ``registry.py``: the three tied together;
- ``app.py`` and ``server.py``: the HTTP layer; ``cli.py``: ``eoslog schema-registry`` and ``eoslog schemas``.

Nothing here is imported by ``eoslog serve`` unless ``--schema-registry-listen`` is given.
"""
