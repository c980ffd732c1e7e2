"""`eoslog serve` without click when its command line is plain (issue 36: start-up pays only for serving).

Importing click costs `eoslog serve` ~9 ms of CPU before the port opens (click itself, and the datetime,
gettext and textwrap modules it imports), about a fifth of what a bare asyncio server takes to
listen. So the entry point (eoslog/__main__.py) first asks :func:`parse_serve_args` about the arguments
after ``serve``; it answers with the same keyword arguments click's parse would give the command, or None
for anything it does not accept exactly as click would -- ``--help``, an unknown or misspelt option, a
missing value, a value that looks like an option, a bad ``--broker-id`` or ``--log-format`` or
``--log-level``, a path click would refuse, shell completion -- and then click parses as before, so every
message, usage line and exit code stays click's. tests/packaging/test_serve_fast_path.py holds the two
parses equal over a table of command lines and over the command's declared options.

:func:`run_serve` is the command's body, shared by both paths; it reports what the user must fix by
raising :class:`ServeError`, which click prints as ``Error: ...`` with exit code 1 in either case.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# click's program name for the completion variable (_EOSLOG_COMPLETE): when it is set, click completes.
COMPLETE_VAR = "_EOSLOG_COMPLETE"

# The options of `eoslog serve` (cli.py declares them for click), by kind: a text value, a repeatable
# text value, a path (and whether it must exist, may be a directory), an integer, a choice, a flag.
TEXT = {"--listen": "listen", "--advertised-listener": "advertised_listener", "--zookeeper": "zookeeper",
        "--metrics-listen": "metrics_listen", "--console-listen": "console_listen",
        "--console-command-config": "console_command_config",
        "--schema-registry-listen": "schema_registry_listen"}
MULTIPLE = {"--set": "overrides", "--log-level": "log_levels"}
PATHS = {"--data-dir": ("data_dir", False, True), "--config": ("config_file", True, False),
         "--port-file": ("port_file", False, False)}  # name, must exist, may be a directory
INTEGERS = {"--broker-id": "broker_id"}
CHOICES = {"--log-format": ("log_format", ("text", "json"))}
FLAGS = {"--console-allow-writes": "console_allow_writes"}
DEFAULTS = {"data_dir": None, "listen": None, "advertised_listener": None, "config_file": None, "overrides": (),
            "port_file": None, "broker_id": None, "zookeeper": None, "metrics_listen": None, "console_listen": None,
            "console_allow_writes": False, "console_command_config": None, "schema_registry_listen": None,
            "log_levels": ("info",), "log_format": "text"}
OPTIONS = {**TEXT, **MULTIPLE, **{o: v[0] for o, v in PATHS.items()}, **INTEGERS,
           **{o: v[0] for o, v in CHOICES.items()}, **FLAGS}


class ServeError(Exception):
    """What the user must fix, in one line (docs/operations.md "Common mistakes"): ``Error: <it>``, exit 1."""


def _path(value: str, must_exist: bool, dir_okay: bool) -> Path | None:
    """click.Path(path_type=Path)'s conversion when it succeeds; None where click would refuse the value."""
    try:
        status = os.stat(value)
    except OSError:
        return None if must_exist else Path(value)
    if stat.S_ISDIR(status.st_mode) and not dir_okay:
        return None
    if not os.access(value, os.R_OK):
        return None
    return Path(value)


def parse_serve_args(args: list[str]) -> dict | None:
    """The arguments after ``serve`` -> the command's keyword arguments, exactly as click would pass them,
    or None: let click parse (and report) them."""
    if os.environ.get(COMPLETE_VAR):
        return None
    params = dict(DEFAULTS)
    given: dict[str, list] = {}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        option, equals, value = arg.partition("=")
        if option not in OPTIONS:
            return None  # --help, --, an unknown option, an argument (serve takes none): click's to answer
        if option in FLAGS:
            if equals:
                return None
            params[FLAGS[option]] = True
            continue
        if not equals:
            if position == len(args):
                return None  # the value is missing
            value = args[position]
            position += 1
        if not value or value.startswith("-"):
            return None  # empty, or an option click may read as this one's value: click decides
        if option in TEXT:
            params[TEXT[option]] = value
        elif option in MULTIPLE:
            given.setdefault(MULTIPLE[option], []).append(value)
        elif option in PATHS:
            name, must_exist, dir_okay = PATHS[option]
            path = _path(value, must_exist, dir_okay)
            if path is None:
                return None
            params[name] = path
        elif option in INTEGERS:
            try:
                params[INTEGERS[option]] = int(value)
            except ValueError:
                return None
        else:
            name, choices = CHOICES[option]
            if value not in choices:
                return None
            params[name] = value
    for name, values in given.items():
        params[name] = tuple(values)
    from eoslog.server.logging_setup import parse_levels

    try:
        parse_levels(params["log_levels"])
    except ValueError:
        return None  # click reports it as a bad --log-level, with the usage line
    return params


