"""The data team's labelling in the shared database: queue, labels, agreement,
adjudication and export, callable without HTTP (the console pages and tests call it).

The queue is fed from the decision log as `support-router label --from-decisions` is
(`calibration.export.export_rows`: one item per distinct text, its id the first
decision's request id; `calibration.label.select_items` orders them). The model's answer
is kept for sampling and is revealed only once a label is given (`LabelReveal`).

Who labels what:

- Every labeller walks the same sample order, skipping the items they labelled or skipped.
- An item leaves everyone's queue once enough labellers labelled it: two for the
  *overlap* items, one for the others. An item is an overlap item when its id hashes
  below `overlap` (a fraction, `SUPPORT_ROUTER_LABEL_OVERLAP`), so the choice is stable
  and every labeller agrees on it without any shared state beyond the labels; the overlap
  items are what Cohen's kappa is measured on.
- Two labellers may be shown the same non-overlap item at the same moment; both labels
  are kept (an extra label only adds to the agreement figures). Nothing is claimed or
  locked, so a labeller who walks away holds nothing up.

What a labeller's rows mean (`resolve_labels`), as in the terminal tool's JSONL: their
latest route or skip of an item counts; `undo` withdraws it, putting the item back in
their queue.

The final label of an item in the export (`final_labels`), in this order:

1. **adjudicated**: the latest adjudication of the item, whatever the labellers said;
2. **agreed**: two or more labellers, all with the same route;
3. **single**: exactly one labeller labelled it (non-overlap items, mostly).

Items whose labellers disagree and that nobody adjudicated are left out of the export
and counted (`LabelExport.unresolved`): a majority is not taken for a resolution. Labels
change no route, threshold or policy: the export is a file for `support-router score`
and `calibrate`, whose output a person publishes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import combinations
from typing import Any, Literal, get_args

from pydantic import BaseModel

from calibration.agreement import compare_annotators
from calibration.data import LabelledRow, id_fraction
from calibration.export import export_rows, redact
from calibration.label import Item, items_from_rows, select_items
from router.contracts import ROUTES
from router.errors import Conflict, InvalidInput, NotFound
from router.storage.decision_log import DecisionLog
from router.storage.label_db import SKIP, UNDO, Adjudication, LabelDB, LabelEvent

QueueSample = Literal["uncertainty", "disagreement", "stratified", "random"]
QUEUE_SAMPLES: tuple[str, ...] = get_args(QueueSample)
LABEL_VALUES: tuple[str, ...] = (*ROUTES, SKIP)
OVERLAP_SALT = "label-overlap-v1"
OVERLAP_LABELLERS = 2
MAX_NOTE_CHARS = 2000
Resolution = Literal["adjudicated", "agreed", "single"]
Resolved = dict[str, dict[str, str]]
"""item id → labeller → their route or `skip` (withdrawn ones absent)."""


class QueueItem(BaseModel):
    """One request to label, without the model's answer."""

    id: str
    text: str
    lang: str


class Queue(BaseModel):
    items: list[QueueItem]
    remaining: int
    """Items still waiting for this labeller in this sample, the shown ones included."""
    labelled: int
    """Items this labeller has a label for (skips not counted)."""


class LabelReveal(BaseModel):
    """What a label showed: the label given and, now, the model's answer."""

    item_id: str
    label: str
    model_choice: str | None
    model_confidence: float | None


class PairAgreement(BaseModel):
    labeller_a: str
    labeller_b: str
    n: int
    observed: float | None
    kappa: float | None
    """None when undefined: no shared item, or both used one and the same label."""
    confusion: list[list[int]]
    """Counts in `ROUTES` order: rows labeller A, columns labeller B."""


class DisagreementItem(BaseModel):
    item_id: str
    text: str
    labels: dict[str, str]
    """labeller → route."""
    adjudication: Adjudication | None


class FinalLabel(BaseModel):
    item_id: str
    route: str
    resolution: Resolution
    labellers: list[str]
    adjudicator: str | None = None


