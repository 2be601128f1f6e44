"""The console in a real browser: Playwright driving Debian's Chromium, against a gateway
started as a real process (`support-router serve`) with one API key per person.

Chromium is launched by its executable path (`/usr/bin/chromium`, or
`SUPPORT_ROUTER_TEST_CHROMIUM`): no browser is downloaded. Without it the tests skip with
the reason (`pytest -ra` lists it); with `CI` set they fail instead, as the PostgreSQL
tests do (tests/conftest.py), so CI cannot pass without having run them.

Fixtures and helpers the console's browser tests share:

- `console_server` (one per test module; `start_console_server` for more): the gateway,
  its `PEOPLE` keys configured, and `api(person)`, an HTTP client calling the API with
  that person's key;
- `browser` (one per module), `sign_in(person)` (a fresh browser context signed in
  through the sign-in form, its page returned; `open_signed_in` for another server),
  and `agent_page`, `supervisor_page`, `labeller_page`, `admin_page`, each a signed-in
  page;
- `screenshot(page, name)`: writes `docs/console/img/<name>.png`, which the docs show;
- `watch(page)`: records dialogs (alert/confirm/prompt) and page errors, so an escaping
  test can assert nothing ran.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Page, sync_playwright

from router.access import hash_key, new_key
from router.app.training import TrainResult
from tests.conftest import in_ci
from tests.paths import REPO_ROOT
from tests.servers import GatewayProcess, gateway_env

CHROMIUM = os.environ.get("SUPPORT_ROUTER_TEST_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = REPO_ROOT / "docs" / "console" / "img"
VIEWPORT = {"width": 1280, "height": 800}
START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Person:
    """Someone (or something) holding an API key: its name in the audit trail, its roles."""

    name: str
    roles: tuple[str, ...]
    key: str = field(default_factory=new_key, repr=False)


PEOPLE: dict[str, Person] = {p.name: p for p in (
    Person("chat-gateway", ("gateway",)),
    Person("agent-ana", ("agent",)),
    Person("agent-bo", ("agent",)),
    Person("supervisor-maria", ("supervisor",)),
    Person("supervisor-sam", ("supervisor",)),
    Person("admin-ada", ("admin",)),
    Person("labeller-ana", ("labeller",)),
    Person("labeller-bo", ("labeller",)),
    Person("lead-cy", ("labeller",)),
)}
"""Every key the test gateway knows; a test picks people by name."""
BY_ROLE = {"gateway": "chat-gateway", "agent": "agent-ana",
           "supervisor": "supervisor-maria", "labeller": "labeller-ana", "admin": "admin-ada"}
"""One person per role, for tests that only care about the role."""


def api_keys_setting(people: dict[str, Person] = PEOPLE) -> str:
    """`SUPPORT_ROUTER_API_KEYS` for `people`: names, digests and roles, never keys."""
    return json.dumps([{"name": p.name, "sha256": hash_key(p.key), "roles": list(p.roles)}
                       for p in people.values()])


@dataclass
class ConsoleServer:
    gateway: GatewayProcess
    url: str
    database_url: str

    def api(self, person: str) -> httpx.Client:
        """A client calling the API as `person` (closed by the caller)."""
        return httpx.Client(base_url=self.url, timeout=30,
                            headers={"X-API-Key": PEOPLE[person].key})


@contextmanager
def start_console_server(trained: TrainResult, folder: Path, *, workers: int = 1,
                         settings: dict[str, str] | None = None) -> Iterator[ConsoleServer]:
    """`support-router serve` with `PEOPLE`'s keys, on its own SQLite file in `folder`,
    no rate limit, plus `settings` (`Settings` names to values); stopped on exit."""
    models = folder / "models"
    models.mkdir(parents=True)
    (models / trained.model_path.name).symlink_to(trained.model_path)
    shutil.copy(trained.policy_path, models / "policy.json")
    database_url = f"sqlite:///{folder / 'console.db'}"
    env = gateway_env(models, models / "policy.json", folder / "var",
                      database_url=database_url, api_keys=api_keys_setting(),
                      rate_limit_per_s="0",
                      **(settings or {}))
    with GatewayProcess() as gateway:
        url = gateway.start(env, ["--workers", str(workers)], folder / "serve.log")
        gateway.wait_ready(START_TIMEOUT_S)
        yield ConsoleServer(gateway, url, database_url)


@pytest.fixture(scope="module")
def console_server(trained: TrainResult, tmp_path_factory: pytest.TempPathFactory,
                   request: pytest.FixtureRequest) -> Iterator[ConsoleServer]:
    """One gateway for a test module, with the module's `GATEWAY_SETTINGS` (a dict of
    `Settings` names to values), if any (a module needing a fresh one per test overrides
    this fixture with `start_console_server`)."""
    with start_console_server(trained, tmp_path_factory.mktemp("console"),
                              settings=getattr(request.module, "GATEWAY_SETTINGS", None)
                              ) as server:
        yield server


def _chromium() -> str:
    if Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    reason = (f"no Chromium at {CHROMIUM} (apt-get install chromium, or set "
              "SUPPORT_ROUTER_TEST_CHROMIUM)")
    if in_ci():
        pytest.fail(f"CI is set, so the browser tests are mandatory: {reason}", pytrace=False)
    pytest.skip(f"{reason}; set CI=1 to fail instead")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright (skipped or failed without it).

    One per module, not per session: while Playwright's sync API is open it keeps an event
    loop running in the main thread, so a later test in the same process that calls
    `asyncio.run` would fail; closing it with the module ends that loop."""
    executable = _chromium()
    # Chromium's sandbox cannot start as root (CI containers run as root).
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=args,
                                              headless=True)
        yield launched
        launched.close()


