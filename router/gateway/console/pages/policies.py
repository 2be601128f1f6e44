"""The policy versions: each with its guarantee and held-out figures; publish and rollback
for admins, each in two steps (review, then confirm).

Admins and supervisors read the page (supervisors see no form); only an admin's POST
reaches a change, after its Origin and CSRF token were checked (`CheckedForm`). A
publish or rollback calls the same use case as `POST /v1/admin/policy` and
`/v1/admin/policy/rollback` (`PolicyFollower.publish`, `.rollback`), so it is checked
the same way and recorded under the session's key name. The confirmation carries the
version that was active when the admin reviewed the change (`expect_active`): if
someone changed it meanwhile, the change is refused with 409 `policy_changed` and
nothing is written, so nobody replaces a version they never saw.

A new policy is pasted as the JSON `calibrate` writes (a form field: the console reads
URL-encoded forms only, up to `max_body_bytes`), or an earlier version is published
again from its row.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from router.app.policy_views import PolicyVersionsOut, read_policy_versions
from router.app.services import Services
from router.contracts import Policy
from router.errors import Conflict, InvalidInput
from router.gateway.console.deps import AdminSession, CheckedForm, ReaderSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.forms import Form
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.deps import ServicesDep
from router.storage.policy_store import PolicySwitch, parse_policy

router = APIRouter(route_class=ConsoleRoute)


def _versions(services: Services) -> PolicyVersionsOut:
    return read_policy_versions(services.policies.db,
                                served_version=services.router.primary.policy.version)


def _candidate(services: Services, form: Form) -> Policy:
    """The policy a publish form names: pasted JSON, or a stored version by name."""
    pasted = form.get("policy", "").strip()
    if pasted:
        return parse_policy(pasted)
    version = form.get("version", "").strip()
    if not version:
        raise InvalidInput("paste a policy's JSON or choose a stored version",
                           code="invalid_form")
    return services.policies.db.load_version(version)


def _done(request: Request, switch: PolicySwitch) -> Response:
    query = urlencode({"done": switch.action, "version": switch.policy.version,
                       "previous": switch.previous_version or ""})
    return RedirectResponse(f"{console_base(request)}/policies?{query}", status_code=303,
                            headers=SECURITY_HEADERS)


@router.get("/policies")
async def policies(request: Request, session: ReaderSession, services: ServicesDep,
                   done: str = "", version: str = "", previous: str = "") -> Response:
    """Every version, newest first; the forms only for an admin."""
    view = await run_in_threadpool(_versions, services)
    done_note = {"action": done, "version": version, "previous": previous} if done in (
        "publish", "rollback") else None
    return render(request, "policies.html", view=view, can_change="admin" in session.roles,
                  done=done_note, refused=None, pasted="")


@router.post("/policies/publish/review")
async def review_publish(request: Request, session: AdminSession, form: CheckedForm,
                         services: ServicesDep) -> Response:
    """Step one: the policy checked as a publish checks it; nothing written."""
    def check() -> tuple[Policy, PolicyVersionsOut]:
        candidate = _candidate(services, form)
        services.policies.accept(candidate)
        return candidate, _versions(services)

    try:
        candidate, view = await run_in_threadpool(check)
    except (InvalidInput, Conflict) as refused:  # InvalidPolicy is an InvalidInput
        # The page again, with why and the pasted text kept, so it can be corrected.
        view = await run_in_threadpool(_versions, services)
        return render(request, "policies.html", status_code=refused.status_code, view=view,
                      can_change=True, done=None, refused=refused,
                      pasted=form.get("policy", ""))
    pasted = bool(form.get("policy", "").strip())
    return render(request, "policy_confirm.html", action="publish", view=view,
                  active=view.active, target=None, candidate=candidate,
                  stored_version=None if pasted else candidate.version,
                  candidate_json=candidate.model_dump_json(indent=2) if pasted else "")


@router.post("/policies/publish")
async def publish(request: Request, session: AdminSession, form: CheckedForm,
                  services: ServicesDep) -> Response:
    """Step two: publish, if the version active at review time still is."""
    expect = form.require("expect_active")

    def change() -> PolicySwitch:
        return services.policies.publish(_candidate(services, form), by=session.key_name,
                                         expect_active=expect)

    return _done(request, await run_in_threadpool(change))


@router.get("/policies/rollback")
async def review_rollback(request: Request, session: AdminSession,
                          services: ServicesDep) -> Response:
    """Step one: what a rollback would re-activate."""
    view = await run_in_threadpool(_versions, services)
    return render(request, "policy_confirm.html", action="rollback", view=view,
                  active=view.active, target=view.version(view.rollback_to), candidate=None,
                  stored_version=None, candidate_json="")


@router.post("/policies/rollback")
async def rollback(request: Request, session: AdminSession, form: CheckedForm,
                   services: ServicesDep) -> Response:
    """Step two: roll back, if the version active at review time still is."""
    expect = form.require("expect_active")
    switch = await run_in_threadpool(lambda: services.policies.rollback(
        by=session.key_name, expect_active=expect))
    return _done(request, switch)