class LabelExport(BaseModel):
    rows: list[dict[str, Any]]
    """JSONL rows `calibration.data.load_labelled` reads."""
    counts: dict[str, int]
    """Exported rows per resolution."""
    unresolved: int
    """Items whose labellers disagree and nobody adjudicated (left out)."""


# -- pure rules ----------------------------------------------------------------------------


def resolve_labels(events: Iterable[LabelEvent]) -> Resolved:
    """Each labeller's standing label of each item, from rows in the order written."""
    out: Resolved = {}
    for event in events:
        per_item = out.setdefault(event.item_id, {})
        if event.label == UNDO:
            per_item.pop(event.labeller, None)
        else:
            per_item[event.labeller] = event.label
    return {item: labels for item, labels in out.items() if labels}


def labels_needed(item_id: str, *, overlap: float) -> int:
    """How many labellers an item waits for: two for the overlap share, else one."""
    return OVERLAP_LABELLERS if id_fraction(item_id, salt=OVERLAP_SALT) < overlap else 1


def pending_for(items: Sequence[Item], resolved: Resolved, *, labeller: str,
                overlap: float) -> list[Item]:
    """The items, in order, still waiting for `labeller`."""
    out = []
    for item in items:
        labels = resolved.get(item.id, {})
        if labeller in labels:
            continue
        routed = sum(1 for value in labels.values() if value != SKIP)
        if routed < labels_needed(item.id, overlap=overlap):
            out.append(item)
    return out


def final_labels(resolved: Resolved, adjudications: Iterable[Adjudication]
                 ) -> tuple[list[FinalLabel], int]:
    """The final label of each labelled item (module docstring) and how many are unresolved."""
    latest = {a.item_id: a for a in adjudications}
    finals, unresolved = [], 0
    for item_id in sorted(set(resolved) | set(latest)):
        routes = {who: v for who, v in resolved.get(item_id, {}).items() if v != SKIP}
        who = sorted(routes)
        if item_id in latest:
            a = latest[item_id]
            finals.append(FinalLabel(item_id=item_id, route=a.route, resolution="adjudicated",
                                     labellers=who, adjudicator=a.adjudicator))
        elif len(set(routes.values())) == 1:
            finals.append(FinalLabel(item_id=item_id, route=routes[who[0]], labellers=who,
                                     resolution="agreed" if len(who) > 1 else "single"))
        elif routes:
            unresolved += 1
    return finals, unresolved


# -- use cases -----------------------------------------------------------------------------


