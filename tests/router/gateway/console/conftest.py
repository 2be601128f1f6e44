"""The console through the real app (TestClient, lifespan, middleware) on a SQLite file,
with one API key per role and a browser-like client that signs in through the form."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from router.access import ROLES, ApiKey, hash_key, new_key
from router.gateway.app import create_app
from router.settings import Settings

KEYS = {role: new_key() for role in ROLES}
NAMES = {role: f"{role}-1" for role in ROLES}
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_CODE = re.compile(r'data-code="([^"]+)"')


def entries() -> list[ApiKey]:
    return [ApiKey(name=NAMES[role], sha256=hash_key(key), roles=(role,))
            for role, key in KEYS.items()]


@pytest.fixture
def keyed_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"api_keys": entries(), "rate_limit_per_s": 0})


@pytest.fixture
def console(keyed_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(keyed_settings)) as client:
        yield client


def csrf_of(html: str) -> str:
    """The first form's CSRF token on a page."""
    found = _CSRF.search(html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def codes_of(html: str) -> list[str]:
    """The stable codes a page shows (`data-code`), in page order."""
    return _CODE.findall(html)


def sign_in(client: TestClient, role: str) -> str:
    """Sign `client` in through the form with `role`'s key; the session's CSRF token."""
    form = client.get("/console/sign-in")
    answer = client.post("/console/sign-in", data={"csrf_token": csrf_of(form.text),
                                                   "key": KEYS[role]},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return csrf_of(client.get("/console/").text)
