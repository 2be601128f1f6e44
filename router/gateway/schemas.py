"""Request and response shapes of the HTTP API (separate from the internal contracts)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from router.contracts import DecisionRoute

MAX_TEXT_CHARS = 8000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

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
            "control_characters", "text contains control characters (other than tab and newline)"
        )
    return text


CustomerText = Annotated[str, AfterValidator(_check_customer_text)]
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
