"""`support-router export-decisions`: unlabelled requests from the decision log.

One JSON line per distinct message (repeated texts are exported once), with the model's
answer kept for sampling (`label --sample uncertainty|disagreement|stratified`) — the
labelling session never shows it before a label is given. `--redact` masks e-mail
addresses, order and account ids, and money amounts before the file leaves the system.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from router.storage.decision_log import text_sha

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ORDER_ID = re.compile(r"\b[A-Z]-?\d{3,}\b")
"""Order and account ids as the shop writes them: O-7720, A-100, O7720."""
_NUMBER = r"\d[\d\s.,']*\d|\d"
_CURRENCY = r"(?:[$£€¥]|US\$|EUR|USD|GBP|CHF|SEK|PLN|euros?|dollars?|pounds?|zł|kr)"
AMOUNT = re.compile(
    rf"(?:{_CURRENCY}\s?(?:{_NUMBER}))|(?:(?:{_NUMBER})\s?{_CURRENCY})(?!\w)", re.IGNORECASE
)


def redact(text: str) -> str:
    """Mask e-mails as [email], order/account ids as [id] and money amounts as [amount]."""
    text = EMAIL.sub("[email]", text)
    text = AMOUNT.sub("[amount]", text)
    return ORDER_ID.sub("[id]", text)


def shadow_choice(raw: str | None) -> str | None:
    """The shadow model's choice from the decision log's `shadow` column, if recorded."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    nested = data.get("scores")
    scores: dict[str, Any] = nested if isinstance(nested, dict) else data
    choice = scores.get("choice")
    return choice if isinstance(choice, str) else None


def export_rows(decisions: Iterable[Mapping[str, Any]], *, redact_text: bool = False
                ) -> list[dict[str, Any]]:
    """Rows for labelling from decision-log rows (`DecisionLog.rows()`), oldest first.

    Parameters
    ----------
    decisions : iterable of dict
        Decision-log rows.
    redact_text : bool
        Mask e-mails, ids and amounts in the text.

    Returns
    -------
    list of dict
        ``{id, text, created_at, choice, confidence, probabilities, model,
        policy_version, route, reason, shadow_choice}``, one per distinct text.
    """
    seen: set[str] = set()
    out = []
    for row in decisions:
        digest = row.get("text_sha") or text_sha(row["text"])
        if digest in seen:
            continue
        seen.add(digest)
        created = row.get("created_at")
        out.append({
            "id": row["request_id"],
            "text": redact(row["text"]) if redact_text else row["text"],
            "created_at": created.isoformat() if isinstance(created, datetime) else created,
            "choice": row.get("choice"),
            "confidence": row.get("confidence"),
            "probabilities": json.loads(row["probabilities"]) if row.get("probabilities") else None,
            "model": row.get("model"),
            "policy_version": row.get("policy_version"),
            "route": row.get("route"),
            "reason": row.get("reason"),
            "shadow_choice": shadow_choice(row.get("shadow")),
        })
    return out
