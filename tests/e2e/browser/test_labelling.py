"""The data team's labelling in a real browser: two labellers label the same requests
(some differently), kappa shows, the disagreements reach adjudication, a lead resolves
them, and the export downloaded from the page feeds the real `support-router score` and
`calibrate`.

The gateway's log already holds an earlier round: the routing data's test split (the
rows the model never trained on), logged as decisions and labelled alike by both
labellers, written straight into the gateway's database. Calibrate needs a few thousand
labelled rows; the browser labels the new requests on top of them, sent through the API.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import insert

from calibration.data import LabelledRow, load_labelled, select_split
from router.app.training import TrainResult
from router.contracts import ROUTES
from router.storage.db import make_engine
from router.storage.decision_log import DecisionLog
from router.storage.label_db import LabelDB, labels
from tests.e2e.browser.conftest import ConsoleServer, screenshot, watch
from tests.labelling import T0, log_decisions, probabilities
from tests.paths import DATASETS
from tests.servers import gateway_env

GATEWAY_SETTINGS = {"label_overlap": "1.0"}
"""Every request goes to two labellers, so their agreement is measured on all of them."""

# text → (labeller-ana's route, labeller-bo's route); ana uses the keys, bo the buttons.
NEW = {
    "my kettle arrived broken, please refund order O-1001": ("refund", "refund"),
    "I can't sign in to my account, please reset my password": ("account", "account"),
    "<script>alert('label')</script> where is my parcel?": ("other", "other"),
    '"><img src=x onerror=alert(1)> please change my delivery address': ("account", "other"),
    "what are your opening hours on sundays": ("other", "other"),
    "hmm… that thing again, you know the one": ("unclear", "other"),
}
KEY = {"refund": "r", "account": "a", "other": "o", "unclear": "u"}


@pytest.fixture(scope="module")
def earlier_round(console_server: ConsoleServer) -> list[LabelledRow]:
    """The routing data's test split, logged and labelled by both labellers alike."""
    seen: set[str] = set()
    rows = []
    for row in select_split(load_labelled(DATASETS / "routes"), "test"):
        if row.text not in seen:  # the queue shows a repeated text once
            seen.add(row.text)
            rows.append(row)
    assert not seen & set(NEW)  # a new request must not be a repeat of an earlier one
    engine = make_engine(console_server.database_url)
    log = DecisionLog(engine)
    try:
        log_decisions(log, [(f"seed-{r.id}", r.text, probabilities(r.label, 0.95))
                            for r in rows])
        with engine.begin() as conn:
            conn.execute(insert(labels), [
                {"item_id": f"seed-{r.id}", "labeller": who, "label": r.label,
                 "at": T0}
                for r in rows for who in ("labeller-ana", "labeller-bo")])
    finally:
        log.close()
        engine.dispose()
    return rows


@pytest.fixture(scope="module")
def new_requests(console_server: ConsoleServer, earlier_round: list[LabelledRow]
                 ) -> dict[str, str]:
    """The new requests, routed through the API: request id → text."""
    with console_server.api("chat-gateway") as api:
        answers = {text: api.post("/v1/route", json={"text": text}) for text in NEW}
    assert all(a.status_code == 200 for a in answers.values()), answers
    return {a.json()["request_id"]: text for text, a in answers.items()}


def _timings(page: Page) -> dict[str, float]:
    entry = json.loads(page.evaluate(
        "JSON.stringify(performance.getEntriesByType('navigation')[0])"))
    return {"ttfb_ms": entry["responseStart"], "load_ms": entry["loadEventEnd"]}


