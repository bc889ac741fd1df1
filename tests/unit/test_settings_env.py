"""Settings from the environment: each field from SCALECTL_<NAME>, lists and maps as JSON, DATABASE_URL as
the database URL's fallback, arguments over the environment, and errors that name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from scalectl.controller.settings import Settings


def test_fields_come_from_their_variables_and_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALECTL_TICK_INTERVAL", "2.5")
    monkeypatch.setenv("SCALECTL_HTTP_PORT", "9000")
    monkeypatch.setenv("SCALECTL_DATA_DIR", "/srv/scalectl")
    monkeypatch.setenv("SCALECTL_ACTIVATOR_ADDRESSES", '["10.0.0.1:8089", "10.0.0.2:8089"]')
    monkeypatch.setenv("SCALECTL_LOG_FORMAT", "json")
    s = Settings()
    assert (s.tick_interval, s.http_port, s.data_dir) == (2.5, 9000, Path("/srv/scalectl"))
    assert s.activator_addresses == ["10.0.0.1:8089", "10.0.0.2:8089"]
    assert s.log_format == "json"
    assert Settings(tick_interval=1.0).tick_interval == 1.0  # an argument wins over the variable


def test_the_database_url_falls_back_to_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALECTL_DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@db/x")
    assert Settings().database_url == "postgresql+psycopg://u@db/x"
    monkeypatch.setenv("SCALECTL_DATABASE_URL", "sqlite:///mine.db")
    assert Settings().database_url == "sqlite:///mine.db"  # ours first


def test_unset_variables_leave_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv("SCALECTL_" + name.upper(), raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    s = Settings()
    assert (s.tick_interval, s.http_port, s.routing, s.routing_listen) == (5.0, 8089, "none", {})
    assert s.database_url is None and s.activator_addresses is None


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("SCALECTL_ROUTING_LISTEN", "chat=8080", "SCALECTL_ROUTING_LISTEN: expected JSON"),
        ("SCALECTL_TICK_INTERVAL", "soon", "tick_interval"),
        ("SCALECTL_ROUTING", "haproxy", "routing"),
    ],
)
def test_a_bad_variable_is_an_error_that_names_it(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, says: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError) as err:
        Settings()
    assert says in str(err.value)
