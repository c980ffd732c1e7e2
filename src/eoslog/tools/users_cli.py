"""`eoslog users ...`: SCRAM users, the way `kafka-configs.sh --entity-type users` manages them.

    eoslog users add NAME [--mechanism SCRAM-SHA-512] [--iterations 8192] [--password-file F]
    eoslog users list
    eoslog users delete NAME [--mechanism SCRAM-SHA-512]

Each takes one of ``--bootstrap-server HOST:PORT`` (over the Kafka protocol: Describe/AlterUserScramCredentials,
with ``--command-config`` for a secured listener; works against Kafka too), ``--zookeeper
HOST:PORT[/CHROOT]`` (a cluster's ``/config/users`` directly, as Kafka's ``kafka-configs --zookeeper``:
how a cluster's first administrator and its brokers' own user are created before any broker runs; the
running brokers pick the change up at once) or ``--data-dir DIR`` (a single node's credential file
itself, only while no broker runs on that directory: its first administrator). Without ``--password-file`` the password is prompted for; it is
salted and iterated here, and only the salted form leaves this process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

import click

from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode
from eoslog.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_BY_TYPE,
    MECHANISMS,
    SALT_BYTES,
    CredentialError,
    ScramCredential,
    salted_password,
)
from eoslog.tools.common import print_table

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def _target(function):
    function = click.option("--bootstrap-server", "--bootstrap", "-b", "bootstrap", default=None, metavar="HOST:PORT",
                            help="A broker to ask over the Kafka protocol.")(function)
    function = click.option("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
                            help="A cluster's ZooKeeper (zookeeper.connect): edit /config/users directly.")(function)
    function = click.option("--command-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                            default=None, help="Client properties for a secured listener (TLS, SASL).")(function)
    return click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help="Edit the credential file directly (no broker may be running on it).")(function)


def _json(function):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of text.")(function)


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
@_json
def add_user(name, mechanisms, iterations, password_file, bootstrap, zookeeper, command_config, data_dir, as_json):
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
    _one_target(bootstrap, zookeeper, data_dir)
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            for credential in built:
                store.upsert(name, credential)
            store.save()
    elif zookeeper is not None:
        from eoslog.security.credentials import altered_config

        changes = {credential.mechanism: credential for credential in built}
        with _zookeeper(zookeeper) as zk:
            zk.alter_user(name, lambda config: altered_config(config, changes))
    else:
        request = messages.AlterUserScramCredentialsRequest(upsertions=[
            messages.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                name=name, mechanism=MECHANISMS[m][1], iterations=iterations, salt=salt, salted_password=sp)
            for m, salt, sp in salted])
        with _online(bootstrap, command_config) as brokers:
            _alter(brokers, request)
    if as_json:
        click.echo(json.dumps({"user": name, "set": list(mechanisms), "iterations": iterations}))
    else:
        click.echo(f"user {name}: {', '.join(mechanisms)} set ({iterations} iterations)")


@users_group.command("delete")
@click.argument("name")
@click.option("--mechanism", "mechanisms", multiple=True, type=click.Choice(list(MECHANISMS)),
              help="Repeatable; default every mechanism the user has.")
@_target
@_json
def delete_user(name, mechanisms, bootstrap, zookeeper, command_config, data_dir, as_json):
    """Remove NAME's credentials (it can no longer authenticate)."""
    _one_target(bootstrap, zookeeper, data_dir)
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            chosen = mechanisms or tuple(store.credentials_of(name))
            if not chosen or not all(store.delete(name, m) for m in chosen):
                raise click.ClickException(f"user {name} has no such credential")
            store.save()
    elif zookeeper is not None:
        from eoslog.security.credentials import altered_config

        with _zookeeper(zookeeper) as zk:
            present = _zookeeper_users(zk).get(name, {})
            chosen = mechanisms or tuple(present)
            if not chosen or not all(m in present for m in chosen):
                raise click.ClickException(f"user {name} has no such credential")
            zk.alter_user(name, lambda config: altered_config(config, dict.fromkeys(chosen)))
    else:
        with _online(bootstrap, command_config) as brokers:
            chosen = mechanisms or tuple(m for m, _ in _describe(brokers, [name]).get(name, []))
            if not chosen:
                raise click.ClickException(f"user {name} has no SCRAM credential")
            _alter(brokers, messages.AlterUserScramCredentialsRequest(deletions=[
                messages.AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=name, mechanism=MECHANISMS[m][1])
                for m in chosen]))
    if as_json:
        click.echo(json.dumps({"user": name, "removed": list(chosen)}))
    else:
        click.echo(f"user {name}: {', '.join(chosen)} removed")


@users_group.command("list")
@_target
@_json
def list_users(bootstrap, zookeeper, command_config, data_dir, as_json):
    """Every user with its mechanisms and iterations (never a key)."""
    _one_target(bootstrap, zookeeper, data_dir)
    if data_dir is not None:
        with _offline_store(data_dir) as store:
            users = {u: [(m, c.iterations) for m, c in sorted(store.credentials_of(u).items())] for u in store.users()}
    elif zookeeper is not None:
        with _zookeeper(zookeeper) as zk:
            users = {u: [(m, c.iterations) for m, c in sorted(credentials.items())]
                     for u, credentials in _zookeeper_users(zk).items() if credentials}
    else:
        with _online(bootstrap, command_config) as brokers:
            users = _describe(brokers, None)
    if as_json:
        click.echo(json.dumps([{"user": user, "credentials": [{"mechanism": m, "iterations": i} for m, i in credentials]}
                               for user, credentials in sorted(users.items())]))
        return
    if not users:
        click.echo("none")
        return
    print_table([[user, ", ".join(f"{m} ({i} iterations)" for m, i in credentials)]
                 for user, credentials in sorted(users.items())], ["USER", "MECHANISMS"])


def _one_target(bootstrap, zookeeper, data_dir) -> None:
    if sum(target is not None for target in (bootstrap, zookeeper, data_dir)) > 1:
        raise click.UsageError("give one of --bootstrap, --zookeeper and --data-dir")


@contextlib.contextmanager
def _zookeeper(connect: str):
    from eoslog.cluster.zk.client import ZooKeeper, ZooKeeperError

    zk = ZooKeeper(connect, session_timeout_ms=10_000)
    try:
        zk.start()
    except ZooKeeperError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        yield zk
    finally:
        zk.stop()


def _zookeeper_users(zk) -> dict:
    from eoslog.security.credentials import decode_user

    try:
        return {user: decode_user(config) for user, config in zk.read_users().items()}
    except CredentialError as exc:
        raise click.ClickException(str(exc)) from exc


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
    from eoslog.security.client import ClientSecurity, ClientSecurityError
    from eoslog.tools.brokers import Brokers

    if bootstrap is None:
        raise click.UsageError("give --bootstrap-server HOST:PORT (a running broker), --zookeeper HOST:PORT[/CHROOT] (a "
                               "cluster's ZooKeeper) or --data-dir DIR (a stopped single node)")
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
