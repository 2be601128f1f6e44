"""`/docs` and `/redoc` load nothing from outside the gateway, so they work offline."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient


class _Assets(HTMLParser):
    """Every `<script src>` and `<link href>` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


def _asset_urls(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return parser.urls


@pytest.mark.parametrize(
    ("page", "expected"),
    [("/docs", {"swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"}),
     ("/redoc", {"redoc.standalone.js", "favicon.png"})],
)
def test_every_asset_of_the_page_is_served_by_the_gateway(
    client: TestClient, page: str, expected: set[str]
) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    urls = _asset_urls(response.text)
    assert {url.rsplit("/", 1)[-1] for url in urls} == expected
    # No CDN, no Google Fonts, no validator badge: no absolute URL anywhere in the page.
    assert "http://" not in response.text and "https://" not in response.text
    assert "/openapi.json" in response.text
    for url in urls:
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("", "") and url.startswith("/"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 1000, url  # the real file, not an empty body


@pytest.mark.parametrize(
    ("name", "media_type"),
    [("swagger-ui-bundle.js", "javascript"), ("swagger-ui.css", "text/css"),
     ("redoc.standalone.js", "javascript"), ("favicon.png", "image/png")],
)
def test_assets_have_their_media_type(client: TestClient, name: str, media_type: str) -> None:
    response = client.get(f"/docs/assets/{name}")
    assert response.status_code == 200
    assert media_type in response.headers["content-type"]
    assert "max-age" in response.headers["cache-control"]


@pytest.mark.parametrize(
    "path",
    ["/docs/assets/core.py", "/docs/assets/..%2F__init__.py", "/docs/assets/%2e%2e",
     "/docs/assets/swagger-ui-bundle.js.map"],
)
def test_only_the_docs_files_are_served(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_the_docs_routes_are_not_in_the_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [path for path in paths if path.startswith(("/docs", "/redoc"))]
