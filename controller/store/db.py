"""Engine setup: SQLite by default (a file in the user's data directory, WAL), PostgreSQL by URL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

# PostgreSQL connections fail instead of hanging: libpq's connect timeout, TCP keepalives (a peer that
# vanished is noticed in ~25 s instead of the kernel's ~15 min) and a TCP user timeout (unacknowledged
# data), plus a server-side statement timeout. A parameter the URL sets itself wins.
PG_CONNECT_TIMEOUT = 5
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
PG_TCP_USER_TIMEOUT_MS = 30_000


def postgres_connect_args(url: str, statement_timeout: float) -> dict[str, Any]:
    given = make_url(url).query
    args: dict[str, Any] = {
        "connect_timeout": PG_CONNECT_TIMEOUT,
        **PG_KEEPALIVES,
        "tcp_user_timeout": PG_TCP_USER_TIMEOUT_MS,
        "options": f"-c statement_timeout={int(statement_timeout * 1000)}",
    }
    return {k: v for k, v in args.items() if k not in given}


def make_engine(url: str, *, statement_timeout: float = 30.0, **kwargs: Any) -> Engine:
    """Create an engine; SQLite gets WAL, a busy timeout and foreign keys on every connection; PostgreSQL
    connect, statement and TCP timeouts (``postgres_connect_args``)."""
    if url.startswith("sqlite"):
        kwargs.setdefault("connect_args", {"timeout": 30})
        engine = create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    kwargs.setdefault("pool_pre_ping", True)
    if url.startswith("postgresql"):
        kwargs.setdefault("connect_args", postgres_connect_args(url, statement_timeout))
    return create_engine(url, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
