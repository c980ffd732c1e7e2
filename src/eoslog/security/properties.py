"""Java-style properties files (``key=value`` or ``key: value``, ``#`` and ``!`` comments): the format of
a broker's config file (``eoslog serve --config``) and of a client's (``--command-config``,
``eoslog.console.command.config``).

It lives here, below server/ and tools/, because security/client.py, the lowest layer that reads a client
config, needs it too; server/config.py takes ``ConfigError`` from here so a bad line in either file is the
same error.
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """A configuration value is missing, unknown or out of range; the message names the property."""


def read_properties(path: Path) -> dict[str, str]:
    properties: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        for separator in ("=", ":"):
            if separator in line:
                key, value = line.split(separator, 1)
                break
        else:
            raise ConfigError(f"{path}:{number}: expected key=value, got {raw!r}")
        properties[key.strip()] = value.strip()
    return properties
