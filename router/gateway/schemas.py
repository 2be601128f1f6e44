"""Request and response shapes of the HTTP API (separate from the internal contracts)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from router.contracts import DecisionRoute

MAX_TEXT_CHARS = 8000
# C0 controls except tab, newline and carriage return; DEL; and the C1 controls, which are
# as invisible (and as able to confuse a terminal or a log reader) as the C0 ones.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# Validation error types that the error handler reports as their own stable codes.
CUSTOM_ERROR_CODES = frozenset({"empty_text", "control_characters", "text_too_long"})


def _check_customer_text(text: str) -> str:
    if not text.strip():
        raise PydanticCustomError("empty_text", "text is empty or only whitespace")
    if len(text) > MAX_TEXT_CHARS:
        raise PydanticCustomError(
            "text_too_long",
            "text has {n} characters; the limit is {limit}",
            {"n": len(text), "limit": MAX_TEXT_CHARS},
        )
    if _CONTROL.search(text):
        raise PydanticCustomError(
            "control_characters",
            "text contains control characters (other than tab, newline and carriage return)",
        )
    return text


def _as_utc(value: datetime) -> datetime:
    """Our timestamps are UTC, but SQLite hands them back naive; a timestamp without an
    offset is not an RFC 3339 `date-time`, which is what the OpenAPI schema promises."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDateTime = Annotated[datetime, AfterValidator(_as_utc)]

CustomerText = Annotated[
    str,
    AfterValidator(_check_customer_text),
    # Documented for clients; enforced by the validator above with its own error codes.
    Field(json_schema_extra={"minLength": 1, "maxLength": MAX_TEXT_CHARS}),
]
Identifier = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:@-]+$")]


class RouteIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"text": "My teapot from order O-1001 arrived broken, please refund it."},
                {"text": "stop sending me newsletters", "customer": "A-103"},
            ]
        },
    )

    text: CustomerText
    case_id: Identifier | None = None
    customer: Annotated[str, Field(min_length=1, max_length=254)] | None = None
    kind: DecisionRoute | None = Field(
        default=None, description="A request kind the calling system already knows (form field)."
    )


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. `empty_text`, `not_found`.")
    message: str = Field(description="What was wrong, for a person; never contains secrets.")
    request_id: str = Field(description="The request's id, also in the `X-Request-ID` header.")


class ErrorOut(BaseModel):
    """The one error shape of every 4xx/5xx answer (see `router.gateway.errors`)."""

    error: ErrorDetail
