"""One module per Kafka API, plus context.py (what every handler is given) and errors.py (the handlers'
shared refusals); which wire error code an exception becomes is protocol/error_mapping.py's one table.
Each handler module defines API_KEY, MIN_VERSION, MAX_VERSION and ``handle(context, request)`` returning a response object, an awaitable of one, or None (no response);
optionally ``error_response(context, request, error_code)`` for whole-request failures.

We advertise exactly the versions whose semantics are implemented (see shared/research/clients.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType

# module name -> (API_KEY, MIN_VERSION, MAX_VERSION), copied from each module (tests/server/test_startup_imports.py
# checks the copy). ApiVersions answers from this table, so a handler module -- and the message classes it
# builds at import, about a sixth of `eoslog serve`'s start-up for all of them -- loads on its API's first
# request instead of before the broker accepts connections.
APIS: dict[str, tuple[int, int, int]] = {
    "api_versions": (18, 0, 4),
    "metadata": (3, 0, 13),
    "produce": (0, 0, 13),
    "fetch": (1, 0, 18),
    "list_offsets": (2, 0, 10),
    "create_topics": (19, 2, 7),
    "delete_topics": (20, 1, 6),
    "create_partitions": (37, 0, 3),
    "describe_configs": (32, 1, 4),
    "incremental_alter_configs": (44, 0, 1),
    "alter_configs": (33, 0, 2),
    "delete_records": (21, 0, 2),
    "describe_cluster": (60, 0, 1),
    "describe_topic_partitions": (75, 0, 0),
    "find_coordinator": (10, 0, 4),
    "init_producer_id": (22, 0, 4),
    "join_group": (11, 0, 9),
    "sync_group": (14, 0, 5),
    "heartbeat": (12, 0, 4),
    "leave_group": (13, 0, 5),
    "offset_commit": (8, 1, 9),
    "offset_fetch": (9, 1, 9),
    "list_groups": (16, 0, 5),
    "describe_groups": (15, 0, 6),
    "delete_groups": (42, 0, 2),
    "consumer_group_heartbeat": (68, 0, 1),
    "consumer_group_describe": (69, 0, 1),
    # share groups (KIP-932, docs/share-groups.md)
    "share_group_heartbeat": (76, 1, 1),
    "share_group_describe": (77, 1, 1),
    "share_fetch": (78, 1, 2),
    "share_acknowledge": (79, 1, 2),
    # the share coordinator's, called by brokers (KIP-932; api/_share_state.py)
    "initialize_share_group_state": (83, 0, 0),
    "read_share_group_state": (84, 0, 0),
    "write_share_group_state": (85, 0, 1),
    "delete_share_group_state": (86, 0, 0),
    "read_share_group_state_summary": (87, 0, 1),
    # the share-group admin APIs (KIP-932; docs/share-groups.md "Operating share groups")
    "describe_share_group_offsets": (90, 0, 1),
    "alter_share_group_offsets": (91, 0, 0),
    "delete_share_group_offsets": (92, 0, 0),
    "offset_delete": (47, 0, 0),
    "describe_producers": (61, 0, 0),
    "describe_log_dirs": (35, 1, 4),
    "alter_replica_log_dirs": (34, 1, 2),
    "list_config_resources": (74, 0, 1),
    "add_partitions_to_txn": (24, 0, 5),
    "add_offsets_to_txn": (25, 0, 3),
    "txn_offset_commit": (28, 0, 3),
    "end_txn": (26, 0, 5),
    "write_txn_markers": (27, 1, 1),
    "list_transactions": (66, 0, 2),
    "describe_transactions": (65, 0, 0),
    "offset_for_leader_epoch": (23, 2, 4),
    "elect_leaders": (43, 0, 2),
    "alter_partition_reassignments": (45, 0, 0),
    "list_partition_reassignments": (46, 0, 0),
    "sasl_handshake": (17, 0, 1),
    "sasl_authenticate": (36, 0, 2),
    "describe_user_scram_credentials": (50, 0, 0),
    "alter_user_scram_credentials": (51, 0, 0),
    "describe_acls": (29, 1, 3),
    "create_acls": (30, 1, 3),
    "delete_acls": (31, 1, 3),
    # eoslog's private APIs (docs/spark.md, "Broker extension: transaction groups")
    "commit_transaction_group": (0x7E00, 0, 0),
    "describe_transaction_groups": (0x7E01, 0, 0),
    "abort_transactions_by_prefix": (0x7E02, 0, 0),
    "list_transaction_groups": (0x7E03, 0, 0),
    # eoslog's private APIs (docs/transactions.md, "Check-back transactions")
    "begin_check_back": (0x7E10, 0, 0),
    "poll_check_back": (0x7E11, 0, 0),
    "answer_check_back": (0x7E12, 0, 0),
    "list_check_backs": (0x7E13, 0, 0),
    # eoslog's private APIs (docs/share-groups.md, "Step 6: acknowledgements inside a transaction")
    "add_share_partitions_to_txn": (0x7E20, 0, 0),
    "share_acknowledge_txn": (0x7E21, 0, 0),
}


class _Handlers(Mapping[int, ModuleType]):
    """api_key -> handler module, imported on first lookup (by the event-loop thread; a second import of
    an already-imported module is a dict lookup, so a race between two threads is harmless)."""

    def __init__(self) -> None:
        self._names = {key: name for name, (key, _, _) in APIS.items()}
        self._modules: dict[int, ModuleType] = {}

    def __getitem__(self, api_key: int) -> ModuleType:
        module = self._modules.get(api_key)
        if module is None:
            module = importlib.import_module(f"eoslog.api.{self._names[api_key]}")
            self._modules[api_key] = module
        return module

    def get(self, api_key: int, default=None):  # the dispatcher's per-request lookup: no Mapping.get detour
        module = self._modules.get(api_key)
        if module is not None:
            return module
        return self[api_key] if api_key in self._names else default

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._names

    def __iter__(self) -> Iterator[int]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


HANDLERS: Mapping[int, ModuleType] = _Handlers()


def supported_versions() -> dict[int, tuple[int, int]]:
    return {key: (low, high) for key, low, high in sorted(APIS.values())}
