"""The running experiment: its variants, configured and observed shares, the sample-ratio
check and live figures per variant, as `support-router ab-report` computes them.

Admins only, as `GET /v1/admin/experiments` is. The figures come from the shared
database (the experiments table and the decision log), whichever worker answers; with
no experiment running the page says so and lists the earlier ones.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from router.app.experiment_views import read_experiments
from router.gateway.console.deps import AdminSession
from router.gateway.console.errors import ConsoleRoute
from router.gateway.console.templating import render
from router.gateway.deps import ServicesDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/experiments")
async def experiments(request: Request, session: AdminSession,
                      services: ServicesDep) -> Response:
    """The running experiment with its live figures, or the empty state; every start."""
    page = await run_in_threadpool(read_experiments, services.experiments.db, services.log)
    return render(request, "experiments.html", page=page)
