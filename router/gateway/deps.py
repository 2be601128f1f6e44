"""What every request handler needs, built once per app and declared as `Annotated` aliases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy import Engine

from router.service import RouterService
from router.settings import Settings


@dataclass
class Services:
    settings: Settings
    engine: Engine
    router: RouterService
    desk: Any = None
    """The handlers' entry point (`handlers.desk.SupportDesk`), built from the same engine."""
    ready: bool = False


def get_services(request: Request) -> Services:
    return request.app.state.services


ServicesDep = Annotated[Services, Depends(get_services)]
