"""The API docs pages: Swagger UI at `/docs`, ReDoc at `/redoc`, both working offline.

FastAPI's own pages load their JavaScript, CSS, favicon and fonts from CDNs, so on a
network without the internet they stay blank. These pages are FastAPI's, built with
`get_swagger_ui_html` / `get_redoc_html`, but every asset comes from the gateway itself
(`/docs/assets/<file>`), taken from the files the `fastapi-offline` package ships. Swagger
UI's validator badge (a call to validator.swagger.io) is off for the same reason.

Like `/openapi.json` these routes declare no role and stay open; they are not in the
OpenAPI schema.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from router.errors import NotFound

ASSETS_PACKAGE = "fastapi_offline"
ASSET_NAMES = frozenset(
    {"swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"}
)
ASSETS_PREFIX = "/docs/assets"
# The files change only with the fastapi-offline version; after a day browsers revalidate
# with the ETag that FileResponse sends.
CACHE_CONTROL = "public, max-age=86400"
SWAGGER_UI_PARAMETERS: dict[str, Any] = {"validatorUrl": None}

router = APIRouter(include_in_schema=False)


def _asset_url(request: Request, name: str) -> str:
    return f"{request.scope.get('root_path', '')}{ASSETS_PREFIX}/{name}"


def _openapi_url(request: Request) -> str:
    app: FastAPI = request.app
    return f"{request.scope.get('root_path', '')}{app.openapi_url}"


def asset_path(name: str) -> Path:
    """The file behind `/docs/assets/<name>`, from the fastapi-offline package."""
    path = resources.files(ASSETS_PACKAGE) / "static" / name
    if not isinstance(path, Path):  # a zipped install: not served, and not how pip installs
        raise FileNotFoundError(f"{ASSETS_PACKAGE} is not installed as files: {path}")
    return path


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI on this gateway's OpenAPI schema."""
    return get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=_asset_url(request, "swagger-ui-bundle.js"),
        swagger_css_url=_asset_url(request, "swagger-ui.css"),
        swagger_favicon_url=_asset_url(request, "favicon.png"),
        swagger_ui_parameters=SWAGGER_UI_PARAMETERS | (request.app.swagger_ui_parameters or {}),
    )


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc on this gateway's OpenAPI schema (system fonts, no Google Fonts)."""
    return get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=_asset_url(request, "redoc.standalone.js"),
        redoc_favicon_url=_asset_url(request, "favicon.png"),
        with_google_fonts=False,
    )


@router.get(ASSETS_PREFIX + "/{name}")
def docs_asset(name: str) -> FileResponse:
    """One of the docs pages' files; any other name is 404 `not_found`."""
    if name not in ASSET_NAMES:
        raise NotFound("no such docs asset")
    return FileResponse(asset_path(name), headers={"Cache-Control": CACHE_CONTROL})