def open_signed_in(browser: Browser, server: ConsoleServer, person: str) -> Page:
    """A page in a new browser context, signed in through the form as `person`, on the
    console's home; the caller closes `page.context`."""
    context = browser.new_context(viewport=VIEWPORT, base_url=server.url)
    page = context.new_page()
    page.goto("/console/sign-in")
    page.fill("#key", PEOPLE[person].key)
    page.click("button[type=submit]")
    page.wait_for_url("**/console/")
    return page


@pytest.fixture
def sign_in(browser: Browser,
            console_server: ConsoleServer) -> Iterator[Callable[[str], Page]]:
    """`sign_in(person)`: a new browser context (its own cookies), signed in through the
    form as `person`; its page, on the console's home. Every context is closed after."""
    contexts: list[BrowserContext] = []

    def open_as(person: str) -> Page:
        page = open_signed_in(browser, console_server, person)
        contexts.append(page.context)
        return page

    yield open_as
    for context in contexts:
        context.close()


@pytest.fixture
def agent_page(sign_in: Callable[[str], Page]) -> Page:
    return sign_in(BY_ROLE["agent"])


@pytest.fixture
def supervisor_page(sign_in: Callable[[str], Page]) -> Page:
    return sign_in(BY_ROLE["supervisor"])


@pytest.fixture
def labeller_page(sign_in: Callable[[str], Page]) -> Page:
    return sign_in(BY_ROLE["labeller"])


@pytest.fixture
def admin_page(sign_in: Callable[[str], Page]) -> Page:
    return sign_in(BY_ROLE["admin"])


def screenshot(page: Page, name: str) -> Path:
    """The visible page as `docs/console/img/<name>.png` (viewport-sized, so small)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


@dataclass
class PageWatch:
    """What a page did that it must not: dialogs opened and uncaught script errors."""

    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def watch(page: Page) -> PageWatch:
    """Start recording `page`'s dialogs (dismissed at once) and page errors."""
    seen = PageWatch()

    def on_dialog(dialog: Dialog) -> None:
        seen.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    return seen
