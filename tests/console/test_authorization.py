"""console/authorization.py: authorization failures told apart from other errors of the admin tools."""

from __future__ import annotations

import click
import pytest

from eoslog.console.authorization import NotAuthorized, or_not_authorized, refusal, refused
from eoslog.protocol.errors import ErrorCode
from eoslog.tools.common import check


def fails(code: ErrorCode, what: str = "DescribeConfigs topic a"):
    def call():
        check(int(code), what)
    return call


def test_refusals_are_named_by_their_error_code():
    for code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        with pytest.raises(click.ClickException) as info:
            fails(code)()
        assert refusal(info.value) == code.name
    assert refusal(click.ClickException("topic b: UNKNOWN_TOPIC_OR_PARTITION")) is None
    assert refusal(click.ClickException("NOT_TOPIC_AUTHORIZATION_FAILEDX")) is None


def test_a_refused_section_becomes_a_note_and_other_errors_pass():
    note = or_not_authorized("describe the configs of topic a", fails(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    assert note == NotAuthorized("describe the configs of topic a", "TOPIC_AUTHORIZATION_FAILED")
    assert str(note) == "not authorized to describe the configs of topic a (TOPIC_AUTHORIZATION_FAILED)"
    assert or_not_authorized("x", lambda: [1]) == [1]
    with pytest.raises(click.ClickException):
        or_not_authorized("x", fails(ErrorCode.REQUEST_TIMED_OUT))


def test_refused_partitions():
    errors = {("a", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED, ("a", 1): ErrorCode.LEADER_NOT_AVAILABLE,
              ("b", 0): int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
    assert refused(errors) == [("a", 0), ("b", 0)]
