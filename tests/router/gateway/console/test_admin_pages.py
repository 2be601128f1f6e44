"""The policies, experiments and reports pages through the real app, without a browser:
who opens which, and that a change is refused before it reaches the policy store unless
an admin's session sends it with its CSRF token (the browser suite,
tests/e2e/browser/test_admin_pages.py, drives the same pages in Chromium)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from router.gateway.app import create_app
from router.settings import Settings
from router.storage.db import make_engine
from router.storage.policy_db import policy_active, policy_history, policy_versions
from tests.router.gateway.console.conftest import KEYS, codes_of, csrf_of, sign_in

PAGES = ("/console/policies", "/console/experiments", "/console/reports")
OPENS = {
    "admin": {"/console/policies", "/console/experiments", "/console/reports"},
    "supervisor": {"/console/policies", "/console/reports"},
    "agent": set(),
}


@pytest.fixture
def keyed_settings(keyed_settings: Settings, tmp_path: Path) -> Settings:
    """A private copy of the policy file: a publish rewrites it, and the trained one is
    shared by every test of the session."""
    policy = tmp_path / "policy.json"
    shutil.copy(keyed_settings.policy_path, policy)
    return keyed_settings.model_copy(update={"policy_path": policy})


@pytest.fixture
def console(keyed_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(keyed_settings)) as client:
        yield client


def _stored(settings: Settings) -> dict[str, list[tuple[object, ...]]]:
    engine = make_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            return {t.name: [tuple(r) for r in conn.execute(select(t))]
                    for t in (policy_versions, policy_active, policy_history)}
    finally:
        engine.dispose()


def _artifact(settings: Settings, **changes: object) -> str:
    return json.dumps({**json.loads(settings.policy_path.read_text()), **changes})


@pytest.mark.parametrize("role", sorted(OPENS))
def test_each_role_opens_only_its_pages(console: TestClient, role: str) -> None:
    sign_in(console, role)
    for path in PAGES:
        answer = console.get(path)
        if path in OPENS[role]:
            assert answer.status_code == 200, (path, answer.text)
        else:
            assert (answer.status_code, codes_of(answer.text)[:1]) == (
                403, ["console_forbidden"]), path
    if role == "supervisor":
        assert "publish-form" not in console.get("/console/policies").text


def test_a_publish_needs_an_admin_session_and_its_token(
        console: TestClient, keyed_settings: Settings) -> None:
    before = _stored(keyed_settings)
    active = before["policy_active"][0][1]
    body = {"expect_active": active, "policy": _artifact(keyed_settings, version="forged")}
    token = sign_in(console, "supervisor")
    answer = console.post("/console/policies/publish", data={**body, "csrf_token": token})
    assert (answer.status_code, codes_of(answer.text)[:1]) == (403, ["console_forbidden"])

    console.cookies.clear()
    token = sign_in(console, "admin")
    answer = console.post("/console/policies/publish", data=body)  # no token
    assert (answer.status_code, codes_of(answer.text)[:1]) == (403, ["console_csrf"])
    assert _stored(keyed_settings) == before

    stale = {**body, "expect_active": "someone-elses", "csrf_token": token}
    answer = console.post("/console/policies/publish", data=stale)
    assert (answer.status_code, codes_of(answer.text)[:1]) == (409, ["policy_changed"])
    assert _stored(keyed_settings) == before


def test_review_then_confirm_publishes_under_the_admins_name(
        console: TestClient, keyed_settings: Settings) -> None:
    token = sign_in(console, "admin")
    policy = _artifact(keyed_settings, version="reviewed", threshold=0.9)
    before = _stored(keyed_settings)
    review = console.post("/console/policies/publish/review",
                          data={"csrf_token": token, "policy": policy})
    assert review.status_code == 200 and "Publish <code>reviewed</code>?" in review.text
    assert _stored(keyed_settings) == before  # the review wrote nothing
    active = before["policy_active"][0][1]
    assert f'name="expect_active" value="{active}"' in review.text
    done = console.post("/console/policies/publish", follow_redirects=False,
                        data={"csrf_token": csrf_of(review.text), "expect_active": active,
                              "policy": policy})
    assert done.status_code == 303
    assert done.headers["location"].startswith("/console/policies?done=publish")
    listed = console.get("/v1/admin/policy", headers={"X-API-Key": KEYS["admin"]}).json()
    assert (listed["active_version"], listed["history"][0]["by"]) == ("reviewed", "admin-1")



def test_a_broken_active_version_shows_and_can_be_replaced(
        console: TestClient, keyed_settings: Settings) -> None:
    """The page is for replacing a broken policy too: it lists the broken version with
    why, and a publish from it still works."""
    token = sign_in(console, "admin")
    review = console.post("/console/policies/publish/review", data={
        "csrf_token": token, "policy": _artifact(keyed_settings, version="soon-broken")})
    confirmed = console.post("/console/policies/publish", follow_redirects=False, data={
        "csrf_token": token, "expect_active": _expected_active(review.text),
        "policy": _artifact(keyed_settings, version="soon-broken")})
    assert confirmed.status_code == 303
    engine = make_engine(keyed_settings.resolved_database_url)
    try:
        with engine.begin() as conn:  # a hand edit breaks the active version
            conn.execute(update(policy_versions).where(policy_versions.c.version ==
                                                       "soon-broken")
                         .values(body=json.dumps({"version": "soon-broken"})))
    finally:
        engine.dispose()
    page = console.get("/console/policies")
    assert page.status_code == 200
    assert 'data-testid="unreadable-soon-broken"' in page.text
    assert "field &#39;model&#39;" in page.text
    fixed = _artifact(keyed_settings, version="fixed")
    done = console.post("/console/policies/publish", follow_redirects=False, data={
        "csrf_token": token, "expect_active": "soon-broken", "policy": fixed})
    assert done.status_code == 303
    assert "unreadable-soon-broken" in console.get("/console/policies").text  # still listed


def _expected_active(review_html: str) -> str:
    """The `expect_active` a review page carries."""
    found = re.search(r'name="expect_active" value="([^"]*)"', review_html)
    assert found
    return found.group(1)