def _label_all(page: Page, who: int, *, keys: bool) -> list[tuple[str, str]]:
    """Label every request the queue shows; what each reveal said, in order."""
    reveals = []
    while page.get_by_test_id("queue-empty").count() == 0:
        text = page.get_by_test_id("item-text").inner_text()
        route = NEW[text][who]
        item_id = page.get_by_test_id("item-id").inner_text()
        shown = page.get_by_test_id("reveal")
        # the model's answer on this request is not on the page before the label
        assert shown.count() == 0 or item_id not in shown.inner_text()
        with page.expect_navigation():
            if keys:
                page.keyboard.press(KEY[route])
            else:
                page.click(f"#label-form button[value={route}]")
        reveals.append((text, page.get_by_test_id("reveal").inner_text()))
    return reveals


def test_two_labellers_kappa_adjudication_and_the_export_feeds_calibrate(
        console_server: ConsoleServer, sign_in: Callable[[str], Page],
        earlier_round: list[LabelledRow], new_requests: dict[str, str],
        trained: TrainResult, tmp_path: Path) -> None:
    ana = sign_in("labeller-ana")
    seen = watch(ana)
    ana.click("header nav a:has-text('Labelling')")
    ana.wait_for_url("**/console/labels")
    assert ana.get_by_test_id("reveal").count() == 0
    assert ana.get_by_test_id("item-text").inner_text() in NEW
    assert "6 waiting for you" in ana.get_by_test_id("progress").inner_text()
    print("labels queue", _timings(ana))
    screenshot(ana, "labels-queue")

    ana.keyboard.press("?")  # the guide opens, nothing is labelled
    assert ana.locator("#guide").get_attribute("open") is not None
    screenshot(ana, "labels-queue-guide")
    ana.keyboard.press("?")

    first = ana.get_by_test_id("item-text").inner_text()
    with ana.expect_navigation():
        ana.keyboard.press("s")  # skip: it leaves ana's queue until undone
    assert ana.get_by_test_id("item-text").inner_text() != first
    with ana.expect_navigation():
        ana.keyboard.press("z")
    assert ana.get_by_test_id("undone").count() == 1
    assert ana.get_by_test_id("item-text").inner_text() == first

    reveals = _label_all(ana, 0, keys=True)
    assert sorted(text for text, _ in reveals) == sorted(NEW)
    for text, said in reveals:
        assert f"you said {NEW[text][0]}; the model said" in said
    screenshot(ana, "labels-queue-done")

    bo = sign_in("labeller-bo")
    bo.goto("/console/labels")
    _label_all(bo, 1, keys=False)
    assert bo.get_by_test_id("queue-empty").count() == 1

    lead = sign_in("lead-cy")
    seen_lead = watch(lead)
    lead.goto("/console/labels/agreement")
    print("labels agreement", _timings(lead))
    everything = {f"seed-{r.id}": (r.label, r.label) for r in earlier_round} | {
        i: NEW[t] for i, t in new_requests.items()}
    kappa = cohen_kappa_score([a for a, _ in everything.values()],
                              [b for _, b in everything.values()], labels=list(ROUTES))
    pair = lead.locator("[data-testid=pairs] tbody tr").filter(has_text="labeller-ana")
    assert pair.locator("[data-testid=kappa]").inner_text() == f"{kappa:.3f}"
    assert f"{len(everything)}" in pair.inner_text()
    splits = lead.locator("[data-testid=disagreements] tbody tr")
    assert splits.count() == 2
    assert "<img src=x onerror=alert(1)>" in splits.first.inner_text() + splits.last.inner_text()
    screenshot(lead, "labels-agreement")

    lead.click("nav.tabs a:has-text('Adjudication')")
    lead.wait_for_url("**/labels/adjudication")
    print("labels adjudication", _timings(lead))
    assert lead.get_by_test_id("open-item").count() == 2
    screenshot(lead, "labels-adjudication")
    for _ in range(2):
        item = lead.get_by_test_id("open-item").first
        text = item.locator(".customer-text").inner_text()
        route = "account" if "delivery address" in text else "unclear"
        item.locator(f"input[name=route][value={route}]").check()
        item.locator("input[name=note]").fill("guide: the request, not the noise <b>around</b>")
        with lead.expect_navigation():
            item.locator("button[type=submit]").click()
        assert lead.get_by_test_id("adjudicated").count() == 1
    assert lead.get_by_test_id("nothing-open").count() == 1
    assert "<b>around</b>" in lead.get_by_test_id("resolved").inner_text()

    lead.click("nav.tabs a:has-text('Export')")
    lead.wait_for_url("**/labels/export")
    counts = lead.get_by_test_id("export-counts").inner_text().split()
    assert counts[:2] == ["adjudicated", "2"] and counts[-1] == "0"
    screenshot(lead, "labels-export")
    with lead.expect_download() as download:
        lead.get_by_test_id("download").click()
    exported = tmp_path / "labels.jsonl"
    download.value.save_as(exported)
    rows = {row.id: row for row in load_labelled(exported)}
    assert len(rows) == len(everything)
    final = {new_requests[i]: rows[i].label for i in new_requests}
    assert final == {t: (a if a == b else ("account" if "delivery" in t else "unclear"))
                     for t, (a, b) in NEW.items()}
    assert seen.dialogs == seen.errors == seen_lead.dialogs == seen_lead.errors == []

    _score_and_calibrate(exported, trained, tmp_path)


