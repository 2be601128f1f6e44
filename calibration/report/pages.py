"""The report pages' Jinja2 environment: templates shipped in the package, autoescaped.

Every value a page shows (customer text, ids, labels, version names) is escaped by the
template engine, not by hand, and the pages share one layout and stylesheet
(`templates/base.html`). A missing value is an error, not an empty cell.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def _environment() -> Environment:
    environment = Environment(loader=PackageLoader("calibration.report", "templates"),
                              autoescape=True, undefined=StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.globals["zip"] = zip
    return environment


def render_page(template: str, **context: Any) -> str:
    """`templates/<template>` rendered with `context`."""
    return _environment().get_template(template).render(**context)
