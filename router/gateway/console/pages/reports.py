"""The calibration report of the served policy: the figures and plots of
`support-router report --part test`, on the configured labelled data.

Admins and supervisors read it. The report is rendered by `calibration.report`'s own
autoescaped templates (router/app/active_report.py) and inserted here as one block of
markup: the only console value not escaped by the console's templates, because it was
escaped by the report's. Its plots are inline `data:` images (the CSP allows `data:`
images and nothing else from outside the gateway).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from router.gateway.console.deps import ReaderSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import render
from router.gateway.deps import ServicesDep

router = APIRouter(route_class=ConsoleRoute)


REFRESH_S = 2
"""While the report renders, the page reloads itself this often (a `Refresh` header: the
CSP allows no script)."""


@router.get("/reports")
async def reports(request: Request, session: ReaderSession, services: ServicesDep) -> Response:
    """The served policy's report (rendered once per version and worker, then kept); while
    it renders, a page that says so and reloads."""
    bound = services.router.primary
    report = await run_in_threadpool(services.reports.ready, bound.model, bound.policy)
    if report is None:
        return render(request, "reports.html", report=None, policy=bound.policy,
                      report_html="", refresh_s=REFRESH_S,
                      headers={"Refresh": str(REFRESH_S)})
    return render(request, "reports.html", report=report, policy=bound.policy,
                  report_html=Markup(report.html),  # noqa: S704 - escaped by calibration.report
                  refresh_s=REFRESH_S)
