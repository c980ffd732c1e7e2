"""How `eoslog serve` logs: text or JSON lines (``--log-format``), one level for everything and any
number of per-component levels (``--log-level eoslog.cluster=debug``, repeatable).

A JSON line carries ts (ISO 8601, UTC, milliseconds), level, logger and message, the exception's
traceback when there is one, and every extra field a caller passed (``log.info(..., extra={...})``), so
a log pipeline can filter on them without parsing the message.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        import json  # only with --log-format json: the text format's start-up does without it

        return json.dumps(entry, default=str)


def parse_levels(specs: Iterable[str]) -> tuple[str, dict[str, str]]:
    """``["info", "eoslog.cluster=debug"]`` -> ("info", {"eoslog.cluster": "debug"}); ValueError when a
    level is not one of LEVELS. The last bare level wins, as does the last level given for a logger."""
    root, per_logger = "info", {}
    for spec in specs:
        name, sep, level = spec.rpartition("=")
        level = level.strip().lower()
        if level not in LEVELS:
            raise ValueError(f"--log-level {spec!r}: the level must be one of {', '.join(LEVELS)}")
        if sep:
            if not name.strip():
                raise ValueError(f"--log-level {spec!r}: expected LEVEL or LOGGER=LEVEL")
            per_logger[name.strip()] = level
        else:
            root = level
    return root, per_logger


def configure_logging(root: str, per_logger: dict[str, str] | None = None, log_format: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, root.upper()), handlers=[handler])
    # kazoo logs every connection step at INFO; eoslog reports what matters (session loss, re-registration).
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, getattr(logging, root.upper())))
    for name, level in (per_logger or {}).items():
        logging.getLogger(name).setLevel(getattr(logging, level.upper()))
