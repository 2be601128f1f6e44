"""The admin and data-team read pages in a real browser: policy versions with publish and
rollback, the running experiment, the calibration report.

What the browser does is checked against the API (`GET /v1/admin/policy`,
`/v1/admin/experiments`) and the decisions the gateway makes, not against the page
alone. The tests share one gateway (module scope) and run in file order; each reads the
state it starts from instead of assuming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from calibration.data import load_labelled, split_of
from router.app.training import TrainResult
from router.contracts import ExperimentConfig, Policy
from router.routing.experiments import assign
from router.storage.policy_store import load_policy
from tests.e2e.browser.conftest import BY_ROLE, ConsoleServer, screenshot, watch
from tests.paths import DATASETS, REPO_ROOT
from tests.servers import gateway_env

ADMIN = BY_ROLE["admin"]
HOSTILE = ('<script>alert("notes")</script>"><img src=x onerror=alert(1)> '
           '<a href="javascript:alert(2)">x</a>')
"""A policy's notes are free text: they render as text and run nothing."""
TEXT = "my kettle arrived broken, please refund order O-1001"
REPORT_TIMEOUT_MS = 60_000
"""A report's render scores the test part and draws four plots (seconds)."""


@pytest.fixture(scope="module")
def calibrated(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory) -> Policy:
    """What the data team brings to the console: `support-router score` and `calibrate`
    (real processes) on the routing data's test split, which the model never saw."""
    folder = tmp_path_factory.mktemp("calibrate")
    labels = folder / "labels.jsonl"
    labels.write_text("".join(r.model_dump_json() + "\n" for r in load_labelled(
        DATASETS / "routes") if split_of(r.id) == "test"), encoding="utf-8")
    env = gateway_env(trained.model_path.parent, trained.policy_path, folder / "var")
    model = str(trained.model_path)
    for args in (["score", "--data", labels, "--out", folder / "pred.jsonl", "--model", model,
                  "--no-cache"],
                 ["calibrate", "--predictions", folder / "pred.jsonl", "--labels", labels,
                  "--out", folder / "policy.json", "--model", model, "--version", "week-49",
                  "--n-boot", "200"]):
        done = subprocess.run([sys.executable, "-m", "router", *map(str, args)], env=env,
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    return load_policy(Path(folder / "policy.json"))


def _policies(server: ConsoleServer) -> dict[str, Any]:
    with server.api(ADMIN) as api:
        answer = api.get("/v1/admin/policy")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _served_version(server: ConsoleServer) -> str:
    with server.api("chat-gateway") as api:
        return str(api.post("/v1/route", json={"text": TEXT}).json()["policy_version"])


def _decided_with(server: ConsoleServer, version: str, within_s: float = 10.0) -> bool:
    """Whether the gateway's decisions carry `version` within `within_s` (a worker that did
    not take the change follows the database within its poll interval)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _served_version(server) == version:
            return True
        time.sleep(0.2)
    return False


def _timings(page: Page) -> dict[str, float]:
    """Time to first byte and to the load event, in ms, as the browser measured them."""
    entry = page.evaluate("() => JSON.stringify(performance.getEntriesByType('navigation')[0])")
    nav = json.loads(entry)
    return {"ttfb_ms": round(nav["responseStart"] - nav["startTime"], 1),
            "load_ms": round(nav["loadEventEnd"] - nav["startTime"], 1)}


def test_an_admin_publishes_a_policy_and_rolls_it_back(
        sign_in: Callable[[str], Page], console_server: ConsoleServer,
        calibrated: Policy) -> None:
    """The policy `calibrate` wrote is pasted, reviewed and confirmed; the API, the
    decisions and the page agree; then it is rolled back the same way."""
    before = _policies(console_server)
    original = before["active_version"]
    page = sign_in(ADMIN)
    seen = watch(page)
    page.goto("/console/policies")
    page.fill("#policy", calibrated.model_dump_json(indent=2))
    page.click("[data-testid=publish-form] button[type=submit]")
    assert page.locator("h1").inner_text() == "Publish week-49?"
    assert original in page.locator("main").inner_text()  # what it replaces is shown
    assert _policies(console_server)["active_version"] == original  # the review wrote nothing
    page.click("[data-testid=confirm]")
    page.wait_for_url("**/console/policies?done=publish*")
    assert "Published week-49" in page.get_by_test_id("done").inner_text()

    after = _policies(console_server)
    assert (after["active_version"], after["rollback_to"]) == ("week-49", original)
    assert (after["history"][0]["action"], after["history"][0]["by"]) == ("publish", ADMIN)
    assert _decided_with(console_server, "week-49")
    card = page.get_by_test_id("version-week-49")
    routing = calibrated.metrics_test["routing"]
    assert f"Held-out test part ({calibrated.metrics_test['n']} rows" in card.inner_text()
    assert f"{routing['misroute_rate_routed']['value']:.4f}" in card.inner_text()
    assert calibrated.guarantee is not None
    assert f"upper bound {calibrated.guarantee.upper_bound:.4f}" in card.inner_text()
    row = page.locator("[data-testid=versions] tr[data-version='week-49']")
    assert "active" in row.inner_text() and f"{calibrated.threshold:.2f}" in row.inner_text()
    screenshot(page, "policies")
    timings = _timings(page)

    page.click("[data-testid=rollback-link]")
    assert page.locator("h1").inner_text() == f"Roll back to {original}?"
    page.click("[data-testid=confirm]")
    page.wait_for_url("**/console/policies?done=rollback*")
    back = _policies(console_server)
    assert back["active_version"] == original
    assert (back["history"][0]["action"], back["history"][0]["by"]) == ("rollback", ADMIN)
    assert _decided_with(console_server, original)
    assert seen.dialogs == [] and seen.errors == []
    print(f"/console/policies timings: {timings}")


def test_a_confirmation_made_stale_by_another_admin_changes_nothing(
        sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    page = sign_in(ADMIN)
    stale = {**_active_policy(console_server), "version": "console-stale", "threshold": 0.9}
    page.goto("/console/policies")
    page.fill("#policy", json.dumps(stale))
    page.click("[data-testid=publish-form] button[type=submit]")
    meanwhile = {**_active_policy(console_server), "version": "console-meanwhile",
                 "notes": HOSTILE}
    with console_server.api(ADMIN) as api:
        assert api.post("/v1/admin/policy", json=meanwhile).status_code == 200
    before = _policies(console_server)
    with page.expect_response("**/console/policies/publish") as answer:
        page.click("[data-testid=confirm]")
    assert answer.value.status == 409
    assert page.get_by_test_id("error-code").inner_text() == "policy_changed"
    assert _policies(console_server) == before
    seen = watch(page)
    page.goto("/console/policies")
    assert HOSTILE in page.get_by_test_id("version-console-meanwhile").inner_text()  # as text
    assert seen.dialogs == [] and seen.errors == []
    with console_server.api(ADMIN) as api:  # leave the active version as it was
        assert api.post("/v1/admin/policy/rollback").status_code == 200


def test_a_refused_policy_says_why_and_keeps_what_was_pasted(
        sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    before = _policies(console_server)
    page = sign_in(ADMIN)
    page.goto("/console/policies")
    broken = json.dumps({**_active_policy(console_server), "version": "console-broken",
                         "calibrator": {"kind": "temperature", "params": {}}})
    page.fill("#policy", broken)
    with page.expect_response("**/console/policies/publish/review") as answer:
        page.click("[data-testid=publish-form] button[type=submit]")
    assert answer.value.status == 422
    alert = page.locator("p.error[data-code=invalid_policy]")
    assert "calibrator.params" in alert.inner_text()
    assert page.input_value("#policy") == broken
    assert _policies(console_server) == before


def test_an_earlier_version_is_published_again_from_its_row(
        sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    before = _policies(console_server)
    earlier = next(v["version"] for v in before["versions"] if not v["active"])
    page = sign_in(ADMIN)
    page.goto("/console/policies")
    page.click(f"[data-testid=versions] tr[data-version='{earlier}'] button")
    assert page.locator("h1").inner_text() == f"Publish {earlier}?"
    page.click("[data-testid=confirm]")
    page.wait_for_url("**/console/policies?done=publish*")
    after = _policies(console_server)
    assert (after["active_version"], after["history"][0]["by"]) == (earlier, ADMIN)
    assert len(after["versions"]) == len(before["versions"])  # no new version stored
    assert _decided_with(console_server, earlier)
    with console_server.api(ADMIN) as api:  # leave the active version as it was
        assert api.post("/v1/admin/policy/rollback").status_code == 200


@pytest.mark.parametrize("role", ["supervisor", "agent"])
def test_no_publish_form_but_for_admins_and_a_forged_post_is_refused(
        role: str, sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    page = sign_in(BY_ROLE[role])
    opened = page.goto("/console/policies")
    assert opened is not None
    if role == "supervisor":  # reads the versions
        assert opened.status == 200
        assert page.locator("[data-testid=versions] tbody tr").count() >= 1
    else:
        assert opened.status == 403
    assert page.locator("[data-testid=admin-forms], [data-testid=publish-form]").count() == 0
    assert page.locator("form[action*='/policies/']").count() == 0

    # The forgery carries this session's own cookie, Origin and CSRF token: only the
    # role is missing.
    token = page.locator("form.who input[name=csrf_token]").get_attribute("value") or ""
    before = _policies(console_server)
    forged = {**_active_policy(console_server), "version": "forged", "threshold": 0.01}
    for path, form in (("/console/policies/publish",
                        {"csrf_token": token, "expect_active": before["active_version"],
                         "policy": json.dumps(forged)}),
                       ("/console/policies/rollback",
                        {"csrf_token": token, "expect_active": before["active_version"]}),
                       ("/console/policies/publish/review",
                        {"csrf_token": token, "policy": json.dumps(forged)})):
        answer = page.request.post(path, form=form,
                                   headers={"Origin": console_server.url})
        assert answer.status == 403, (path, answer.status)
        assert 'data-code="console_forbidden"' in answer.text()
    assert _policies(console_server) == before


def test_the_experiments_page_shows_a_running_experiment(
        sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    page = sign_in(ADMIN)
    page.goto("/console/experiments")
    assert page.get_by_test_id("no-experiment").is_visible()
    body = {"name": "console-split", "salt": "browser", "planned_requests": 500,
            "variants": [{"name": "control", "weight": 1}, {"name": "treatment", "weight": 3}]}
    config = ExperimentConfig.model_validate(body)
    with console_server.api(ADMIN) as api:
        assert api.post("/v1/admin/experiments", json=body).status_code == 201
    try:
        n = 60
        with console_server.api("chat-gateway") as gateway:
            for i in range(n):
                routed = gateway.post("/v1/route", json={"text": TEXT, "case_id": f"c-{i}"})
                assert routed.json()["experiment"] == "console-split"
        expected = {"control": 0, "treatment": 0}
        for i in range(n):
            expected[assign(config, f"case:c-{i}").name] += 1
        page.goto("/console/experiments")
        assert "console-split" in page.get_by_test_id("running").inner_text()
        assert page.get_by_test_id("requests").inner_text().startswith(f"{n} of 500")
        for name, share in (("control", "25.0%"), ("treatment", "75.0%")):
            cells = page.locator(f"[data-variant={name}] td").all_inner_texts()
            assert (cells[2], cells[3]) == (share, str(expected[name]))
        assert "p = " in page.get_by_test_id("srm").inner_text()
        screenshot(page, "experiments")
        print(f"/console/experiments timings: {_timings(page)}")
    finally:
        with console_server.api(ADMIN) as api:
            api.post("/v1/admin/experiments/console-split/stop")
    page.goto("/console/experiments")
    assert page.get_by_test_id("no-experiment").is_visible()
    assert "console-split" in page.get_by_test_id("experiment-history").inner_text()


@pytest.mark.parametrize("role", ["admin", "supervisor"])
def test_the_reports_page_shows_the_plots(
        role: str, sign_in: Callable[[str], Page], console_server: ConsoleServer) -> None:
    page = sign_in(BY_ROLE[role])
    seen = watch(page)
    page.set_default_timeout(REPORT_TIMEOUT_MS)
    page.goto("/console/reports")
    first = _timings(page)
    if role == "admin":  # the first to ask: the render starts, the page reloads itself
        assert page.get_by_test_id("report-pending").is_visible()
    page.get_by_test_id("report").wait_for()
    report = page.get_by_test_id("report")
    assert _served_version(console_server) in report.inner_text()
    images = report.locator("img")
    assert images.count() == 4
    widths = images.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 300 for w in widths), widths  # decoded, not a broken-image icon
    assert seen.errors == []
    if role == "admin":
        page.goto("/console/reports")  # the kept render: what a reader usually gets
        print(f"/console/reports timings: while rendering {first}, rendered {_timings(page)}")
        report.locator("h2", has_text="Reliability").evaluate("h => h.scrollIntoView()")
        screenshot(page, "reports")


def test_an_agent_opens_neither_experiments_nor_reports(
        sign_in: Callable[[str], Page]) -> None:
    page = sign_in(BY_ROLE["agent"])
    for path in ("/console/experiments", "/console/reports"):
        answer = page.goto(path)
        assert answer is not None and answer.status == 403


def _active_policy(server: ConsoleServer) -> dict[str, Any]:
    """A new artifact for the running model, from the active version as the API lists it."""
    listed = _policies(server)
    active = next(v for v in listed["versions"] if v["active"])
    return {"version": active["version"], "model": active["model"],
            "calibrator": {"kind": active["calibrator"]}, "threshold": active["threshold"],
            "guarantee": active["guarantee"], "data": active["data"],
            "notes": "published from the console's browser test",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
