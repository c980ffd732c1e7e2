"""A real PostgreSQL server (Debian's ``postgresql`` package) for tests and examples.

One throw-away cluster in a temporary directory: ``initdb`` with trust authentication, then ``postgres``
listening on 127.0.0.1 on a free port (and on a unix socket inside the directory, never in
/var/run/postgresql), waited for with a deadline, stopped and removed afterwards.

    with PostgresServer() as server:
        dsn = server.create_database("orders")   # "host=127.0.0.1 port=... user=postgres dbname=orders"

initdb and postgres refuse to run as root. Tests here run as root, so the server then runs as Debian's
``postgres`` system user (created by the package) in a directory given to that user; as anyone else it
runs as the caller. ``fsync=off``: a test's database need not survive a power cut, and the crash tests
kill clients, not the server.

psycopg (the ``test`` extra) is imported only when a server is started: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Self

from eoslog.tools.local.process import free_port

SUPERUSER = "postgres"
SYSTEM_USER = "postgres"  # Debian's package creates it; used only when we run as root


class PostgresUnavailable(RuntimeError):
    """Debian's postgresql package or psycopg is missing, or the server did not become ready in time."""


def find_bindir() -> Path:
    """Debian installs each major version under /usr/lib/postgresql/<major>/bin and puts none of the server
    programs on PATH; take the newest, or a ``postgres`` on PATH elsewhere."""
    versions = sorted((path for path in glob.glob("/usr/lib/postgresql/*/bin/postgres")
                       if Path(path).parts[-3].isdigit()), key=lambda path: int(Path(path).parts[-3]))
    found = versions[-1] if versions else shutil.which("postgres")
    if not found or not shutil.which("initdb", path=str(Path(found).parent)):
        raise PostgresUnavailable("PostgreSQL server programs not found (Debian's postgresql package); "
                                  "make test installs it")
    return Path(found).parent


class PostgresServer:
    """One postgres process and its cluster directory. Owns both: :meth:`stop` ends the server and removes
    the directory. Not thread-safe; one test (or one module's fixture) drives it."""

    def __init__(self, startup_timeout: float = 30.0):
        self.startup_timeout = startup_timeout
        self.bindir = find_bindir()
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.directory: Path | None = None
        # Root may not run the server: hand it to the system user (subprocess's user=/group=).
        self._as = {}
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                raise PostgresUnavailable(f"running as root and there is no {SYSTEM_USER!r} user to run "
                                          "PostgreSQL as (Debian's postgresql package creates it)") from None
            self._as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={database} connect_timeout=5"

    def start(self) -> Self:
        # mkdtemp rather than pytest's tmp_path: pytest makes its directories 0700 for root, which the
        # postgres user could not enter.
        self.directory = Path(tempfile.mkdtemp(prefix="eoslog-postgres-"))
        if self._as:
            os.chown(self.directory, self._as["user"], self._as["group"])
        data = self.directory / "data"
        initdb = subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "--no-sync",
             "-E", "UTF8", "--locale=C"],
            check=False, capture_output=True, text=True, timeout=120, cwd=self.directory, **self._as)
        if initdb.returncode != 0:
            raise PostgresUnavailable(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}\n{initdb.stderr}")
        log_path = self.directory / "postgres.log"
        with open(log_path, "ab") as log:
            if self._as:
                os.fchown(log.fileno(), self._as["user"], self._as["group"])
            self.process = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.directory}",
                 "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
                 "-c", "max_connections=50", "-c", "shared_buffers=32MB"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.directory,
                start_new_session=True, **self._as)
        # Never outlive the test run: killed when this object is collected or the interpreter exits.
        weakref.finalize(self, _kill_quietly, self.process)
        self.wait_ready()
        return self

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        import psycopg  # the test extra

        try:
            with psycopg.connect(self.dsn, connect_timeout=2) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False  # not listening yet, or "the database system is starting up"

    def wait_ready(self) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise PostgresUnavailable("psycopg is missing: pip install 'eoslog[test]'") from None
        deadline = time.monotonic() + self.startup_timeout
        while not self.ready():
            if not self.is_running:
                raise PostgresUnavailable(f"postgres exited ({self.process.returncode}); log:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"postgres not ready in {self.startup_timeout} s; log:\n{self.log_tail()}")
            time.sleep(0.05)

    def create_database(self, name: str) -> str:
        """A new, empty database; its DSN (libpq key=value form, as psycopg.connect takes it)."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as connection:  # CREATE DATABASE refuses a transaction
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.dsn_for(name)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join((self.directory / "postgres.log").read_text(errors="replace").splitlines()[-lines:])
        except (OSError, TypeError):
            return "(no log)"

    def stop(self, timeout: float = 15.0) -> None:
        """Fast shutdown (SIGINT: sessions are ended, no waiting for clients), SIGKILL if it hangs; then
        the directory goes."""
        if self.is_running:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                # The backends notice their postmaster's death and exit on their own.
                self.process.kill()
                self.process.wait(30)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def _kill_quietly(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        if process.poll() is None:
            process.kill()
