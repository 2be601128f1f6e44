"""The task-suite runner, and the suites themselves through the HTTP app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.app.tasks import compare_store, load_tasks, normalize_text, parse_task, run_suite
from router.errors import InvalidInput
from router.settings import Settings
from tests.paths import DATASETS

SUITES = DATASETS / "tasks"
ADDRESS = {"id": 7, "account_id": "A-103", "kind": "shipping", "line1": "Karl-Marx-Allee 90",
           "city": "Berlin", "postal_code": "10243", "country": "DE"}
BEFORE = {"accounts": [], "orders": [], "refunds": [{"id": 1, "order_id": "O-5001",
                                                     "amount_cents": 19900}],
          "addresses": [ADDRESS],
          "preferences": [{"account_id": "A-103", "key": "language", "value": "en"}]}


def _after(**tables: list[dict]) -> dict:
    return {**BEFORE, **tables}


def test_no_writes_matches_an_empty_expectation() -> None:
    assert compare_store({}, BEFORE, _after()) is None


def test_new_refund_rows_must_match_exactly() -> None:
    after = _after(refunds=[*BEFORE["refunds"],
                            {"id": 2, "order_id": "O-1001", "amount_cents": 4800}])
    assert compare_store({"refunds": [{"order_id": "O-1001", "amount_cents": 4800}]},
                         BEFORE, after) is None
    assert "refunds: expected" in compare_store(
        {"refunds": [{"order_id": "O-1001", "amount_cents": 1500}]}, BEFORE, after)
    assert "refunds must not change" in compare_store({}, BEFORE, after)


def test_addresses_compare_accent_case_and_comma_insensitively() -> None:
    changed = {**ADDRESS, "line1": "Schönhauser Allee 12", "postal_code": "10119"}
    expect = {"addresses": [{"id": 7, "line1": "schonhauser allee, 12", "city": "BERLIN",
                             "postal_code": "10119", "country": "de"}]}
    assert compare_store(expect, BEFORE, _after(addresses=[changed])) is None
    assert normalize_text(" Gdańsk,  PL ") == "gdansk pl"


def test_preference_writes_and_unexpected_changes() -> None:
    after = _after(preferences=[{"account_id": "A-103", "key": "language", "value": "de"},
                                {"account_id": "A-103", "key": "sms_notifications",
                                 "value": "off"}])
    expect = {"preferences": {"A-103": {"language": "de", "sms_notifications": "off"}}}
    assert compare_store(expect, BEFORE, after) is None
    only_one = {"preferences": {"A-103": {"language": "de"}}}
    assert "preferences: expected" in compare_store(only_one, BEFORE, after)
    assert "preferences must not change" in compare_store({}, BEFORE, after)


@pytest.mark.parametrize(("raw", "match"), [
    ({"message": "hi", "expect": {}}, "needs an id"),
    ({"id": "t", "expect": {}}, "needs an id"),
    ({"id": "t", "message": "hi", "expect": {"orders": []}}, "expect must be"),
    ({"id": "t", "message": "hi", "expect": {}, "approval": "maybe"}, "approval"),
    ({"id": "t", "message": "hi", "expect": {}, "status": "done"}, "status"),
    ({"id": "t", "messages": ["a", "b"], "expect": {}, "route": ["refund"]}, "route"),
    ({"id": "t", "message": "hi", "expect": {}, "sender": "anyone"}, "sender"),
    ({"id": "t", "message": "hi", "expect": {}, "codes_sent": "one"}, "codes_sent"),
])
def test_malformed_tasks_are_named(raw: dict, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        parse_task(raw, where="suite.jsonl:3")


def test_messages_and_routes() -> None:
    task = parse_task({"id": "t", "messages": ["a", "b"], "route": "account", "expect": {}},
                      where="x")
    assert task.messages == ["a", "b"] and task.routes == ["account", "account"]


@pytest.mark.parametrize(("name", "minimum"), [("support16.jsonl", 16), ("extended.jsonl", 30),
                                             ("identity.jsonl", 8)])
def test_suite_files_are_valid(name: str, minimum: int) -> None:
    tasks = load_tasks(SUITES / name)
    assert len(tasks) >= minimum


def test_extended_suite_covers_languages_continuations_and_refusals() -> None:
    tasks = load_tasks(SUITES / "extended.jsonl")
    text = " ".join(m for t in tasks for m in t.messages)
    for word in ("Hola", "Hallo", "Здравствуйте", "Olá", "Bonjour", "Добрий день", "Merhaba",
                 "Dzień dobry"):
        assert word in text
    assert sum(len(t.messages) > 1 for t in tasks) >= 5
    assert {t.approval for t in tasks} >= {"approve", "reject"}
    assert any(t.fault == "lost_response" for t in tasks)


def _failures(report) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(f"{r.id}: {r.reason} (route={r.route}, status={r.status})"
                     for r in report.results if not r.passed)


@pytest.mark.parametrize("name", ["support16.jsonl", "extended.jsonl", "identity.jsonl"])
def test_handlers_pass_every_task_when_routed_as_labelled(settings: Settings,
                                                         name: str) -> None:
    """The handlers alone: each message carries its labelled route as a form `kind`."""
    report = run_suite(SUITES / name, settings=settings, route_hints=True)
    assert report.failed == 0, _failures(report)


@pytest.mark.parametrize(("name", "n_tasks"), [("support16.jsonl", 16), ("extended.jsonl", 68),
                                             ("identity.jsonl", 9)])
def test_every_task_passes_through_the_embedded_router(
    settings: Settings, name: str, n_tasks: int
) -> None:
    """The issue's 16 tasks and our own 68, routed by the shipped model and policy (not by
    a form `kind`): every message is routed as labelled, above the threshold, or asked
    about where the task expects a clarifying question."""
    report = run_suite(SUITES / name, settings=settings)
    assert (report.passed, report.failed) == (n_tasks, 0), _failures(report)


def test_runner_reports_failures_with_reasons(settings: Settings, tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({
        "id": "wrong-expectation", "route": "refund",
        "message": "Hi, this is ana.novak@example.com. My ceramic teapot (order O-1001) "
                   "arrived broken. Please refund the full amount.",
        "expect": {"refunds": [{"order_id": "O-1001", "amount_cents": 100}]},
    }) + "\n", encoding="utf-8")
    report = run_suite(suite, settings=settings, route_hints=True)
    (result,) = report.results
    assert not result.passed and "refunds: expected" in result.reason
    assert report.as_dict()["failed"] == 1


def test_the_verification_suite_covers_the_flow() -> None:
    tasks = load_tasks(SUITES / "identity.jsonl")
    text = " ".join(m for t in tasks for m in t.messages)
    assert "{code}" in text and "{wrong_code}" in text
    assert {t.sender for t in tasks} == {"claimed", None}
    assert any(t.messages.count("{wrong_code}") >= 5 for t in tasks)  # the lock


def test_claimed_senders_write_nothing_without_the_code(settings: Settings) -> None:
    """The suites' writes all rest on the runner vouching for the sender: run as an
    anonymous chat, no task that expects a write gets it, and each sends one code."""
    report = run_suite(SUITES / "support16.jsonl", settings=settings, route_hints=True,
                       sender="claimed")
    writes = [t.id for t in load_tasks(SUITES / "support16.jsonl") if t.expect]
    failed = {r.id: r for r in report.results if not r.passed}
    assert set(writes) <= set(failed)
    assert all(not r.wrote for r in report.results)
    assert all(r.status == "awaiting_customer" and "one-time code" in (r.reply or "")
               for r in report.results)


def test_a_code_placeholder_without_a_code_is_named(settings: Settings,
                                                     tmp_path: Path) -> None:
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "no-code", "messages": ["hello", "{code}"],
                                 "expect": {}}) + "\n", encoding="utf-8")
    (result,) = run_suite(suite, settings=settings, route_hints=True).results
    assert not result.passed and "needs a code" in result.reason
