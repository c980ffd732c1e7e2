"""The console's URL and form helpers (no I/O)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from starlette.exceptions import HTTPException

from eoslog.console.group_routes import reset_target
from eoslog.console.pages import segment
from eoslog.tools.reset_offsets import Target


def test_a_path_segment_escapes_every_reserved_character() -> None:
    for value in ["a/b c?#%é", "x/partitions", "50%", "..a", "ü/../"]:
        encoded = segment(value)
        assert not set(encoded) & set("/?# é") and unquote(encoded) == value


def test_the_reset_form_becomes_reset_offsets_target() -> None:
    assert reset_target("earliest", "ignored") == Target("earliest")
    assert reset_target("latest", "") == Target("latest")
    assert reset_target("offset", " 42 ") == Target("offset", 42)
    assert reset_target("shift", "-3") == Target("shift", -3)
    assert reset_target("timestamp", "1700000000000") == Target("datetime", 1_700_000_000_000)
    assert reset_target("timestamp", "2026-11-25T08:00:00Z") == Target("datetime", 1_795_593_600_000)
    for to, value in [("offset", "x"), ("timestamp", ""), ("timestamp", "yesterday"), ("sideways", "1")]:
        with pytest.raises(HTTPException) as refused:
            reset_target(to, value)
        assert refused.value.status_code == 400
