"""One HTTP/1.1 GET on its own connection, for scraping ``/metrics``: asyncio's transport with h11 reading
the answer, without httpx's request and response models, httpcore's pool or asyncio's stream reader and
writer.

Why its own connection: servers close an idle kept-alive connection after 5 s (uvicorn's default, which
vLLM uses), and the daemon scrapes each server once a tick (5 s), so a kept connection was nearly always
gone by the next scrape and every tick connected anew anyway, through a pool per server. The request says
``Connection: close``: the server closes first, and its side, not ours, holds the closed socket's
``TIME_WAIT`` (thousands of scrapes every few seconds would otherwise hold thousands of our ports)."""

from __future__ import annotations

import asyncio
import ssl
import zlib
from dataclasses import dataclass

import h11
import httpx

_UTF8 = "utf-8"
_UTF8_NAMES = frozenset({"utf-8", "utf8"})
_MAX_BODY = 64 * 1024 * 1024  # a /metrics body is 30–60 KiB; a server that sends more is broken


class GetError(Exception):
    """The GET failed before a whole answer arrived (closed early, not HTTP, a body we cannot read)."""


class ConnectError(GetError):
    """No connection to the server (refused, unreachable, no such host)."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes  # decoded from gzip when the server compressed it

    def text(self) -> str:
        """The body as text, as httpx would give it: decoded with the charset the content type names, else
        UTF-8 (the exposition format's), bad bytes replaced. Any charset but UTF-8 goes through httpx."""
        charset = _UTF8
        for param in self.content_type.split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                charset = value.strip().strip('"').lower()
        if charset in _UTF8_NAMES:
            return self.body.decode("utf-8", errors="replace")
        return httpx.Response(self.status, headers={"content-type": self.content_type}, content=self.body).text


class _Exchange(asyncio.Protocol):
    def __init__(self, request: h11.Request, done: asyncio.Future[Answer]) -> None:
        self._done = done
        self._h11 = h11.Connection(h11.CLIENT)
        self._request = (self._h11.send(request) or b"") + (self._h11.send(h11.EndOfMessage()) or b"")
        self._transport: asyncio.Transport | None = None
        self._status = 0
        self._content_type = ""
        self._encoding = ""
        self._chunks: list[bytes] = []
        self._size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._done.done():
            return
        try:
            self._h11.receive_data(data)
            self._events()
        except h11.RemoteProtocolError as exc:
            self._fail(GetError(f"not HTTP/1.1: {exc}"))

    def eof_received(self) -> bool | None:
        if not self._done.done():
            try:
                self._h11.receive_data(b"")
                self._events()
            except h11.RemoteProtocolError as exc:
                self._fail(GetError(f"connection closed mid-answer: {exc}"))
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            detail = f": {exc}" if exc is not None else ""
            self._done.set_exception(GetError(f"connection closed before the answer ended{detail}"))

    def _events(self) -> None:
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Response):
                self._status = event.status_code
                for name, value in event.headers:
                    if name == b"content-type":
                        self._content_type = value.decode("latin-1")
                    elif name == b"content-encoding":
                        self._encoding = value.decode("latin-1").strip().lower()
            elif isinstance(event, h11.Data):
                self._size += len(event.data)
                if self._size > _MAX_BODY:
                    self._fail(GetError(f"answer over {_MAX_BODY // (1024 * 1024)} MiB"))
                    return
                self._chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._finish()
                return
            elif isinstance(event, h11.ConnectionClosed):
                self._fail(GetError("connection closed before the answer ended"))
                return
            # InformationalResponse (1xx): the final answer follows

    def _finish(self) -> None:
        body = b"".join(self._chunks)
        if self._encoding == "gzip":
            try:
                body = zlib.decompress(body, wbits=16 + zlib.MAX_WBITS)
            except zlib.error as exc:
                self._fail(GetError(f"bad gzip body: {exc}"))
                return
        elif self._encoding not in ("", "identity"):
            self._fail(GetError(f"content-encoding {self._encoding!r} was not asked for"))
            return
        self._done.set_result(Answer(self._status, self._content_type, body))
        self._close()

    def _fail(self, error: GetError) -> None:
        if not self._done.done():
            self._done.set_exception(error)
        self._close()

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()


@dataclass(frozen=True, slots=True)
class Target:
    """Where a GET goes, worked out once per URL."""

    host: str
    port: int
    tls: bool
    request: h11.Request

    @classmethod
    def of(cls, url: str, headers: dict[str, str]) -> Target:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https"):
            raise GetError(f"unsupported scheme {parsed.scheme!r}: use http:// or https://")
        tls = parsed.scheme == "https"
        port = parsed.port or (443 if tls else 80)
        fields = [("Host", parsed.netloc.decode("ascii")), *headers.items(), ("Connection", "close")]
        return cls(parsed.host, port, tls, h11.Request(method="GET", target=parsed.raw_path, headers=fields))


async def get(target: Target, tls: ssl.SSLContext | None = None) -> Answer:
    """The answer to one GET; raises ``GetError`` (the caller bounds the time)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Answer] = loop.create_future()
    context = (tls or ssl.create_default_context()) if target.tls else None
    try:
        transport, _ = await loop.create_connection(
            lambda: _Exchange(target.request, done),
            target.host,
            target.port,
            ssl=context,
            server_hostname=target.host if context is not None else None,
        )
    except OSError as exc:  # named as httpx named it, so a log or an alert reads the same as before
        raise ConnectError(str(exc) or type(exc).__name__) from exc
    try:
        return await done
    finally:
        transport.close()
