"""Labelled-data I/O and the deterministic id-hash split.

A row's split depends only on its own `id`, so adding rows never moves existing ones
between train, calibration and test.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from router.contracts import Route
from router.errors import InvalidInput

Split = Literal["train", "calibration", "test"]
SPLIT_BOUNDS: tuple[tuple[Split, float], ...] = (
    ("train", 0.6),
    ("calibration", 0.8),
    ("test", 1.0),
)


class LabelledRow(BaseModel):
    """One labelled customer message. Only `text` and `label` are required for evaluation."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""
    text: str = Field(min_length=1)
    label: Route
    lang: str = "en"
    tags: list[str] = Field(default_factory=list)
    # Verbatim substrings addressed to the routing system rather than the shop, marked on
    # `injection` rows; they train the steering detector (`router.models.local.steering`).
    steering: list[str] | None = None


def id_fraction(row_id: str, *, salt: str = "routes-v1") -> float:
    """A stable number in [0, 1) from an id (sha256, not Python's salted `hash`)."""
    digest = hashlib.sha256(f"{salt}:{row_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(row_id: str) -> Split:
    fraction = id_fraction(row_id)
    for name, upper in SPLIT_BOUNDS:
        if fraction < upper:
            return name
    return "test"


def _jsonl_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(path.glob("*.jsonl"))
    if path.exists():
        return [path]
    raise InvalidInput(f"no labelled data at {path}", code="data_not_found")


def iter_jsonl(path: Path) -> Iterator[Any]:
    """Yield each line's JSON value from a file or every `*.jsonl` in a folder, naming bad
    lines; a line may hold any JSON value, so callers check that it is an object."""
    for file in _jsonl_files(path):
        with file.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInput(
                        f"{file}:{number}: not valid JSON ({exc.msg})", code="bad_jsonl"
                    ) from exc


def load_labelled(path: Path) -> list[LabelledRow]:
    """Labelled rows from a file or folder, resolving labelling-session logs.

    `support-router label` appends, never rewrites: a later row for the same id replaces
    the earlier one (a relabel), and a row `{"id": …, "undo": true}` withdraws the
    latest label of that id. Files without repeated ids or undo rows read as they are.
    """
    rows: dict[str, LabelledRow] = {}
    for number, obj in enumerate(iter_jsonl(path), start=1):
        if isinstance(obj, dict) and obj.get("undo") is True:
            rows.pop(str(obj.get("id", "")), None)
            continue
        try:
            row = LabelledRow.model_validate(obj)
        except ValidationError as exc:
            raise InvalidInput(
                f"{path} row {number}: {exc.errors()[0]['msg']}", code="bad_label_row"
            ) from exc
        row = row if row.id else row.model_copy(update={"id": f"row-{number}"})
        rows.pop(row.id, None)  # a relabel moves to the end, as in the log
        rows[row.id] = row
    return list(rows.values())


def steering_marks(row: LabelledRow) -> list[str] | None:
    """The row's marked steering spans for the detector: its own, `[]` for a row without
    the `injection` tag (nothing to mark), None for an `injection` row nobody marked."""
    if row.steering is not None:
        return row.steering
    return None if "injection" in row.tags else []


class SteeringSegment(BaseModel):
    """One standalone segment for the steering detector (`datasets/steering/`)."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""
    text: str = Field(min_length=1)
    steering: bool
    lang: str = "en"
    family: str = ""


def load_steering_segments(path: Path) -> list[SteeringSegment]:
    """Standalone steering and look-alike segments from a file or folder of JSONL."""
    segments = []
    for number, obj in enumerate(iter_jsonl(path), start=1):
        try:
            segments.append(SteeringSegment.model_validate(obj))
        except ValidationError as exc:
            raise InvalidInput(
                f"{path} row {number}: {exc.errors()[0]['msg']}", code="bad_steering_row"
            ) from exc
    return segments


def select_split(rows: Iterable[LabelledRow], split: Split) -> list[LabelledRow]:
    return [row for row in rows if split_of(row.id) == split]


def data_sha(rows: Iterable[LabelledRow]) -> str:
    """Content hash of labelled rows, independent of file layout and row order."""
    lines = sorted(json.dumps([r.id, r.text, r.label], ensure_ascii=False) for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
