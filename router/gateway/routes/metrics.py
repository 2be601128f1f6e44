"""`GET /metrics`: Prometheus exposition of `router.telemetry.metrics` (all workers together).

Unauthenticated on purpose, like `/healthz`: scrapers rarely carry API keys, and nothing
here identifies a customer (labels are route templates, routes, reasons, backends and
model names). Restrict it at the network (bind loopback, or firewall the scrape port)
where the numbers themselves are sensitive.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from router.telemetry.metrics import render

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """The Prometheus text format; a sync endpoint so rendering (and the drift gauges'
    refresh, `router.app.drift.DriftGauges`) runs off the event loop."""
    services = getattr(request.app.state, "services", None)
    if services is not None:  # None while a missing model trains: nothing to compare yet
        services.drift.refresh_if_due()
    body, content_type = render()
    return Response(body, media_type=content_type)