class Labelling:
    """The use cases over the label store and the decision log."""

    def __init__(self, labels: LabelDB, decisions: DecisionLog, *, overlap: float) -> None:
        if not 0.0 <= overlap <= 1.0:
            raise InvalidInput(f"overlap {overlap}; use a fraction in [0, 1]",
                               code="bad_label_overlap")
        self.labels = labels
        self.decisions = decisions
        self.overlap = overlap

    def queue(self, labeller: str, *, sample: QueueSample = "uncertainty", n: int = 1,
              since: datetime | None = None, seed: int = 0) -> Queue:
        """The next `n` items for `labeller`, in the sample's order.

        Raises
        ------
        InvalidInput
            `bad_sample` for an unknown sample; `sample_needs_shadow` for disagreement
            sampling on a log without shadow answers.
        """
        if sample not in QUEUE_SAMPLES:
            raise InvalidInput(f"sample {sample!r}; use one of {', '.join(QUEUE_SAMPLES)}",
                               code="bad_sample")
        items = items_from_rows(export_rows(self.decisions.rows(since=since)),
                                source="decisions")
        if sample == "uncertainty":
            # Rule decisions carry no model answer to be uncertain about.
            items = [item for item in items if item.model_confidence is not None]
        ordered = select_items(items, sample=sample, n=None, seed=seed) if items else []
        resolved = resolve_labels(self.labels.events())
        waiting = pending_for(ordered, resolved, labeller=labeller, overlap=self.overlap)
        mine = sum(1 for labels in resolved.values()
                   if labels.get(labeller) not in (None, SKIP))
        return Queue(items=[QueueItem(id=i.id, text=i.text, lang=i.lang) for i in waiting[:n]],
                     remaining=len(waiting), labelled=mine)

    def record(self, item_id: str, *, labeller: str, label: str,
               now: datetime | None = None) -> LabelReveal:
        """Store `labeller`'s route (or `skip`) for an item; reveal the model's answer
        (not for a skip).

        Raises
        ------
        InvalidInput
            `bad_label`: not a route or `skip`.
        NotFound
            `unknown_item`: no decision has this request id, or it repeats an earlier
            request's text (the item is that one's).
        """
        if label not in LABEL_VALUES:
            raise InvalidInput(f"label {label!r}; use one of {', '.join(LABEL_VALUES)}",
                               code="bad_label")
        row = self._decision(item_id)
        self.labels.append(item_id, labeller=labeller, label=label, now=now)
        if label == SKIP:  # no label given, so nothing revealed (skip, undo, label: blind)
            return LabelReveal(item_id=item_id, label=label, model_choice=None,
                               model_confidence=None)
        return LabelReveal(item_id=item_id, label=label, model_choice=row.get("choice"),
                           model_confidence=row.get("confidence"))

    def reveal(self, item_id: str, *, labeller: str) -> LabelReveal | None:
        """The model's answer on an item, for a labeller who has labelled it (a skip is no
        label); else None, so the answer is never shown before a label is given."""
        given = resolve_labels(self.labels.events(item_ids=[item_id])).get(item_id, {})
        label = given.get(labeller)
        row = self.decisions.rows_for([item_id]).get(item_id)
        if label is None or label == SKIP or row is None:
            return None
        return LabelReveal(item_id=item_id, label=label, model_choice=row.get("choice"),
                           model_confidence=row.get("confidence"))

    def undo(self, labeller: str, *, now: datetime | None = None) -> str | None:
        """Withdraw `labeller`'s latest standing label or skip; the item's id, or None."""
        events = self.labels.events(labeller=labeller)
        standing = resolve_labels(events)
        for event in reversed(events):
            if event.label != UNDO and labeller in standing.get(event.item_id, {}):
                self.labels.append(event.item_id, labeller=labeller, label=UNDO, now=now)
                return event.item_id
        return None

    def agreements(self) -> list[PairAgreement]:
        """Cohen's kappa, raw agreement and confusion for every pair of labellers."""
        resolved = resolve_labels(self.labels.events())
        by_labeller: dict[str, dict[str, str]] = {}
        for item_id, labels in resolved.items():
            for who, value in labels.items():
                if value != SKIP:
                    by_labeller.setdefault(who, {})[item_id] = value
        out = []
        for a, b in combinations(sorted(by_labeller), 2):
            shared = sorted(set(by_labeller[a]) & set(by_labeller[b]))
            if not shared:
                out.append(PairAgreement(labeller_a=a, labeller_b=b, n=0, observed=None,
                                         kappa=None, confusion=[[0] * 4 for _ in ROUTES]))
                continue
            # compare_annotators matches by id only; the text is not read.
            rows_a = [LabelledRow.model_validate({"id": i, "text": i, "label": by_labeller[a][i]})
                      for i in shared]
            rows_b = [LabelledRow.model_validate({"id": i, "text": i, "label": by_labeller[b][i]})
                      for i in shared]
            result = compare_annotators(rows_a, rows_b)
            out.append(PairAgreement(labeller_a=a, labeller_b=b, n=result.n,
                                     observed=result.observed, kappa=result.kappa,
                                     confusion=result.confusion.tolist()))
        return out

    def disagreements(self, *, include_adjudicated: bool = True) -> list[DisagreementItem]:
        """Items two or more labellers gave different routes, oldest label first."""
        resolved = resolve_labels(self.labels.events())
        latest = {a.item_id: a for a in self.labels.adjudications()}
        split = {item_id: {who: v for who, v in labels.items() if v != SKIP}
                 for item_id, labels in resolved.items()}
        split = {item_id: labels for item_id, labels in split.items()
                 if len(set(labels.values())) > 1
                 and (include_adjudicated or item_id not in latest)}
        rows = self.decisions.rows_for(split)
        return [DisagreementItem(item_id=item_id, text=rows[item_id]["text"],
                                 labels=dict(sorted(labels.items())),
                                 adjudication=latest.get(item_id))
                for item_id, labels in split.items() if item_id in rows]

    def adjudicate(self, item_id: str, *, route: str, adjudicator: str, note: str = "",
                   now: datetime | None = None) -> Adjudication:
        """Resolve an item to `route`; the latest resolution of an item is the one exported.

        Only an item whose labellers disagree can be resolved, and only by someone who is
        not one of them: an adjudication overrides the labellers, so otherwise one person
        could set a label that two labellers agreed on (directly, or by labelling the
        item differently first and then resolving it their way), or one nobody gave.

        Raises
        ------
        InvalidInput
            `bad_route` for a route not in `ROUTES`; `note_too_long`.
        NotFound
            `unknown_item`: no decision has this request id.
        Conflict
            `not_disputed`: the item's labellers do not disagree; `adjudicator_labelled`:
            the adjudicator is one of them.
        """
        if route not in ROUTES:
            raise InvalidInput(f"route {route!r}; use one of {', '.join(ROUTES)}",
                               code="bad_route")
        if len(note) > MAX_NOTE_CHARS:
            raise InvalidInput(f"note of {len(note)} characters; at most {MAX_NOTE_CHARS}",
                               code="note_too_long")
        self._decision(item_id)
        given = resolve_labels(self.labels.events(item_ids=[item_id])).get(item_id, {})
        if len({value for value in given.values() if value != SKIP}) < 2:
            raise Conflict(f"the labellers of {item_id!r} do not disagree; only a "
                           "disagreement is adjudicated", code="not_disputed")
        if given.get(adjudicator, SKIP) != SKIP:
            raise Conflict(f"{adjudicator} labelled {item_id!r}; a disagreement is resolved "
                           "by someone who is not one of its labellers",
                           code="adjudicator_labelled")
        return self.labels.adjudicate(item_id, route=route, adjudicator=adjudicator,
                                      note=note, now=now)

    def export(self, *, redact_text: bool = False) -> LabelExport:
        """The final label of every resolved item, as rows `load_labelled` reads."""
        finals, unresolved = final_labels(resolve_labels(self.labels.events()),
                                          self.labels.adjudications())
        rows = self.decisions.rows_for(f.item_id for f in finals)
        out, counts = [], dict.fromkeys(get_args(Resolution), 0)
        for final in finals:
            decision = rows.get(final.item_id)
            if decision is None:
                continue
            text = decision["text"]
            out.append({"id": final.item_id, "text": redact(text) if redact_text else text,
                        "label": final.route, "lang": decision.get("lang") or "und",
                        "source": "console", "resolution": final.resolution,
                        "annotators": final.labellers, "adjudicator": final.adjudicator})
            counts[final.resolution] += 1
        return LabelExport(rows=out, counts=counts, unresolved=unresolved)

    def _decision(self, item_id: str) -> dict[str, Any]:
        """The decision an item stands for: the first of its text, as the queue lists it
        (a later repeat's id is no item, so a text is never labelled under two ids)."""
        row = self.decisions.rows_for([item_id]).get(item_id)
        if row is None:
            raise NotFound(f"no decision with request id {item_id!r}", code="unknown_item")
        if self.decisions.repeats_earlier(item_id):
            raise NotFound(f"{item_id!r} repeats an earlier request's text; label that one",
                           code="unknown_item")
        return row


def export_jsonl(export: LabelExport) -> str:
    """The export as JSON lines (UTF-8 text, one row a line)."""
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in export.rows)
