"""Request and response shapes of the desk endpoints: messages, approvals and cases."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from router.contracts import Decision, DecisionRoute
from router.gateway.schemas import CustomerText, Identifier, UtcDateTime

SupervisorName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]+$")]


class MessageIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "text": "Hi, this is ana.novak@example.com. My teapot (order O-1001) arrived "
                    "broken. Please refund the full amount."
                },
                {"text": "It's Gdansk, 80-002, Poland.", "case_id": "c-0123456789abcdef"},
            ]
        },
    )

    text: CustomerText
    case_id: Identifier | None = Field(
        default=None, description="Continue this case; omit to open a new one."
    )
    customer: Annotated[str, Field(min_length=1, max_length=254)] | None = Field(
        default=None,
        description="The customer the calling system authenticated (account id or e-mail): "
        "a signed-in chat's user, a mail system's verified sender. Trusted as proven, so "
        "send it only for customers your channel authenticated; an e-mail in `text` is "
        "only a claim, verified with a one-time code before any change. A case keeps its "
        "first customer: another one here is `customer_mismatch` (409).",
    )
    kind: DecisionRoute | None = Field(
        default=None,
        description="A request kind the calling system already knows (form "
        "field); code rules route by it instead of the model.",
    )


class MessageOut(BaseModel):
    case_id: str
    decision: Decision
    route: str
    status: str
    reply: str
    actions: list[dict[str, Any]]


class ApprovalDecisionIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"decision": "approve", "supervisor": "maria"}]},
    )

    decision: Annotated[str, Field(max_length=32)] = Field(description="approve | reject")
    supervisor: SupervisorName
    note: Annotated[str, Field(max_length=1000)] = Field(
        default="", description="For colleagues, kept in the case's history; the customer "
        "does not see it.")


class ApprovalOut(BaseModel):
    operation: str
    case_id: str
    decision: str
    operation_status: str
    refund_id: int | None
    replayed: bool
    case_status: str
    reply: str
    observation: dict[str, Any]
    decided_by: str | None = Field(
        description="Who the audit trail records as the decider: the API key's name (or "
        "`anonymous@loopback` without keys) of the first decision.")
    supervisor: str = Field(description="The display name this request gave.")


class ApprovalRow(BaseModel):
    operation: str
    case_id: str
    order_id: str
    account_id: str
    amount_cents: int
    amount: str
    status: str
    requires_approval: bool
    refund_id: int | None
    decision: str | None
    decided_by: str | None = Field(description="The deciding API key's name, if decided.")


class CaseMessageOut(BaseModel):
    role: str
    text: str
    created_at: UtcDateTime
    request_id: str | None
    status: str | None


class CaseOut(BaseModel):
    case_id: str
    status: str
    flow: str | None
    customer_id: str | None
    customer_verified_by: str | None = Field(
        default=None, description="How the case's customer was proven: `channel` or "
        "`code`; null while only claimed.")
    created_at: UtcDateTime
    updated_at: UtcDateTime
    messages: list[CaseMessageOut]
    decisions: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    refunds: list[dict[str, Any]]


class HandoffRow(BaseModel):
    case_id: str
    customer_id: str | None
    since: UtcDateTime
    opened: UtcDateTime | None = Field(default=None, description="When the case was opened.")
    lang: str | None = Field(default=None, description=(
        "The guessed language of the newest customer message (`und`: none it knows)."))
    reason: str | None
    summary: str | None
    last_customer_message: str | None


class HandoffPageOut(BaseModel):
    items: list[HandoffRow]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page.")
    total: int = Field(description="Cases waiting that match the filters, on all pages.")


class HandoffReplyIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"agent": "sam", "text": "Hi Ana, your parcel is "
                                         "with the courier; I've asked them to call you."}]},
    )

    agent: SupervisorName
    text: CustomerText


class HandoffReplyOut(BaseModel):
    case_id: str
    agent: str = Field(description="The display name the request gave.")
    principal: str = Field(
        description="Who the audit trail records as the replier: the API key's name, or "
        "`anonymous@loopback` without keys.")
    reply: str
    case_status: str
