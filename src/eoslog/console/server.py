"""uvicorn serving the console on a socket bound here, so that ``--listen HOST:0`` can pick a free port
and the bound port is known (``--port-file``, tests) before the first request."""

from __future__ import annotations

import socket
import threading

import uvicorn


def bind(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    return sock


class ConsoleServer:
    """The app on a bound socket: ``run()`` in the foreground (the CLI) or ``start()``/``stop()`` on a thread."""

    def __init__(self, app, listen: str = "127.0.0.1:0", log_level: str = "warning") -> None:
        self.sock = bind(listen)
        self.port = self.sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = self.sock.getsockname()[0]
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def run(self) -> None:
        self._server.run(sockets=[self.sock])

    def start(self) -> ConsoleServer:
        self._thread = threading.Thread(target=self.run, name="eoslog-console", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.sock.close()
