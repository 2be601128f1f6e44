"""Browser forms: URL-encoded bodies read without a multipart dependency.

The request-limits middleware has already bounded the body's size and checked that it is
`application/x-www-form-urlencoded` UTF-8 (router/gateway/middleware/body_limits.py), so
parsing here cannot be made to read more than `max_body_bytes`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import parse_qs

from fastapi import Request

from router.errors import InvalidInput

MAX_FIELDS = 64


class Form(Mapping[str, str]):
    """A form's fields, first value of each; `form.get("note", "")` as a dict."""

    def __init__(self, fields: dict[str, str]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> str:
        return self._fields[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def require(self, name: str) -> str:
        """The field's value, or `InvalidInput` naming the missing field."""
        value = self._fields.get(name)
        if value is None:
            raise InvalidInput(f"the form has no field {name!r}", code="invalid_form")
        return value


def parse_form(body: bytes) -> Form:
    """The fields of a URL-encoded body (pure)."""
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          max_num_fields=MAX_FIELDS, errors="strict")
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInput(f"the form could not be read: {type(exc).__name__}",
                           code="invalid_form") from None
    return Form({name: values[0] for name, values in parsed.items()})


async def read_form(request: Request) -> Form:
    """The request's form, parsed once per request."""
    cached = getattr(request.state, "console_form", None)
    if cached is None:
        cached = parse_form(await request.body())
        request.state.console_form = cached
    return cached