def _score_and_calibrate(exported: Path, trained: TrainResult, tmp_path: Path) -> None:
    """The real CLI, as a process, on the downloaded file."""
    env = gateway_env(trained.model_path.parent, trained.policy_path, tmp_path / "var")
    predictions, policy = tmp_path / "pred.jsonl", tmp_path / "policy-new.json"
    for argv in (["score", "--data", str(exported), "--out", str(predictions)],
                 ["calibrate", "--predictions", str(predictions), "--labels", str(exported),
                  "--alpha", "0.15", "--n-boot", "200", "--out", str(policy)]):
        done = subprocess.run([sys.executable, "-m", "router", *argv], env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads(policy.read_text())
    assert written["guarantee"]["upper_bound"] <= 0.15
    assert written["data"]["n_certify"] > 0


def test_bad_label_posts_are_refused_and_write_nothing(
        console_server: ConsoleServer, sign_in: Callable[[str], Page],
        new_requests: dict[str, str]) -> None:
    page = sign_in("lead-cy")
    page.goto("/console/labels")
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    item_id = next(iter(new_requests))
    origin = {"Origin": console_server.url}
    engine = make_engine(console_server.database_url)
    store = LabelDB(engine)
    before = (len(store.events()), len(store.adjudications()))
    for form, status, code in (
        ({"item_id": item_id, "label": "refnd"}, 422, "bad_label"),
        ({"item_id": "no-such-request", "label": "refund"}, 404, "unknown_item"),
        ({"label": "refund"}, 422, "invalid_form"),
    ):
        answer = page.request.post("/console/labels", form={"csrf_token": token, **form},
                                   headers=origin, max_redirects=0)
        assert answer.status == status and f'data-code="{code}"' in answer.text(), form
    forged = page.request.post("/console/labels", form={"item_id": item_id, "label": "refund"},
                               headers=origin, max_redirects=0)
    assert forged.status == 403 and 'data-code="console_csrf"' in forged.text()
    bad_route = page.request.post("/console/labels/adjudication", headers=origin,
                                  form={"csrf_token": token, "item_id": item_id,
                                        "route": "skip"}, max_redirects=0)
    assert bad_route.status == 422 and 'data-code="bad_route"' in bad_route.text()
    assert (len(store.events()), len(store.adjudications())) == before
    engine.dispose()


def test_only_labellers_open_the_labelling_pages(sign_in: Callable[[str], Page]) -> None:
    for person in ("agent-ana", "admin-ada"):
        page = sign_in(person)
        assert "Labelling" not in page.locator("header nav").inner_text()
        for path in ("/console/labels", "/console/labels/agreement",
                     "/console/labels/export/labels.jsonl"):
            answer = page.goto(path)
            assert answer is not None and answer.status == 403, (person, path)

