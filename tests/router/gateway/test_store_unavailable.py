"""The database loses its tables under a running app: 503 `store_unavailable`, no text logged.

The in-process counterpart of tests/e2e/test_store_outage.py, on SQLite and PostgreSQL:
the tables are dropped behind the app's back, then every kind of request is answered
503 with a `Retry-After`, and no log record carries the customer's words or SQLAlchemy's
statement parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData

from router.gateway.app import create_app
from router.settings import Settings
from router.storage.db import make_engine

PERSONAL = "This is Oswin Harrowgate, 17 Pelham Mews, phone 07700 900872: refund please"
SECRETS = ("Oswin", "Harrowgate", "Pelham", "900872")


@pytest.fixture
def emptied(settings: Settings, any_db_url: str) -> Iterator[tuple[TestClient, str]]:
    """A running app and a case it opened, on a database whose tables are then dropped."""
    chosen = settings.model_copy(update={"database_url": any_db_url})
    with TestClient(create_app(chosen)) as client:
        opened = client.post("/v1/messages", json={"text": "Where is my order O-1002?"})
        assert opened.status_code == 200
        engine = make_engine(any_db_url)
        try:
            tables = MetaData()
            tables.reflect(engine)
            tables.drop_all(engine)
        finally:
            engine.dispose()
        yield client, opened.json()["case_id"]


def test_every_request_gets_503_and_no_customer_text_is_logged(
    emptied: tuple[TestClient, str], caplog: pytest.LogCaptureFixture,
) -> None:
    client, case_id = emptied
    with caplog.at_level(logging.DEBUG):
        answers = [
            client.post("/v1/route", json={"text": PERSONAL}),
            client.post("/v1/messages", json={"text": PERSONAL}),
            client.post("/v1/messages", json={"text": PERSONAL, "case_id": case_id}),
            client.get(f"/v1/cases/{case_id}"),
            client.get("/v1/approvals"),
            client.get("/v1/handoffs"),
            client.post(f"/v1/handoffs/{case_id}/reply", json={"agent": "sam",
                                                                 "text": PERSONAL}),
        ]
        ready = client.get("/readyz")
    assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == \
        [(503, "store_unavailable")] * len(answers)
    assert all(a.headers["Retry-After"] == "5" for a in answers)
    assert ready.status_code == 503 and ready.json()["checks"]["schema"] is False
    logged = caplog.text  # every record formatted, tracebacks included
    assert "the database is unavailable" in logged
    assert not [secret for secret in SECRETS if secret in logged]
