"""Request dispatch: frames in, handler calls, encoded responses out.

Exceptions become wire error codes in one place, :func:`eoslog.protocol.error_mapping.error_code_for`: handlers
let them reach the dispatcher, which answers with the API's error response, or call it themselves for
a per-partition outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eoslog import api
from eoslog.api.context import BrokerServices, RequestContext
from eoslog.api.errors import CloseConnection
from eoslog.log.eager_future import mapped
from eoslog.protocol.error_mapping import error_code_for
from eoslog.protocol.errors import InvalidRequest, UnknownApiKey, UnsupportedVersion

if TYPE_CHECKING:
    from eoslog.server.network import KafkaConnection
    from eoslog.server.request_metrics import RequestMetrics

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
METADATA_KEY = 3
SASL_KEYS = (17, 36)  # SaslHandshake, SaslAuthenticate


# The codec (eoslog.protocol.codec: the specs and their generated decoders, ~10 ms to import) and its message
# base class, set by load_codec(): the broker calls it once its port is open (Broker.start's warm-up), so
# that opening the port does not wait for it; a frame that comes first loads it itself.
codec: Any = None
Struct: Any = None


def load_codec() -> None:
    global codec, Struct
    from eoslog.protocol import codec as loaded
    from eoslog.protocol.messages import Struct as struct

    codec, Struct = loaded, struct


class Dispatcher:
    def __init__(self) -> None:
        # What every request's context carries (api/context.py), set once by the broker before it serves.
        self.services: BrokerServices | None = None
        self.handlers = api.HANDLERS
        self.connections: set[KafkaConnection] = set()
        # server/request_metrics.py when the metrics endpoint is on (server/metrics.py); None costs the
        # request path one attribute check.
        self.request_metrics: RequestMetrics | None = None
        # Told of each connection that closed (the broker ends its share session: share/manager.py).
        self.close_listeners: list[Callable[[KafkaConnection], None]] = []

    def warm_up(self) -> None:
        """Loads what the first requests need and opening the port did not wait for: the codec, ApiVersions'
        and Metadata's handlers with their message classes, and the partitions' code (the Log, producer
        state, record batches) that a broker with a new data directory has not loaded yet. The broker calls
        it on the loop's first turn after its port is announced (Broker.start); a request that comes sooner
        loads what it needs itself."""
        if codec is None:
            load_codec()
        for api_key in (API_VERSIONS_KEY, METADATA_KEY):
            self.handlers.get(api_key)
        import eoslog.cluster.partition  # noqa: F401 - loaded, not used here

    def connection_opened(self, connection: KafkaConnection) -> None:
        self.connections.add(connection)

    def connection_closed(self, connection: KafkaConnection) -> None:
        self.connections.discard(connection)
        for listener in self.close_listeners:
            listener(connection)

    def dispatch(self, connection: KafkaConnection, frame: bytes) -> list[Any] | asyncio.Future | None:
        """Returns the encoded response, a future of it, or None when the request has no response."""
        if connection.sasl is not None and connection.sasl.expects_raw_token:
            from eoslog.api.sasl_handshake import raw_token

            return raw_token(connection, frame)  # not a Kafka request: a bare SASL token (v0 handshake)
        if codec is None:
            load_codec()
        try:
            header, request = codec.decode_request(frame)
        except UnsupportedVersion as exc:
            if exc.api_key == API_VERSIONS_KEY and exc.header is not None:
                # Kafka's rule: an ApiVersions request we cannot parse gets a v0-layout error that
                # carries our supported ranges, so the client can retry at a version we speak.
                return [codec.encode_api_versions_fallback(exc.header.correlation_id, api.supported_versions())]
            log.warning("closing connection from %s: %s", connection.peer, exc)
            raise CloseConnection() from exc
        except (UnknownApiKey, InvalidRequest) as exc:
            log.warning("closing connection from %s: unparsable request: %s", connection.peer, exc)
            log.debug("unparsable frame: %s", frame[:512].hex())
            raise CloseConnection() from exc

        if connection.sasl is not None and not self._sasl_allows(connection, header.api_key):
            raise CloseConnection()

        handler = self.handlers.get(header.api_key)
        if handler is None or not handler.MIN_VERSION <= header.api_version <= handler.MAX_VERSION:
            if header.api_key == API_VERSIONS_KEY:
                return [codec.encode_api_versions_fallback(header.correlation_id, api.supported_versions())]
            log.warning(
                "closing connection from %s: api key %d version %d is not served",
                connection.peer, header.api_key, header.api_version,
            )
            raise CloseConnection()

        context = RequestContext(self.services, connection, header)
        metrics = self.request_metrics
        started = time.perf_counter() if metrics is not None else 0.0
        try:
            result = handler.handle(context, request)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error response or a hang-up
            return self._error_response(handler, context, request, exc, started)
        # A future (acks=all Produce) or a coroutine answers later. A message, the common answer, is never
        # awaitable: the checks before inspect's ABC check keep it off that path.
        if isinstance(result, asyncio.Future) or (
                result is not None and not isinstance(result, Struct) and inspect.isawaitable(result)):
            return self._chain(handler, context, request, result, started)
        if metrics is not None:
            metrics.finished(header.api_key, time.perf_counter() - started, result)
        if result is None:
            return None
        return self._encode(context, result)

    @staticmethod
    def _sasl_allows(connection: KafkaConnection, api_key: int) -> bool:
        """Before authentication only the exchange itself; after a session's end only re-authentication
        (security/sasl.py has the table). Kafka hangs up on anything else: there is no one to answer."""
        session = connection.sasl
        if not session.allows(api_key):
            log.warning("closing connection from %s: api key %d is not valid while SASL is %s",
                        connection.peer, api_key, session.state.value)
            return False
        expires = connection.session_expires_at
        if expires is not None and api_key not in SASL_KEYS and time.monotonic() > expires:
            log.info("closing connection from %s: its SASL session ended (connections.max.reauth.ms) and "
                     "it did not re-authenticate", connection.peer)
            return False
        return True

    @staticmethod
    def _encode(context: RequestContext, response: Any) -> list[Any]:
        try:
            return codec.encode_response(context.header, response)
        except Exception as exc:
            log.error("cannot encode the response to %s from %s; closing the connection",
                      type(response).__name__, context.connection.peer, exc_info=exc)
            raise CloseConnection() from exc

    def _chain(self, handler: Any, context: RequestContext, request: Any, answer: Any,
               started: float) -> asyncio.Future:
        """The encoded response, or the error response, of a handler that answers later: a future (Produce
        waiting for acks=all: encoded within the turn that settles it) or a coroutine, which runs as its own
        task. Callbacks instead of a task of ours, which costs the loop less per request and leaves no
        coroutine of the handler's unstarted (eager_future.mapped). Cancelling the returned future (the
        connection closed) cancels the handler's."""

        def encode(result: Any) -> list[Any] | None:
            if self.request_metrics is not None:
                self.request_metrics.finished(context.header.api_key, time.perf_counter() - started, result)
            return None if result is None else self._encode(context, result)

        return mapped(answer, encode, lambda exc: self._error_response(handler, context, request, exc, started))

    def _error_response(self, handler: Any, context: RequestContext, request: Any, exc: Exception,
                        started: float) -> list[Any]:
        code = error_code_for(exc)
        header = context.header
        log.debug("refused %s v%d from %s (client %r, %s) with %s: %s", type(request).__name__, header.api_version,
                  context.connection.peer, header.client_id, context.connection.principal, code.name, exc)
        if self.request_metrics is not None:
            self.request_metrics.error(header.api_key, code)
            self.request_metrics.finished(header.api_key, time.perf_counter() - started, None)
        build = getattr(handler, "error_response", None)
        if build is None:
            log.warning(
                "closing connection from %s: %s failed with %s and the API has no error response",
                context.connection.peer, type(request).__name__, code.name,
            )
            raise CloseConnection() from exc
        return self._encode(context, build(context, request, code))