def run_serve(data_dir, listen, advertised_listener, config_file, overrides, port_file, broker_id, zookeeper,
              metrics_listen, console_listen, console_allow_writes, console_command_config, schema_registry_listen,
              log_levels, log_format) -> None:
    """The body of `eoslog serve`, its logging already configured: the configuration from the options, then
    the broker in the foreground until SIGTERM or SIGINT. Raises ServeError for what the user must fix."""
    from eoslog.log.errors import DataDirectoryError, LogDirectoryLockedError
    from eoslog.security.properties import read_properties
    from eoslog.server.config import BrokerConfig, ConfigError, parse_host_port
    from eoslog.server.listeners import ListenerBindError

    config = BrokerConfig()
    try:
        if config_file is not None:
            config.apply_properties(read_properties(config_file))
        for item in overrides:
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
            config.set_property(name.strip(), value.strip())
        if data_dir is not None:
            config.data_dir = data_dir
            config.originals["log.dirs"] = str(data_dir)
        if broker_id is not None:
            config.set_property("broker.id", str(broker_id))
        if zookeeper is not None:
            config.set_property("zookeeper.connect", zookeeper)
        if listen is not None:
            config.listen_host, config.listen_port = parse_host_port(listen, "--listen")
            config.originals["listeners"] = listen  # the primary listener's address (BrokerConfig.listeners)
        if metrics_listen is not None:
            config.set_property("eoslog.metrics.listen", metrics_listen)
        if console_listen is not None:
            config.set_property("eoslog.console.listen", console_listen)
        if console_allow_writes:
            config.set_property("eoslog.console.allow.writes", "true")
        if console_command_config is not None:
            config.set_property("eoslog.console.command.config", console_command_config)
        if schema_registry_listen is not None:
            config.set_property("eoslog.schema.registry.listen", schema_registry_listen)
        if advertised_listener is not None:
            config.advertised_host, config.advertised_port = parse_host_port(advertised_listener, "--advertised-listener")
        from eoslog.server.run import run

        run(config, port_file)
    except (ListenerBindError, DataDirectoryError, LogDirectoryLockedError) as exc:
        # The common mistakes (docs/operations.md "Common mistakes"): one line that says what and how to
        # fix it, exit code 1, raised before anything is served. (A ListenerBindError is a ConfigError
        # too, for an embedded broker's caller; its line needs no prefix.)
        raise ServeError(str(exc)) from None
    except ConfigError as exc:
        raise ServeError(f"configuration error: {exc}") from None
    except BlockingIOError as exc:
        raise ServeError(str(exc)) from None
    except Exception as exc:
        from eoslog.cluster.zk.errors import ZooKeeperError

        if isinstance(exc, ZooKeeperError):
            raise ServeError(str(exc)) from None
        raise


def serve_without_click(params: dict) -> None:
    """Runs the command from :func:`parse_serve_args`'s answer. Whatever ends it other than a normal return
    (a ServeError, Ctrl-C, a closed pipe, a bug) is handed to click, which reports it as it would have had it
    parsed the command: the same message, exit code or traceback."""
    from eoslog.server.logging_setup import configure_logging, parse_levels

    try:
        root, per_logger = parse_levels(params["log_levels"])
        configure_logging(root, per_logger, params["log_format"])
        run_serve(**params)
    except BaseException as exc:  # click's own handling decides, as if it had parsed the command
        if isinstance(exc, SystemExit):
            raise
        _report_as_click_would(exc)


def _report_as_click_would(exc: BaseException) -> None:
    import click

    def fail() -> None:
        if isinstance(exc, ServeError):
            raise click.ClickException(str(exc)) from None
        raise exc

    click.Command("serve", callback=fail).main([], prog_name="eoslog serve")
