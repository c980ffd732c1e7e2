"""Running a broker in the foreground: event loop choice, signals, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from eoslog.server import gc_policy
from eoslog.server.broker import Broker
from eoslog.server.config import BrokerConfig

log = logging.getLogger(__name__)


def tune_allocator() -> None:
    """Keeps request-sized buffers (up to 64 MiB) in glibc's heap instead of fresh mmap'd pages.

    Each large Produce request is received into its own bytearray (server/framing.py). With glibc's
    defaults every such buffer is mmap'd, zero-filled page by page on first touch, and unmapped when
    freed; reusing heap memory instead measured about 2x the produce throughput at 1 KiB records
    (docs/benchmarks.md). Only for the broker's own process: an embedding host keeps its settings.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc: nothing to tune
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 64 * 1024 * 1024)
    libc.mallopt(m_trim_threshold, 256 * 1024 * 1024)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed: ~4x less event-loop cost per request on this machine (research/machine.md)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


async def serve(config: BrokerConfig, port_file: Path | None = None) -> None:
    broker = Broker(config)
    await broker.start()
    if port_file is not None:
        temporary = port_file.with_name(port_file.name + ".tmp")
        temporary.write_text(f"{broker.bound_port}\n")
        os.replace(temporary, port_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda s=signum: (log.info("received %s", signal.Signals(s).name), stop.set()))
    try:
        await stop.wait()
    finally:
        await broker.stop()


def run(config: BrokerConfig, port_file: Path | None = None) -> None:
    tune_allocator()
    gc_policy.tune()
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(serve(config, port_file))
    finally:
        loop.close()
