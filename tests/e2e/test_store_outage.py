"""The database's tables vanish under a running gateway: 503 everywhere, nothing in the log.

`support-router serve` runs on a PostgreSQL schema of its own. After one ordinary
conversation the schema is dropped and recreated empty, as when a database is restored
empty or recreated by mistake: the server still answers `SELECT 1`, but every table is
gone. Then every endpoint that needs the store answers 503 `store_unavailable` with a
`Retry-After` (not a 500), `/readyz` says not ready because the schema is not at the
newest migration, and a message carrying a name, a phone number and a street reaches no
log line: neither the driver's error nor SQLAlchemy's parameter dump is logged.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from router.app.training import TrainResult
from tests.servers import GatewayProcess, gateway_env

START_TIMEOUT_S = 180.0
NAME, PHONE, STREET = "Philippa Quenby-Marsh", "07700 900461", "41 Wrenfield Crescent"
PERSONAL = (f"Hello, this is {NAME}. I moved to {STREET}, please change my address and "
            f"call me on {PHONE} about my refund.")


def _schema(url: str) -> str:
    options = make_url(url).query["options"]
    assert isinstance(options, str) and options.startswith("-csearch_path=")
    return options.removeprefix("-csearch_path=")


def test_a_database_without_its_tables_answers_503_and_logs_no_customer_text(
    trained: TrainResult, postgres_url: str, postgres_admin: Engine, tmp_path: Path,
) -> None:
    env = gateway_env(trained.model_path.parent, trained.policy_path, tmp_path / "var",
                      database_url=postgres_url, rate_limit_per_s="0")
    with GatewayProcess() as server, httpx.Client(timeout=30) as client:
        server.start(env, [], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        url = server.url
        opened = client.post(f"{url}/v1/messages", json={"text": "Where is my order O-1002?"})
        assert opened.status_code == 200, opened.text
        case_id = opened.json()["case_id"]

        schema = _schema(postgres_url)
        with postgres_admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))

        answers = {
            "route": client.post(f"{url}/v1/route", json={"text": PERSONAL}),
            "new message": client.post(f"{url}/v1/messages", json={"text": PERSONAL}),
            "message on a case": client.post(f"{url}/v1/messages",
                                             json={"text": PERSONAL, "case_id": case_id}),
            "case": client.get(f"{url}/v1/cases/{case_id}"),
            "approvals": client.get(f"{url}/v1/approvals"),
            "approval decision": client.post(f"{url}/v1/approvals/op-1/decision",
                                             json={"decision": "approve",
                                                   "supervisor": "maria"}),
            "handoffs": client.get(f"{url}/v1/handoffs"),
            "handoff reply": client.post(f"{url}/v1/handoffs/{case_id}/reply",
                                         json={"agent": "sam", "text": PERSONAL}),
        }
        ready = client.get(f"{url}/readyz")
        assert server.stop(timeout=60) == 0

    wrong = {name: (r.status_code, r.text) for name, r in answers.items()
             if r.status_code != 503 or r.json()["error"]["code"] != "store_unavailable"
             or not r.headers.get("Retry-After")}
    assert wrong == {}
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"model_and_policy": True, "database": True,
                                      "schema": False}
    log = server.output()
    assert "the database is unavailable: ProgrammingError (UndefinedTable" in log
    for personal in (NAME, PHONE, STREET, "Quenby", "900461", "Wrenfield"):
        assert personal not in log, personal
