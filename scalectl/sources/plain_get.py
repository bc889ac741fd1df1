"""One HTTP/1.1 GET on its own connection, for scraping ``/metrics``: asyncio's transport and a reader of
just the answer to our GET, without httpx's request and response models, httpcore's pool, asyncio's stream
reader and writer, or h11's state machine (``read_answer`` reads what h11 reads; tests hold them equal).

Why its own connection: servers close an idle kept-alive connection after 5 s (uvicorn's default, which
vLLM uses), and the daemon scrapes each server once a tick (5 s), so a kept connection was nearly always
gone by the next scrape and every tick connected anew anyway, through a pool per server. The request says
``Connection: close``, so an answer without a length ends where the server closes."""

from __future__ import annotations

import asyncio
import re
import ssl
import zlib
from dataclasses import dataclass

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
    """Sends the request, gathers the answer until the server closes (it was asked to), or until the body
    a Content-Length announced is whole, then reads it with ``read_answer``."""

    def __init__(self, request: bytes, done: asyncio.Future[Answer]) -> None:
        self._request = request
        self._done = done
        self._transport: asyncio.Transport | None = None
        self._data = bytearray()
        self._end: int | None = None  # where the body ends, once a head with a Content-Length is read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._done.done():
            return
        self._data += data
        if len(self._data) > _MAX_BODY:
            self._settle(GetError(f"answer over {_MAX_BODY // (1024 * 1024)} MiB"))
        elif self._end is None and b"\r\n\r\n" in self._data:
            try:
                self._end = _body_end(self._data)
            except GetError as exc:
                self._settle(exc)
                return
        if self._end is not None and len(self._data) >= self._end:
            self._finish()

    def eof_received(self) -> bool | None:
        self._finish()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._done.done():
            detail = f": {exc}" if exc is not None else ""
            self._done.set_exception(GetError(f"connection closed before the answer ended{detail}"))

    def _finish(self) -> None:
        if self._done.done():
            return
        try:
            answer: Answer | GetError = read_answer(bytes(self._data))
        except GetError as exc:
            answer = exc
        self._settle(answer)

    def _settle(self, outcome: Answer | GetError) -> None:
        if not self._done.done():
            if isinstance(outcome, Answer):
                self._done.set_result(outcome)
            else:
                self._done.set_exception(outcome)
        if self._transport is not None:
            self._transport.close()


# ---- the answer -----------------------------------------------------------------------------------
# What h11 would read of an answer to our GET, without its state machine and events (80 µs an answer, a
# tenth of a scrape's CPU); tests hold the two equal. The head is CRLF-delimited; a 1xx answer is skipped.
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: [^\r\n]*)?")
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([^\r\n]*?)[ \t]*")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\r\n]*)?")


def _head(data: bytes | bytearray, start: int) -> tuple[int, dict[bytes, bytes], int] | None:
    """(status, headers by lower-case name, where the body starts) of the head at ``start``; None while the
    head is not whole."""
    end = data.find(b"\r\n\r\n", start)
    if end == -1:
        return None
    status_line, *lines = bytes(data[start:end]).split(b"\r\n")
    status = _STATUS_LINE.fullmatch(status_line)
    if status is None:
        raise GetError(f"not HTTP/1.1: status line {status_line[:80]!r}")
    headers: dict[bytes, bytes] = {}
    for line in lines:
        header = _HEADER.fullmatch(line)
        if header is None:
            raise GetError(f"not HTTP/1.1: header line {line[:80]!r}")
        name, value = header[1].lower(), header[2]
        if name in headers:
            if name == b"content-length" and value != headers[name]:
                raise GetError("two different Content-Length headers")
            value = value if name == b"content-length" else headers[name] + b", " + value
        headers[name] = value
    return int(status[1]), headers, end + 4


def _final_head(data: bytes | bytearray) -> tuple[int, dict[bytes, bytes], int] | None:
    start = 0
    while (head := _head(data, start)) is not None and 100 <= head[0] < 200:
        start = head[2]  # 100 Continue and the like: the answer follows
    return head


def _length(headers: dict[bytes, bytes]) -> int | None:
    value = headers.get(b"content-length")
    if value is None or b"transfer-encoding" in headers:
        return None
    if not value.isdigit():
        raise GetError(f"bad Content-Length {value[:40]!r}")
    return int(value)


def _body_end(data: bytes | bytearray) -> int | None:
    """Where the answer ends, when its head is whole and announces a Content-Length."""
    head = _final_head(data)
    if head is None:
        return None
    status, headers, body_at = head
    length = 0 if status in (204, 304) else _length(headers)
    return None if length is None else body_at + length


def _dechunk(data: bytes, pos: int) -> bytes:
    parts: list[bytes] = []
    while True:
        eol = data.find(b"\r\n", pos)
        size = _CHUNK_SIZE.fullmatch(data, pos, eol) if eol != -1 else None
        if size is None:
            raise GetError("connection closed mid-body" if eol == -1 else "not HTTP/1.1: bad chunk size")
        length, pos = int(size[1], 16), eol + 2
        if length == 0:  # the last chunk; then trailers (ignored) and a blank line
            if data.startswith(b"\r\n", pos) or data.find(b"\r\n\r\n", pos) != -1:
                return b"".join(parts)
            raise GetError("connection closed mid-body")
        if len(data) < pos + length + 2:
            raise GetError("connection closed mid-body")
        if data[pos + length : pos + length + 2] != b"\r\n":
            raise GetError("not HTTP/1.1: a chunk longer than its size")
        parts.append(data[pos : pos + length])
        pos += length + 2


def read_answer(data: bytes) -> Answer:
    """The answer in ``data``, everything the server sent before it closed (or the whole announced body)."""
    head = _final_head(data)
    if head is None:
        raise GetError("connection closed before the answer ended" if data else "connection closed unanswered")
    status, headers, body_at = head
    coding = headers.get(b"transfer-encoding", b"").strip().lower()
    if status in (204, 304):
        body = b""
    elif coding == b"chunked":
        body = _dechunk(data, body_at)
    elif coding:
        raise GetError(f"transfer-encoding {coding.decode('latin-1')!r} is not chunked")
    elif (length := _length(headers)) is not None:
        if len(data) - body_at < length:
            raise GetError(f"connection closed mid-body ({len(data) - body_at} of {length} bytes)")
        body = data[body_at : body_at + length]
    else:
        body = data[body_at:]  # no length: the body runs until the server closes
    encoding = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
    if encoding == "gzip":
        try:
            body = zlib.decompress(body, wbits=16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise GetError(f"bad gzip body: {exc}") from None
    elif encoding not in ("", "identity"):
        raise GetError(f"content-encoding {encoding!r} was not asked for")
    return Answer(status, headers.get(b"content-type", b"").decode("latin-1"), body)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a GET goes, and its request, worked out once per URL."""

    host: str
    port: int
    tls: bool
    request: bytes

    @classmethod
    def of(cls, url: str, headers: dict[str, str]) -> Target:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise GetError(f"bad URL: {exc}") from None
        if parsed.scheme not in ("http", "https"):
            raise GetError(f"unsupported scheme {parsed.scheme!r}: use http:// or https://")
        tls = parsed.scheme == "https"
        port = parsed.port or (443 if tls else 80)
        if not 0 < port < 65536:
            raise GetError(f"port {port} is out of range (1–65535)")
        fields = [("Host", parsed.netloc.decode("ascii")), *headers.items(), ("Connection", "close")]
        head = [f"GET {parsed.raw_path.decode('ascii')} HTTP/1.1", *(f"{k}: {v}" for k, v in fields)]
        return cls(parsed.host, port, tls, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))


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
