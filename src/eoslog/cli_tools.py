"""Admin and tool commands of the `eoslog` CLI (registered on the main group)."""

from __future__ import annotations
