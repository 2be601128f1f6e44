"""`support-router label`: a terminal labelling session.

The session is a pure state machine (`start`, `step`, `render`): a key goes in, a new
state and the rows to append come out. `run_session` is the only part that touches the
terminal and the file, so the machine is tested without one and the UI through a real
pseudo-terminal.

- One request at a time; keys r/a/o/u (or 1–4) for the four routes, s skip, z undo,
  ? the labelling guide, q quit.
- The model's answer is never shown before the label is given (labels must not be
  anchored on it); it is revealed for the request just labelled.
- The output is append-only: a label appends a row; undo appends `{"id", "undo": true}`
  (`calibration.data.load_labelled` resolves both). Quitting and starting again resumes
  with the first request the file has no label for.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from calibration.drift import drift_weights
from router.contracts import DriftReference
from router.errors import InvalidInput

LABEL_KEYS = {"r": "refund", "a": "account", "o": "other", "u": "unclear",
              "1": "refund", "2": "account", "3": "other", "4": "unclear"}
SKIP, UNDO, QUIT, GUIDE = "s", "z", "q", "?"
KEY_HELP = ("r refund · a account · o other · u unclear · s skip · z undo · "
            "? guide · q quit")
Sample = Literal["random", "uncertainty", "disagreement", "stratified", "drifted"]


@dataclass(frozen=True)
class Item:
    """One request to label; model fields are for sampling and the reveal only."""

    id: str
    text: str
    lang: str = "und"
    source: str = ""
    model_choice: str | None = None
    model_confidence: float | None = None
    shadow_choice: str | None = None


@dataclass(frozen=True)
class Action:
    kind: Literal["label", "skip"]
    index: int
    label: str | None = None


@dataclass(frozen=True)
class SessionState:
    items: tuple[Item, ...]
    already_labelled: int = 0
    position: int = 0
    history: tuple[Action, ...] = ()
    labelled: int = 0
    reveal: str = ""
    notice: str = ""
    show_guide: bool = False
    finished: bool = False

    @property
    def current(self) -> Item | None:
        return self.items[self.position] if self.position < len(self.items) else None


@dataclass(frozen=True)
class Step:
    state: SessionState
    rows: list[dict[str, Any]] = field(default_factory=list)


def items_from_rows(rows: Iterable[object], *, source: str) -> list[Item]:
    """Items from JSON rows (an export or any JSONL with `id` and `text`)."""
    items = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not str(row.get("text") or "").strip():
            raise InvalidInput(f"{source} row {number}: needs a non-empty `text`",
                               code="bad_label_input")
        confidence = row.get("confidence")
        items.append(Item(
            id=str(row.get("id") or f"{source}-{number}"), text=row["text"],
            lang=row.get("lang") or "und", source=source, model_choice=row.get("choice"),
            model_confidence=float(confidence) if confidence is not None else None,
            shadow_choice=row.get("shadow_choice"),
        ))
    return items


def select_items(items: Sequence[Item], *, sample: Sample, n: int | None, seed: int = 0,
                 reference: DriftReference | None = None) -> list[Item]:
    """Which requests to label, in order; deterministic for a seed, so a resumed session
    continues the same sample.

    random: shuffled; uncertainty: least confident model answer first; disagreement:
    only requests where the model and the shadow model chose differently; stratified:
    round-robin over the model's choices, so rare routes get labels too; drifted: a
    random order weighted by how much more common each request's length and language
    are here than in the policy's certification rows (`reference`;
    `calibration.drift.drift_weights`), so what a drifted window added comes first.
    """
    rng = random.Random(seed)
    pool = list(items)
    if sample == "random":
        rng.shuffle(pool)
    elif sample == "drifted":
        if reference is None:
            raise InvalidInput("drifted sampling needs the policy's drift reference; run "
                               "calibrate to record one", code="sample_needs_reference")
        weights = drift_weights([item.text for item in pool], reference)
        # Weighted sampling without replacement (Efraimidis–Spirakis): sort by u^(1/w).
        keys = [rng.random() ** (1.0 / w) for w in weights]
        pool = [item for _, item in sorted(zip(keys, pool, strict=True),
                                           key=lambda pair: -pair[0])]
    elif sample == "uncertainty":
        if any(item.model_confidence is None for item in pool):
            raise InvalidInput("uncertainty sampling needs the model's confidence on every row "
                               "(export with `export-decisions` or add `confidence`)",
                               code="sample_needs_scores")
        pool.sort(key=lambda item: (item.model_confidence, item.id))
    elif sample == "disagreement":
        if all(item.shadow_choice is None for item in pool):
            raise InvalidInput("disagreement sampling needs a second model's answer "
                               "(`shadow_choice`, recorded by shadow traffic)",
                               code="sample_needs_shadow")
        pool = [i for i in pool
                if i.shadow_choice is not None and i.shadow_choice != i.model_choice]
        rng.shuffle(pool)
    elif sample == "stratified":
        groups: dict[str, list[Item]] = {}
        for item in pool:
            groups.setdefault(item.model_choice or "unscored", []).append(item)
        for group in groups.values():
            rng.shuffle(group)
        ordered = [groups[k] for k in sorted(groups)]
        pool = [g[i] for i in range(max(map(len, ordered), default=0)) for g in ordered
                if i < len(g)]
    else:
        raise InvalidInput(f"sample {sample!r}; use random, uncertainty, disagreement, "
                           "stratified or drifted", code="bad_sample")
    return pool if n is None else pool[:n]


def start(items: Sequence[Item], done_ids: set[str]) -> SessionState:
    """A session over the items the output file has no label for yet."""
    todo = tuple(item for item in items if item.id not in done_ids)
    state = SessionState(items=todo, already_labelled=len(items) - len(todo))
    return replace(state, finished=not todo, notice="" if todo else "nothing left to label")


def _row(item: Item, label: str, *, annotator: str, now: datetime) -> dict[str, str]:
    return {"id": item.id, "text": item.text, "label": label, "lang": item.lang,
            "annotator": annotator, "labelled_at": now.isoformat(), "source": item.source}


def step(state: SessionState, key: str, *, annotator: str, now: datetime) -> Step:
    """Apply one key press; return the next state and the rows to append to the output."""
    item = state.current
    base = replace(state, notice="", show_guide=False)
    if key == QUIT:
        return Step(replace(base, finished=True, reveal="", notice="quit; run the same command "
                            "again to resume"))
    if key == GUIDE:
        return Step(replace(base, show_guide=True, reveal=state.reveal))
    if key == UNDO:
        return _undo(base, annotator=annotator, now=now)
    if item is None:
        return Step(replace(base, finished=True))
    if key == SKIP:
        return _advance(base, Action("skip", state.position), reveal="", rows=[])
    if key in LABEL_KEYS:
        label = LABEL_KEYS[key]
        reveal = f"{item.id}: you said {label}"
        if item.model_choice is not None:
            conf = "" if item.model_confidence is None else f" ({item.model_confidence:.2f})"
            reveal += f"; the model said {item.model_choice}{conf}"
        return _advance(replace(base, labelled=state.labelled + 1),
                        Action("label", state.position, label), reveal=reveal,
                        rows=[_row(item, label, annotator=annotator, now=now)])
    return Step(replace(base, reveal=state.reveal, notice=f"unknown key {key!r}; {KEY_HELP}"))


def _advance(state: SessionState, action: Action, *, reveal: str, rows: list[dict[str, Any]]
             ) -> Step:
    position = state.position + 1
    finished = position >= len(state.items)
    return Step(replace(state, position=position, history=state.history + (action,),
                        reveal=reveal, finished=finished,
                        notice="all requests in this sample are labelled" if finished else ""),
                rows)


def _undo(state: SessionState, *, annotator: str, now: datetime) -> Step:
    if not state.history:
        return Step(replace(state, notice="nothing to undo in this session"))
    action = state.history[-1]
    item = state.items[action.index]
    moved = replace(state, position=action.index, history=state.history[:-1], reveal="",
                    finished=False)
    if action.kind == "skip":
        return Step(replace(moved, notice=f"back to {item.id}"))
    return Step(
        replace(moved, labelled=state.labelled - 1,
                notice=f"undid {action.label} for {item.id}"),
        [{"id": item.id, "undo": True, "annotator": annotator, "labelled_at": now.isoformat()}],
    )


def render(state: SessionState) -> str:
    """The screen for a state, as rich markup (customer text escaped)."""
    lines = []
    if state.reveal:
        lines.append(f"[dim]{escape(state.reveal)}[/dim]")
    if state.notice:
        lines.append(f"[yellow]{escape(state.notice)}[/yellow]")
    item = state.current
    if item is not None and not state.finished:
        total = len(state.items)
        lines += [
            f"[bold]request {state.position + 1} of {total}[/bold] · id {escape(item.id)} · "
            f"labelled this session {state.labelled} · earlier {state.already_labelled}",
            "",
            escape(item.text),
            "",
            f"[cyan]{KEY_HELP}[/cyan]",
        ]
    else:
        lines.append(f"session over: labelled {state.labelled} this session, "
                     f"{state.already_labelled + state.labelled} in the file")
    return "\n".join(lines)


def append_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Append rows durably (flushed and fsynced: a crash loses at most the key in flight)."""
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        handle.flush()
        os.fsync(handle.fileno())


def terminal_keys(stream: TextIO) -> Generator[str, None, None]:
    """Single key presses from a terminal (cbreak mode), else characters of input lines."""
    if stream.isatty():
        import termios
        import tty

        fd = stream.fileno()
        saved = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)
            while True:
                key = os.read(fd, 1).decode("utf-8", errors="ignore")
                if not key:
                    return
                yield key
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    else:
        for line in stream:
            yield from (ch for ch in line if not ch.isspace())


def run_session(
    state: SessionState,
    *,
    keys: Iterator[str],
    out: Path,
    annotator: str,
    guide: str,
    console: Console,
    clock: Callable[[], datetime],
) -> SessionState:
    """Drive the state machine from keys, appending rows to `out` and drawing each screen."""
    console.print(render(state))
    while not state.finished:
        key = next(keys, QUIT)
        result = step(state, key, annotator=annotator, now=clock())
        append_rows(out, result.rows)
        state = result.state
        if state.show_guide:
            console.print(Markdown(guide))
        console.rule()
        console.print(render(state))
    return state


def read_guide(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"(no labelling guide at {path})"


def stdin_keys() -> Generator[str, None, None]:
    return terminal_keys(sys.stdin)
