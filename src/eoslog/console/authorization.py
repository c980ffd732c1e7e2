"""What the console shows when its principal (``--command-config``) may not see something.

Listings are already scoped by the broker: Metadata leaves out the topics the principal may not Describe,
ListGroups the groups, ListTransactions and ListTransactionGroups the transactional ids. What the broker
refuses instead (DescribeConfigs without DescribeConfigs on the topic, DescribeProducers and Fetch without
Read, a group or topic named in the address that the principal may not Describe) becomes a short note,
for one section of a page (:func:`or_not_authorized`) or for the whole page (app.py), never an error page.

The admin tools (``eoslog.tools``) report a broker's refusal as a ``click.ClickException`` naming the
error code; :func:`refusal` tells an authorization failure by that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import click

from eoslog.protocol.errors import ErrorCode

AUTHORIZATION_FAILURES = frozenset(code for code in ErrorCode if code.name.endswith("_AUTHORIZATION_FAILED"))
_NAMES = re.compile(r"\b(" + "|".join(sorted(code.name for code in AUTHORIZATION_FAILURES)) + r")\b")


@dataclass(frozen=True)
class NotAuthorized:
    """A section withheld from the console's principal: the page shows this note in its place."""

    what: str  # what the principal may not do, e.g. "describe the configs of topic a"
    error: str  # the broker's answer, e.g. TOPIC_AUTHORIZATION_FAILED

    def __str__(self) -> str:
        return f"not authorized to {self.what} ({self.error})"


class PageNotAuthorized(Exception):
    """The request a whole page rests on was refused for lack of rights (app.py renders a note)."""

    def __init__(self, detail: str, error: str, refused_by: str = "the broker") -> None:
        super().__init__(detail)
        self.detail, self.error, self.refused_by = detail, error, refused_by


def refusal(exc: click.ClickException) -> str | None:
    """The authorization failure an admin tool's error names, or None for any other error."""
    found = _NAMES.search(exc.format_message())
    return found.group(1) if found else None


def or_not_authorized(what: str, function, *args):
    """``function(*args)``, or :class:`NotAuthorized` when the broker refused it for lack of rights."""
    try:
        return function(*args)
    except click.ClickException as exc:
        error = refusal(exc)
        if error is None:
            raise
        return NotAuthorized(what, error)


def refused(errors: dict) -> list:
    """The partitions of an errors map (partition -> error code, tools/leader_requests.py) refused for
    lack of rights."""
    return sorted(tp for tp, code in errors.items() if code in AUTHORIZATION_FAILURES)
