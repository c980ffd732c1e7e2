"""What the schema pages show, read from a schema registry through its REST API (Confluent's v1, which
eoslog's registry, Confluent's and Karapace serve alike). Every function here blocks on HTTP: the routes
(schema_routes.py) run them in worker threads.

Why the REST API rather than the ``_schemas`` topic: the console is a client of the cluster that works
against any Kafka-compatible one, and the registry beside it may be Confluent's or Karapace; the REST API
is what they share. The registry also answers with its own view: its compatibility level per subject with
the global one as default, soft deletes applied, and, with authorization on, only what the console's
principal may read (the registry maps subjects onto topics itself, schema_registry/authorization.py), so
the console applies no second copy of that mapping. Reading ``_schemas`` instead would need Read on an
internal topic, a reader per console, and the registry's state code to stay in step with whichever
registry wrote the topic.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException

from eoslog.console.authorization import PageNotAuthorized

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_SCHEMA_TYPE = "AVRO"  # a registry leaves schemaType out for Avro
SUBJECT_NOT_FOUND, VERSION_NOT_FOUND = 40401, 40402


class SchemaRegistryAccess:
    """Where the console reads schemas: a registry's URL with the credentials and CA to reach it. ``url``
    None: no registry configured, and the pages say so. A broker serving both the console and a registry
    sets the URL of its own registry once that one's port is bound (server/console.py)."""

    def __init__(self, url: str | None = None, user_info: str | None = None, ca_file: str | None = None,
                 context: ssl.SSLContext | None = None, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/") if url else None
        self.user_info = user_info
        self.context = context or (ssl.create_default_context(cafile=ca_file) if ca_file else None)
        self.timeout_s = timeout_s

    def get(self, path: str, **query) -> object:
        """The JSON answer to ``GET path``; a refusal or an unreachable registry as the console's pages show
        them: 404 for an unknown subject or version, a note for 401/403, 502 for the rest."""
        query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items() if v not in (None, False)}
        target = self.url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {"Accept": CONTENT_TYPE}
        if self.user_info:
            headers["Authorization"] = "Basic " + base64.b64encode(self.user_info.encode()).decode()
        request = urllib.request.Request(target, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise self._refusal(exc, path) from None
        except (OSError, ValueError) as exc:
            raise HTTPException(502, f"the schema registry at {self.url} did not answer: {exc}") from None

    def _refusal(self, exc: urllib.error.HTTPError, path: str) -> Exception:
        try:
            answer = json.loads(exc.read())
            code, message = answer.get("error_code"), answer.get("message")
        except (ValueError, AttributeError):
            code, message = None, exc.reason
        if exc.code == 401:
            who = f"User:{self.user_info.partition(':')[0]}" if self.user_info else "no credentials"
            return PageNotAuthorized(f"the login ({who}): {message}", "HTTP 401", "the schema registry")
        if exc.code == 403:
            return PageNotAuthorized(f"GET {path}: {message} (error code {code})", f"error code {code}",
                                     "the schema registry")
        if code in (SUBJECT_NOT_FOUND, VERSION_NOT_FOUND):
            return HTTPException(404, f"{message} (schema registry at {self.url})")
        return HTTPException(502, f"the schema registry at {self.url} refused GET {path}: HTTP {exc.code}: "
                                  f"{message} (error code {code})")


def user_info_of(security) -> str | None:
    """The console's own principal as the registry's basic credentials: a broker's registry checks them
    against the cluster's SCRAM users, so the schema pages show what that principal may read."""
    if security is None or not security.username or security.password is None:
        return None
    return f"{security.username}:{security.password}"


def subject_path(subject: str) -> str:
    return "/subjects/" + urllib.parse.quote(subject, safe="")


@dataclass
class SubjectRow:
    subject: str
    schema_type: str
    latest_version: int
    versions: int  # live versions; of a soft-deleted subject, the soft-deleted ones
    compatibility: str
    deleted: bool  # soft-deleted: every version is


def subject_rows(registry: SchemaRegistryAccess) -> list[SubjectRow]:
    """Every subject the registry lists (soft-deleted ones too), four requests each: a console page, not
    a scan; a registry of thousands of subjects is `eoslog schemas`' job."""
    live = set(registry.get("/subjects"))
    rows = []
    for subject in registry.get("/subjects", deleted=True):
        path = subject_path(subject)
        try:
            versions = registry.get(path + "/versions", deleted=subject not in live)
            latest = registry.get(f"{path}/versions/{max(versions)}", deleted=True)
            level = registry.get("/config/" + urllib.parse.quote(subject, safe=""), defaultToGlobal=True)
        except HTTPException as exc:
            if exc.status_code == 404:
                continue  # deleted since it was listed (or soft-deleted since: the next load shows it)
            raise
        rows.append(SubjectRow(subject, latest.get("schemaType", DEFAULT_SCHEMA_TYPE), latest["version"],
                               len(versions), level.get("compatibilityLevel", "-"), subject not in live))
    return sorted(rows, key=lambda r: r.subject)


@dataclass
class Version:
    version: int
    id: int
    schema_type: str
    schema: str
    references: list[dict]  # {"name", "subject", "version"}
    deleted: bool


@dataclass
class SubjectView:
    subject: str
    compatibility: str
    versions: list[Version] = field(default_factory=list)  # by version, soft-deleted ones included

    @property
    def deleted(self) -> bool:
        return all(v.deleted for v in self.versions)

    @property
    def latest(self) -> Version:
        """The latest live version, as a serializer's ``latest`` names it (of a soft-deleted subject, its last)."""
        live = [v for v in self.versions if not v.deleted]
        return (live or self.versions)[-1]

    def version(self, number: int) -> Version:
        for v in self.versions:
            if v.version == number:
                return v
        raise HTTPException(404, f"subject {self.subject} has no version {number}"
                                 f" (its versions: {', '.join(str(v.version) for v in self.versions)})")


def subject_view(registry: SchemaRegistryAccess, subject: str) -> SubjectView:
    path = subject_path(subject)
    every = registry.get(path + "/versions", deleted=True)  # 404 for an unknown subject
    try:
        live = set(registry.get(path + "/versions"))
    except HTTPException as exc:
        if exc.status_code != 404:
            raise
        live = set()  # soft-deleted subject
    level = registry.get("/config/" + urllib.parse.quote(subject, safe=""), defaultToGlobal=True)
    view = SubjectView(subject, level.get("compatibilityLevel", "-"))
    for number in sorted(every):
        answer = registry.get(f"{path}/versions/{number}", deleted=True)
        view.versions.append(Version(number, answer["id"], answer.get("schemaType", DEFAULT_SCHEMA_TYPE),
                                     answer["schema"], answer.get("references") or [], number not in live))
    return view
