"""The console's stylesheet and script, from the package (no CDN: works offline)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

from router.errors import NotFound
from router.gateway.console.errors import ConsoleRoute

STATIC_PACKAGE = "router.gateway.console"
STATIC_NAMES = frozenset({"console.css"})
"""Add a file here and in `static/` (a page's script, say) to serve it."""
MEDIA_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
# Revalidated after an hour with the ETag FileResponse sends: a new release shows soon.
CACHE_CONTROL = "public, max-age=3600"

router = APIRouter(route_class=ConsoleRoute)


def static_path(name: str) -> Path:
    path = resources.files(STATIC_PACKAGE) / "static" / name
    if not isinstance(path, Path):  # a zipped install: not how pip installs
        raise FileNotFoundError(f"{STATIC_PACKAGE} is not installed as files: {path}")
    return path


@router.get("/static/{name}")
def static_file(name: str) -> FileResponse:
    """One of the console's files; any other name is 404 `not_found`."""
    if name not in STATIC_NAMES:
        raise NotFound("no such console file")
    return FileResponse(static_path(name), media_type=MEDIA_TYPES[Path(name).suffix],
                        headers={"Cache-Control": CACHE_CONTROL,
                                 "X-Content-Type-Options": "nosniff"})
