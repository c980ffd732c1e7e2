"""`eoslog users ...`: SCRAM users, the way `kafka-configs.sh --entity-type users` manages them.

    eoslog users add NAME [--mechanism SCRAM-SHA-512] [--iterations 8192] [--password-file F]
    eoslog users list
    eoslog users delete NAME [--mechanism SCRAM-SHA-512]

Each takes either ``--bootstrap-server HOST:PORT`` (over the Kafka protocol: Describe/AlterUserScramCredentials,
with ``--command-config`` for a secured listener; works against Kafka too) or ``--data-dir DIR`` (the
credential file itself, only while no broker runs on that directory: how the first administrator is
created before SASL listeners open). Without ``--password-file`` the password is prompted for; it is
salted and iterated here, and only the salted form leaves this process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import click

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.scram import (
    DEFAULT_ITERATIONS, MECHANISM_BY_TYPE, MECHANISMS, SALT_BYTES, CredentialError, ScramCredential, salted_password,
)

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def _target(function):
    function = click.option("--bootstrap-server", "-b", "bootstrap", default=None, metavar="HOST:PORT",
                            help="A broker to ask over the Kafka protocol.")(function)
    function = click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                            default=None, help="Client properties for a secured listener (TLS, SASL).")(function)
    return click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Edit the credential file directly (no broker may be running on it).")(function)


@click.group("users")
def users_group() -> None:
    """SCRAM users (SASL/SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN check against them)."""


@users_group.command("add")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(list(MECHANISMS)),
              help="Repeatable; default both SCRAM mechanisms.")
@click.option("--iterations", type=int, default=DEFAULT_ITERATIONS, show_default=True)
@click.option("--password-file", type=click.File("r"), default=None,
              help="Read the password from this file's first line ('-': standard input).")
@_target
def add_user(name, mechanisms, iterations, password_file, bootstrap, command_config, data_dir):
    """Create NAME, or replace its password."""
    password = password_file.readline().rstrip("\r\n") if password_file else click.prompt(
        f"password for {name}", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.ClickException("the password is empty")
    mechanisms = mechanisms or tuple(MECHANISMS)
    try:
        credentials = [(m, os.urandom(SALT_BYTES)) for m in mechanisms]
        salted = [(m, salt, salted_password(m, password, salt, iterations)) for m, salt in credentials]
        built = [ScramCredential.from_salted_password(m, salt, sp, iterations) for m, salt, sp in salted]
    except CredentialError as exc:
        raise click.ClickException(str(exc)) from exc
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            for credential in built:
                store.upsert(name, credential)
            store.save()
    else:
        request = messages.AlterUserScramCredentialsRequest(upsertions=[
            messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=name, mechanism=MECHANISMS[m][1], iterations=iterations, salt=salt, salted_password=sp)
            for m, salt, sp in salted])
        with _online(bootstrap, command_config) as brokers:
            _alter(brokers, request)
    click.echo(f"user {name}: {', '.join(mechanisms)} set ({iterations} iterations)")


@users_group.command("delete")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(list(MECHANISMS)),
              help="Repeatable; default every mechanism the user has.")
@_target
def delete_user(name, mechanisms, bootstrap, command_config, data_dir):
    """Remove NAME's credentials (it can no longer authenticate)."""
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            chosen = mechanisms or tuple(store.credentials_of(name))
            if not chosen or not all(store.delete(name, m) for m in chosen):
                raise click.ClickException(f"user {name} has no such credential")
            store.save()
    else:
        with _online(bootstrap, command_config) as brokers:
            chosen = mechanisms or tuple(m for m, _ in _describe(brokers, [name]).get(name, []))
            if not chosen:
                raise click.ClickException(f"user {name} has no SCRAM credential")
            _alter(brokers, messages.AlterUserScramCredentialsRequest(deletions=[
                messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=name, mechanism=MECHANISMS[m][1])
                for m in chosen]))
    click.echo(f"user {name}: {', '.join(chosen)} removed")


@users_group.command("list")
@_target
def list_users(bootstrap, command_config, data_dir):
    """Every user with its mechanisms and iterations (never a key)."""
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            users = {u: [(m, c.iterations) for m, c in sorted(store.credentials_of(u).items())] for u in store.users()}
    else:
        with _online(bootstrap, command_config) as brokers:
            users = _describe(brokers, None)
    if not users:
        click.echo("no users")
    for user, credentials in sorted(users.items()):
        click.echo(f"{user}\t" + ", ".join(f"{m} (iterations={i})" for m, i in credentials))


@contextlib.contextmanager
def _offline_store(data_dir: Path):
    from eoslog.log.manager import LOCK_FILE
    from eoslog.security.credentials import CredentialStore

    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise click.ClickException(f"a broker is running on {data_dir}: change users through it with "
                                       "--bootstrap-server") from None
        try:
            yield CredentialStore.open(data_dir)
        except CredentialError as exc:
            raise click.ClickException(str(exc)) from exc
    finally:
        os.close(fd)


def _online(bootstrap, command_config):
    from eoslog.tools.brokers import Brokers
    from eoslog.security.client import ClientSecurity, ClientSecurityError

    if bootstrap is None:
        raise click.UsageError("give --bootstrap-server HOST:PORT (a running broker) or --data-dir DIR (a stopped one)")
    try:
        security = ClientSecurity.from_file(command_config) if command_config else None
    except (ClientSecurityError, OSError) as exc:
        raise click.ClickException(f"--command-config: {exc}") from exc
    return Brokers(bootstrap, security=security)


def _alter(brokers, request) -> None:
    response = brokers.call(ALTER_USER_SCRAM_CREDENTIALS, 0, request)
    failed = [f"{r.user}: {ErrorCode(r.error_code).name} {r.error_message or ''}".strip()
              for r in response.results if r.error_code]
    if failed:
        raise click.ClickException("; ".join(failed))


def _describe(brokers, names):
    users = None if names is None else [
        messages.DescribeUserScramCredentialsRequest.UserName(name=n) for n in names]
    response = brokers.call(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, messages.DescribeUserScramCredentialsRequest(users=users))
    if response.error_code:
        raise click.ClickException(f"{ErrorCode(response.error_code).name}: {response.error_message}")
    return {r.user: [(MECHANISM_BY_TYPE.get(i.mechanism, str(i.mechanism)), i.iterations) for i in r.credential_infos]
            for r in response.results if not r.error_code}
