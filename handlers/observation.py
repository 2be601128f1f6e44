"""The service observation: what every service call and handler step returns.

An observation says what happened (`status`, a stable `code`, a one-line `summary`),
what the caller may do next (`retry`, `retry_after_s`, `stop`, `next_actions`), and the
facts the service produced (`artifacts`: ids, amounts, receipts). Replies to customers
are templates filled from these fields, so everything a reply states comes from here.

An error always says whether to retry and whether to stop: `fail` takes both as
required keywords.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ObservationStatus = Literal["success", "warning", "error"]


class Observation(BaseModel):
    model_config = ConfigDict(frozen=True)

    status: ObservationStatus
    code: str
    summary: str
    hint: str | None = None
    retry: bool = False
    retry_after_s: float | None = None
    stop: bool = False
    next_actions: list[str] = Field(default_factory=list)
    artifacts: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status != "error"


def success(code: str, summary: str, *, next_actions: list[str] | None = None,
            **artifacts: Any) -> Observation:
    """The call did what was asked."""
    return Observation(status="success", code=code, summary=summary,
                       next_actions=next_actions or [], artifacts=artifacts)


def warning(code: str, summary: str, *, hint: str | None = None,
            next_actions: list[str] | None = None, **artifacts: Any) -> Observation:
    """The call completed, but not everything was done (e.g. waiting for a supervisor)."""
    return Observation(status="warning", code=code, summary=summary, hint=hint,
                       next_actions=next_actions or [], artifacts=artifacts)


def fail(code: str, summary: str, *, retry: bool, stop: bool, hint: str | None = None,
         retry_after_s: float | None = None, next_actions: list[str] | None = None,
         **artifacts: Any) -> Observation:
    """The call did nothing; the caller is told whether retrying or stopping is right."""
    return Observation(status="error", code=code, summary=summary, hint=hint, retry=retry,
                       retry_after_s=retry_after_s, stop=stop,
                       next_actions=next_actions or [], artifacts=artifacts)
