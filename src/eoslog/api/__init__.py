"""One module per Kafka API. Each module defines API_KEY, MIN_VERSION, MAX_VERSION and
``handle(context, request)`` returning a response object, an awaitable of one, or None (no response);
optionally ``error_response(context, request, error_code)`` for whole-request failures.

We advertise exactly the versions whose semantics are implemented (see shared/research/clients.md).
"""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "incremental_alter_configs",
    "delete_records",
    "describe_cluster",
    "find_coordinator",
    "init_producer_id",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    "describe_producers",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "txn_offset_commit",
    "end_txn",
    "write_txn_markers",
    "list_transactions",
    "describe_transactions",
    "offset_for_leader_epoch",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_acls",
    "create_acls",
    "delete_acls",
    # eoslog's private APIs (docs/spark.md, "Broker extension: transaction groups")
    "commit_transaction_group",
    "describe_transaction_groups",
    "abort_transactions_by_prefix",
)


def _load() -> dict[int, ModuleType]:
    handlers: dict[int, ModuleType] = {}
    for name in _MODULES:
        try:
            module = importlib.import_module(f"eoslog.api.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"eoslog.api.{name}":
                continue  # not built yet; not advertised
            raise
        handlers[module.API_KEY] = module
    return handlers


HANDLERS: dict[int, ModuleType] = _load()


def supported_versions() -> dict[int, tuple[int, int]]:
    return {key: (module.MIN_VERSION, module.MAX_VERSION) for key, module in sorted(HANDLERS.items())}
