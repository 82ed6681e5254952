"""A gRPC proxy between Terraform and a shared provider process that replays the provider's costly pure answers.

Every provider instance Terraform opens (several per command) asks for the schema and has the provider block
validated. The AWS provider (SDKv2) validates a provider block by first checking the schema of every one of its
thousands of resources (InternalValidate): about 3 CPU-seconds, eight times per apply, plan and destroy of the
emulator stack, most of the CPU the acceptance suite spends in the provider. These answers depend on nothing but
the request and the provider process, so the proxy asks once and replays the bytes. Everything else is forwarded
as raw bytes by method name, so no .proto is needed."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

CACHED_METHODS = frozenset(
    {
        "/tfplugin5.Provider/GetSchema",
        "/tfplugin5.Provider/GetMetadata",
        "/tfplugin5.Provider/PrepareProviderConfig",
        "/tfplugin6.Provider/GetProviderSchema",
        "/tfplugin6.Provider/GetMetadata",
        "/tfplugin6.Provider/ValidateProviderConfig",
    }
)
"""Answers that are a function of the request bytes for one provider process: its schema, its metadata, and the
validation of a provider block (defaults from the process's environment included, which is why a cache belongs
to one process)."""

UNSERVED_METHODS = frozenset({"/plugin.GRPCStdio/StreamStdio", "/plugin.GRPCBroker/StartStream"})
"""go-plugin's long-lived streams, opened on every connection. A provider in debug mode sends nothing on them and
Terraform never closes a reattached provider's connection, so forwarding them would hold a thread per stream for
the whole command. go-plugin treats UNIMPLEMENTED as a plugin without them (stdio and broker unavailable)."""

SHUTDOWN_METHOD = "/plugin.GRPCController/Shutdown"
"""Acknowledged, not forwarded: the shared provider outlives each Terraform command."""

UNLIMITED_MESSAGES = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
"""The AWS provider's schema is larger than gRPC's default 4 MB limit."""

WORKERS = 32
"""Concurrent calls served: Terraform walks ten resources at a time per command, and only unary calls take a
thread."""

NO_DEADLINE = 1e9
"""Seconds of remaining time from which a call counts as having no deadline (about 30 years)."""


class CachingProviderProxy:
    """Serves on a unix socket what the upstream provider serves, answering CACHED_METHODS from memory.

    Every other call is forwarded, an upstream error reaching Terraform with its code. Any method not named here
    is taken as unary, as every tfplugin5 and tfplugin6 method Terraform 1.11 calls is."""

    def __init__(self, upstream_address: str) -> None:
        self.upstream_address = upstream_address
        self.answers: dict[tuple[str, bytes], bytes] = {}
        self.hits = 0
        self.misses = 0
        self.calls: dict[str, int] = {}
        """Calls received by method, the unserved and the cached included: what Terraform asks of a provider."""
        self._locks: dict[tuple[str, bytes], threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._directory = Path(tempfile.mkdtemp(prefix="tf-provider-proxy-"))
        self.socket_path = self._directory / "provider.sock"
        self._channel = grpc.insecure_channel(upstream_address, options=UNLIMITED_MESSAGES)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=WORKERS), options=UNLIMITED_MESSAGES)
        self._server.add_generic_rpc_handlers([_ForwardingHandler(self)])
        self._server.add_insecure_port(f"unix:{self.socket_path}")
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)
        self._channel.close()
        self.socket_path.unlink(missing_ok=True)
        self._directory.rmdir()

    def count(self, method: str) -> None:
        with self._locks_lock:
            self.calls[method] = self.calls.get(method, 0) + 1

    def unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        self.count(method)
        if method == SHUTDOWN_METHOD:
            return b""
        if method not in CACHED_METHODS:
            return self._forward(method, request, context)
        return self._cached(method, request, context)

    def _cached(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        """A lock per request: the instances of one command ask at the same time, and one upstream answer each is
        what the proxy is for. An error is not cached."""
        key = (method, request)
        with self._locks_lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            answer = self.answers.get(key)
            if answer is not None:
                self.hits += 1
                return answer
            self.misses += 1
            answer = self._forward(method, request, context)
            self.answers[key] = answer
            return answer

    def _forward(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        """A dead upstream is UNAVAILABLE at once (no wait for ready), so Terraform fails instead of hanging."""
        try:
            return self._channel.unary_unary(method)(request, timeout=_deadline_of(context))
        except grpc.RpcError as error:
            context.abort(error.code(), error.details() or "")  # raises


class _ForwardingHandler(grpc.GenericRpcHandler):
    """Routes every method by name; grpc passes bytes through when a handler has no (de)serializers."""

    def __init__(self, proxy: CachingProviderProxy) -> None:
        self._proxy = proxy

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method  # type: ignore[attr-defined]
        if method in UNSERVED_METHODS:
            self._proxy.count(method)
            return None  # grpc answers UNIMPLEMENTED
        forward: Callable[[bytes, grpc.ServicerContext], bytes] = lambda request, context: self._proxy.unary(  # noqa: E731
            method, request, context
        )
        return grpc.unary_unary_rpc_method_handler(forward)


def _deadline_of(context: grpc.ServicerContext) -> float | None:
    """The caller's remaining time, None when it set no deadline: grpc then reports the largest int64 of seconds,
    which as a client timeout overflows and expires at once."""
    remaining = context.time_remaining()
    return remaining if remaining < NO_DEADLINE else None
