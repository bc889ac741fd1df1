"""The daemon's plain GET for /metrics: one connection per scrape, h11 reading the answer, against a local
server that answers with canned bytes (lengths, chunks, gzip, errors, early closes, not HTTP at all)."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalectl.clocks import FakeClock
from scalectl.sources.plain_get import Answer, ConnectError, GetError, Target, get, read_answer
from scalectl.sources.vllm_scraper import VllmScraper

METRICS = b'# HELP vllm:num_requests_running Running.\nvllm:num_requests_running{model_name="m"} 3.0\n'


class _Canned:
    """A loopback server that reads one request and answers with ``reply(request)``, then closes."""

    def __init__(self, reply: Callable[[bytes], bytes]) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(request)
        writer.write(self.reply(request))
        await writer.drain()
        writer.close()


Serve = Callable[[Callable[[bytes], bytes]], Awaitable[_Canned]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(reply: Callable[[bytes], bytes]) -> _Canned:
        canned = _Canned(reply)
        server = await asyncio.start_server(canned._serve, "127.0.0.1", 0)
        canned.port = server.sockets[0].getsockname()[1]
        servers.append(server)
        return canned

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


def _answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = [f"HTTP/1.1 {status}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _chunked(body: bytes, size: int = 10) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


async def _get(canned: _Canned, path: str = "/metrics") -> Answer:
    return await get(Target.of(f"http://127.0.0.1:{canned.port}{path}", {"Accept": "text/plain"}))


async def test_the_request_asks_once_for_the_body_as_it_is_and_closes(serve: Serve) -> None:
    canned = await serve(lambda _: _answer(METRICS, "Content-Type: text/plain; version=0.0.4; charset=utf-8"))
    answer = await _get(canned, "/metrics?x=1")
    assert answer.status == 200 and answer.text() == METRICS.decode()
    (request,) = canned.requests
    lines = request.decode().split("\r\n")
    assert lines[0] == "GET /metrics?x=1 HTTP/1.1"
    assert f"host: 127.0.0.1:{canned.port}" in [line.lower() for line in lines]
    assert "connection: close" in [line.lower() for line in lines]
    assert not any(line.lower().startswith("accept-encoding") for line in lines)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(_answer(_chunked(METRICS), "Transfer-Encoding: chunked"), id="chunked"),
        pytest.param(_answer(gzip.compress(METRICS), "Content-Encoding: gzip"), id="gzip"),
        pytest.param(
            _answer(_chunked(gzip.compress(METRICS)), "Transfer-Encoding: chunked", "Content-Encoding: gzip"),
            id="chunked gzip",
        ),
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n" + _answer(METRICS), id="after a 100 Continue"),
    ],
)
async def test_bodies_in_every_framing_read_the_same(serve: Serve, reply: bytes) -> None:
    canned = await serve(lambda _: reply)
    assert (await _get(canned)).body == METRICS


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        pytest.param(_answer(b"", "Content-Length: 500") + METRICS, "closed", id="closed mid-body"),
        pytest.param(b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not HTTP", id="not HTTP"),
        pytest.param(b"", "closed", id="closed before answering"),
        pytest.param(_answer(b"\x1f\x8bnot gzip", "Content-Encoding: gzip"), "gzip", id="bad gzip"),
        pytest.param(_answer(METRICS, "Content-Encoding: br"), "was not asked for", id="unasked encoding"),
    ],
)
async def test_a_broken_answer_is_an_error_naming_what_broke(serve: Serve, reply: bytes, said: str) -> None:
    canned = await serve(lambda _: reply)
    with pytest.raises(GetError, match=said):
        await _get(canned)


async def test_a_refused_connection_is_a_connect_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(ConnectError, match="Connect call failed"):
        await get(Target.of(f"http://127.0.0.1:{port}/metrics", {}))


def test_only_http_and_https_are_scraped() -> None:
    with pytest.raises(GetError, match="unsupported scheme 'ftp'"):
        Target.of("ftp://10.0.0.1/metrics", {})
    with pytest.raises(GetError, match="port 99999 is out of range"):
        Target.of("http://10.0.0.1:99999/metrics", {})
    assert Target.of("https://example.test/metrics", {}).port == 443
    assert Target.of("http://[::1]:8000/metrics", {}).host == "::1"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain; version=0.0.4", b"vllm:num_requests_running 3\n"),
        ("text/plain; version=0.0.4; charset=utf-8", b"vllm:num_requests_running 3\n"),
        ('text/plain; charset="UTF-8"', "caf\xe9 \ufeff\n".encode()),
        ("text/plain; charset=latin-1", 'model_name="caf\xe9"\n'.encode("latin-1")),
        ("text/plain; charset=no-such-codec", b"ok\n"),
        ("text/plain", b"bad \xff byte\n"),
        ("", "\ufeffBOM kept as httpx keeps it\n".encode()),
    ],
)
def test_text_is_what_httpx_gives(content_type: str, body: bytes) -> None:
    headers = {"content-type": content_type} if content_type else {}
    assert Answer(200, content_type, body).text() == httpx.Response(200, headers=headers, content=body).text


async def test_the_scraper_reads_plain_and_names_a_bad_status(serve: Serve) -> None:
    good = await serve(lambda _: _answer(METRICS, "Content-Type: text/plain"))
    bad = await serve(lambda _: _answer(b"down", status="503 Service Unavailable"))
    closed = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    gone = closed.sockets[0].getsockname()[1]
    closed.close()
    await closed.wait_closed()
    async with httpx.AsyncClient() as client:
        scraper = VllmScraper(client, FakeClock(), timeout=2.0, plain=True)
        ok, failed, refused = await scraper.scrape(
            [f"127.0.0.1:{good.port}", f"127.0.0.1:{bad.port}", f"127.0.0.1:{gone}"]
        )
    assert ok.snapshot is not None and ok.snapshot.running == 3.0
    assert failed.snapshot is None and failed.error == "/metrics answered HTTP 503"
    assert refused.snapshot is None and (refused.error or "").startswith("ConnectError: ")


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


async def test_https_is_read_and_its_certificate_checked(tmp_path: Path) -> None:
    cert_file, key_file = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_file, key_file)
    canned = _Canned(lambda _: _answer(METRICS))
    server = await asyncio.start_server(canned._serve, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    target = Target.of(f"https://localhost:{port}/metrics", {})
    try:
        trusting = ssl.create_default_context(cafile=str(cert_file))
        assert (await get(target, trusting)).body == METRICS
        with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await get(target)  # the system's authorities do not know a self-signed certificate
    finally:
        server.close()
        await server.wait_closed()


def _h11_reads(data: bytes) -> tuple[int, str, bytes]:
    """What h11 (the yardstick) reads of ``data`` as the answer to a GET."""
    import h11

    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/metrics", headers=[("Host", "a")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(data)
    conn.receive_data(b"")
    status, content_type, body = 0, "", b""
    while not isinstance(event := conn.next_event(), h11.EndOfMessage):
        if isinstance(event, h11.Response):
            status = event.status_code
            content_type = dict(event.headers).get(b"content-type", b"").decode("latin-1")
        elif isinstance(event, h11.Data):
            body += event.data
        assert event is not h11.NEED_DATA
    return status, content_type, body


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(max_size=3000),
    status=st.sampled_from(["200 OK", "404 Not Found", "503 Service Unavailable", "200"]),
    framing=st.sampled_from(["length", "chunked", "close"]),
    chunk=st.integers(1, 700),
    content_type=st.sampled_from(["", "text/plain; version=0.0.4; charset=utf-8"]),
    continued=st.booleans(),
    extension=st.sampled_from(["", ";name=value", " "]),
    trailer=st.sampled_from(["", "X-Trailer: 1\r\n"]),
)
def test_the_answer_is_read_as_h11_reads_it(
    body: bytes,
    status: str,
    framing: str,
    chunk: int,
    content_type: str,
    continued: bool,
    extension: str,
    trailer: str,
) -> None:
    head = [f"HTTP/1.1 {status}", "Server: uvicorn", "date: Sat, 28 Nov 2026 17:00:00 GMT"]
    if content_type:
        head.append(f"Content-Type:  {content_type} ")
    if framing == "length":
        head.append(f"Content-Length: {len(body)}")
        payload = body
    elif framing == "chunked":
        head.append("Transfer-Encoding: chunked")
        parts = [body[i : i + chunk] for i in range(0, len(body), chunk)]
        payload = b"".join(f"{len(p):X}{extension}\r\n".encode() + p + b"\r\n" for p in parts)
        payload += f"0{extension}\r\n{trailer}\r\n".encode()
    else:
        head.append("Connection: close")
        payload = body
    data = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
    if continued:
        data = b"HTTP/1.1 100 Continue\r\n\r\n" + data
    answer = read_answer(data)
    assert (answer.status, answer.content_type, answer.body) == _h11_reads(data)


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
        b"HTTP/1.1 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",
    ],
)
def test_what_h11_refuses_is_an_error(data: bytes) -> None:
    import h11

    with pytest.raises(h11.RemoteProtocolError):
        _h11_reads(data)
    with pytest.raises(GetError):
        read_answer(data)
