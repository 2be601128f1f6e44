"""The data team's pages: the labelling queue, agreement, adjudication and the export.

Each page parses its query or form, calls one `router.app.labelling` use case with the
session's key name as the labeller (or adjudicator), and renders a template; a POST
answers with a redirect (303) to the page to show next, so a reload never labels twice.
The queue shows one request at a time; the model's answer on it is shown only after
the label is given (the redirect names the item just labelled, and `reveal` answers only
for a labeller who labelled it). The keys of the terminal tool (`calibration.label`)
work on the page through `static/labels.js`; without JavaScript the buttons do the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from calibration.label import read_guide
from router.app.labelling import QUEUE_SAMPLES, QueueSample, export_jsonl
from router.contracts import ROUTES
from router.gateway.console.deps import CheckedForm, LabellerSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import SECURITY_HEADERS, console_base, render
from router.gateway.deps import ServicesDep
from router.packaged import data_path

router = APIRouter(route_class=ConsoleRoute)

KEYS: tuple[tuple[str, str, str], ...] = (
    ("refund", "r", "1"), ("account", "a", "2"), ("other", "o", "3"), ("unclear", "u", "4"))
"""(route, letter, digit): the terminal tool's keys (`calibration.label.LABEL_KEYS`)."""
SampleQuery = Annotated[QueueSample, Query()]


@cache
def _guide() -> str:
    return read_guide(data_path("LABELLING.md"))


def _to(request: Request, path: str, **query: str) -> RedirectResponse:
    suffix = f"?{urlencode(query)}" if query else ""
    return RedirectResponse(f"{console_base(request)}{path}{suffix}", status_code=303)


@router.get("/labels")
async def queue(request: Request, session: LabellerSession, services: ServicesDep,
                sample: SampleQuery = "uncertainty", revealed: str | None = None,
                undone: str | None = None) -> Response:
    """One request to label, the reveal of the one just labelled, the keys and the guide."""
    labelling = services.labelling
    waiting = await run_in_threadpool(labelling.queue, session.key_name, sample=sample)
    reveal = None if revealed is None else await run_in_threadpool(
        labelling.reveal, revealed, labeller=session.key_name)
    return render(request, "labels_queue.html", queue=waiting,
                  item=waiting.items[0] if waiting.items else None, reveal=reveal,
                  undone=undone, sample=sample, samples=QUEUE_SAMPLES, keys=KEYS,
                  guide=_guide())


@router.post("/labels")
async def label(request: Request, session: LabellerSession, services: ServicesDep,
                form: CheckedForm) -> Response:
    """Record the label (or skip) of the item on the form, then show the next one."""
    sample = _sample(form.get("sample", "uncertainty"))
    reveal = await run_in_threadpool(services.labelling.record, form.require("item_id"),
                                     labeller=session.key_name, label=form.require("label"))
    return _to(request, "/labels", sample=sample, revealed=reveal.item_id)


@router.post("/labels/undo")
async def undo(request: Request, session: LabellerSession, services: ServicesDep,
               form: CheckedForm) -> Response:
    """Withdraw this labeller's latest label or skip; that item comes back first."""
    sample = _sample(form.get("sample", "uncertainty"))
    item_id = await run_in_threadpool(services.labelling.undo, session.key_name)
    return _to(request, "/labels", sample=sample, undone=item_id or "")


@router.get("/labels/agreement")
async def agreement(request: Request, session: LabellerSession,
                    services: ServicesDep) -> Response:
    """Cohen's kappa and the confusion for every pair of labellers, and the disagreements."""
    pairs = await run_in_threadpool(services.labelling.agreements)
    splits = await run_in_threadpool(services.labelling.disagreements)
    return render(request, "labels_agreement.html", pairs=pairs, disagreements=splits,
                  routes=ROUTES)


@router.get("/labels/adjudication")
async def adjudication(request: Request, session: LabellerSession, services: ServicesDep,
                       done: str | None = None) -> Response:
    """The disagreements to resolve, one form each; the resolved ones below."""
    splits = await run_in_threadpool(services.labelling.disagreements)
    return render(request, "labels_adjudication.html", routes=ROUTES, done=done,
                  open=[s for s in splits if s.adjudication is None],
                  resolved=[s for s in splits if s.adjudication is not None])


@router.post("/labels/adjudication")
async def adjudicate(request: Request, session: LabellerSession, services: ServicesDep,
                     form: CheckedForm) -> Response:
    """Resolve one item to the chosen route, recorded under the session's key name."""
    item_id = form.require("item_id")
    await run_in_threadpool(services.labelling.adjudicate, item_id, route=form.require("route"),
                            adjudicator=session.key_name, note=form.get("note", "").strip())
    return _to(request, "/labels/adjudication", done=item_id)


@router.get("/labels/export")
async def export_page(request: Request, session: LabellerSession,
                      services: ServicesDep) -> Response:
    """What the export holds (per resolution, and what is left out) and its download."""
    export = await run_in_threadpool(services.labelling.export)
    return render(request, "labels_export.html", export=export)


@router.get("/labels/export/labels.jsonl")
async def export_file(session: LabellerSession, services: ServicesDep,
                      redact: bool = False) -> Response:
    """The final labels as JSONL (`calibration.data.load_labelled`'s format), a download."""
    export = await run_in_threadpool(services.labelling.export, redact_text=redact)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"labels-{stamp}{'-redacted' if redact else ''}.jsonl"
    return Response(export_jsonl(export), media_type="application/jsonl; charset=utf-8",
                    headers=SECURITY_HEADERS | {
                        "Content-Disposition": f'attachment; filename="{name}"'})


def _sample(value: str) -> str:
    """The form's sample if it is one, else the default (it only picks the next page)."""
    return value if value in QUEUE_SAMPLES else "uncertainty"
