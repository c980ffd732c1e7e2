"""The compatibility levels over any format: which earlier versions a new schema is checked against, and
in which direction. A format only says what of a writer's data a reader cannot read
(``ParsedSchema.read_errors``); the levels are the same for Avro, JSON Schema and Protobuf:

==================== ======================================= =====================================
level                checked against                         the new schema must
==================== ======================================= =====================================
NONE                 nothing                                 -
BACKWARD             the latest version                      read data written with it
BACKWARD_TRANSITIVE  every version                           read data written with each
FORWARD              the latest version                      be read by it
FORWARD_TRANSITIVE   every version                           be read by each
FULL                 the latest version                      both
FULL_TRANSITIVE      every version                           both
==================== ======================================= =====================================
"""

from __future__ import annotations

from dataclasses import dataclass

from eoslog.schema_registry.formats import Incompatibility, ParsedSchema


@dataclass(frozen=True)
class Earlier:
    """A live version of the subject, oldest first in the lists given here."""

    version: int
    schema: ParsedSchema


def check(level: str, candidate: ParsedSchema, earlier: list[Earlier]) -> list[str]:
    """Confluent's messages for every incompatibility found, empty when the candidate may be registered."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    messages: list[str] = []
    for version in reversed(against):
        found: list[Incompatibility] = []
        if candidate.schema_type != version.schema.schema_type:
            found.append(Incompatibility("TYPE_CHANGED", "/", f"the schema type changed from "
                                         f"{version.schema.schema_type} to {candidate.schema_type}"))
        else:
            try:
                if backward:
                    found += candidate.read_errors(version.schema)
                if forward:
                    found += version.schema.read_errors(candidate)
            except RecursionError:  # refused rather than answered with a 500: nothing proved it compatible
                found.append(Incompatibility("NESTED_TOO_DEEPLY", "/", "the schemas are nested too deeply to "
                                             "compare"))
        if found:
            messages += [str(i) for i in found]
            messages.append(f"{{oldSchemaVersion: {version.version}}}")
            messages.append(f"{{compatibility: '{level}'}}")
    return messages
