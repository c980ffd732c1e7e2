"""``eoslog schemas``: a schema registry's subjects, versions and schemas from the command line, against
any registry that speaks Confluent's REST API (eoslog's, Confluent's, Karapace).

    eoslog schemas subjects
    eoslog schemas versions orders-value
    eoslog schemas show orders-value [VERSION]
    eoslog schemas register orders-value order.avsc [--type AVRO] [--reference NAME=SUBJECT:VERSION]
    eoslog schemas check orders-value order-v2.avsc          # exit status 1 when incompatible
    eoslog schemas delete orders-value [--version 2] [--permanent]
    eoslog schemas config [orders-value] [--set FULL]

It speaks HTTP itself (the standard library's urllib) rather than through confluent-kafka's
SchemaRegistryClient, because it prints the registry's answers as they are: the client keeps a
compatibility check's messages to itself, and caches what the registry answered before.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import click

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TYPES = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}


class Registry:
    def __init__(self, url: str, user_info: str | None, ca_file: str | None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if user_info:
            self.headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: object = None, **query) -> object:
        query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items() if v not in (None, False)}
        target = self.url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(target, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
                message = f"{answer.get('message')} (error code {answer.get('error_code')})"
            except ValueError:
                message = exc.reason
            raise click.ClickException(f"{method} {path}: HTTP {exc.code}: {message}") from None
        except OSError as exc:
            raise click.ClickException(f"cannot reach the schema registry at {self.url}: {exc}") from None


def subject_path(subject: str) -> str:
    return "/subjects/" + urllib.parse.quote(subject, safe="")


def _schema_body(path: Path, schema_type: str | None, references: tuple[str, ...]) -> dict:
    kind = (schema_type or TYPES.get(path.suffix.lower(), "AVRO")).upper()
    body: dict = {"schema": path.read_text()}
    if kind != "AVRO":
        body["schemaType"] = kind
    if references:
        body["references"] = []
        for reference in references:
            name, _, rest = reference.partition("=")
            subject, _, version = rest.rpartition(":")
            if not (name and subject and version.isdigit()):
                raise click.BadParameter(f"{reference!r}: expected NAME=SUBJECT:VERSION", param_hint="--reference")
            body["references"].append({"name": name, "subject": subject, "version": int(version)})
    return body


@click.group()
@click.option("--url", envvar="EOSLOG_SCHEMA_REGISTRY_URL", default="http://127.0.0.1:8081", show_default=True,
              help="The registry (also $EOSLOG_SCHEMA_REGISTRY_URL).")
@click.option("--user-info", envvar="EOSLOG_SCHEMA_REGISTRY_USER_INFO", default=None, metavar="USER:PASSWORD",
              help="HTTP basic credentials (also $EOSLOG_SCHEMA_REGISTRY_USER_INFO).")
@click.option("--ca-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The CA of the registry's HTTPS certificate (default: the system's).")
@click.pass_context
def schemas_group(ctx, url, user_info, ca_file) -> None:
    """Subjects, versions and schemas of a schema registry (docs/schema-registry.md)."""
    ctx.obj = Registry(url, user_info, ca_file)


@schemas_group.command("subjects")
@click.option("--prefix", default=None, help="Only subjects starting with this.")
@click.option("--deleted", is_flag=True, help="Soft-deleted subjects too.")
@click.pass_obj
def subjects_command(registry: Registry, prefix, deleted) -> None:
    """The subjects, one a line."""
    for subject in registry.call("GET", "/subjects", subjectPrefix=prefix, deleted=deleted):
        click.echo(subject)


@schemas_group.command("versions")
@click.argument("subject")
@click.option("--deleted", is_flag=True, help="Soft-deleted versions too.")
@click.pass_obj
def versions_command(registry: Registry, subject, deleted) -> None:
    """A subject's versions, one a line."""
    for version in registry.call("GET", subject_path(subject) + "/versions", deleted=deleted):
        click.echo(version)


@schemas_group.command("show")
@click.argument("subject")
@click.argument("version", default="latest")
@click.pass_obj
def show_command(registry: Registry, subject, version) -> None:
    """A version of a subject (default the latest) as the registry answers it: JSON."""
    click.echo(json.dumps(registry.call("GET", f"{subject_path(subject)}/versions/{version}"), indent=2))


_schema_options = [
    click.argument("subject"),
    click.argument("schema_file", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
    click.option("--type", "schema_type", type=click.Choice(["AVRO", "JSON", "PROTOBUF"], case_sensitive=False),
                 default=None, help="Default: from the file's suffix (.avsc, .json, .proto), else AVRO."),
    click.option("--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION",
                 help="A schema this one references; repeatable."),
    click.option("--normalize", is_flag=True, help="Compare and keep the schema in its normalized form."),
]


def schema_options(command):
    for option in reversed(_schema_options):
        command = option(command)
    return command


@schemas_group.command("register")
@schema_options
@click.pass_obj
def register_command(registry: Registry, subject, schema_file, schema_type, references, normalize) -> None:
    """Register a schema under a subject; prints its id (the same schema again: the same id)."""
    body = _schema_body(schema_file, schema_type, references)
    answer = registry.call("POST", subject_path(subject) + "/versions", body, normalize=normalize)
    click.echo(answer["id"])


@schemas_group.command("check")
@schema_options
@click.option("--version", default="latest", show_default=True, help="The version to check against; 'all' for "
              "every version the subject's level names.")
@click.pass_obj
def check_command(registry: Registry, subject, schema_file, schema_type, references, normalize, version) -> None:
    """Whether a schema could be registered under a subject, without registering it. Exit status 1 when
    it could not, with what breaks."""
    body = _schema_body(schema_file, schema_type, references)
    path = f"/compatibility{subject_path(subject)}/versions" + ("" if version == "all" else f"/{version}")
    answer = registry.call("POST", path, body, normalize=normalize, verbose=True)
    if answer.get("is_compatible"):
        click.echo("compatible")
        return
    click.echo("incompatible:")
    for message in answer.get("messages") or ():
        click.echo(f"  {message}")
    raise SystemExit(1)


@schemas_group.command("delete")
@click.argument("subject")
@click.option("--version", default=None, help="Only this version (a number or latest).")
@click.option("--permanent", is_flag=True, help="Hard delete (what was soft-deleted before).")
@click.pass_obj
def delete_command(registry: Registry, subject, version, permanent) -> None:
    """Soft-delete a subject or one of its versions; --permanent hard-deletes what was soft-deleted."""
    path = subject_path(subject) + (f"/versions/{version}" if version else "")
    answer = registry.call("DELETE", path, permanent=permanent)
    deleted = answer if isinstance(answer, list) else [answer]
    click.echo(f"{'permanently ' if permanent else ''}deleted {subject} version(s) {', '.join(map(str, deleted))}")


@schemas_group.command("config")
@click.argument("subject", required=False)
@click.option("--set", "level", default=None, metavar="LEVEL", help="Set the compatibility level: NONE, BACKWARD, "
              "BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL or FULL_TRANSITIVE.")
@click.pass_obj
def config_command(registry: Registry, subject, level) -> None:
    """The compatibility level of a subject (with the global one as its default), or the global one."""
    path = "/config" + (f"/{urllib.parse.quote(subject, safe='')}" if subject else "")
    if level is not None:
        answer = registry.call("PUT", path, {"compatibility": level.upper()})
        click.echo(answer["compatibility"])
        return
    answer = registry.call("GET", path, defaultToGlobal=True if subject else None)
    click.echo(answer["compatibilityLevel"])
