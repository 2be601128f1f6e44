from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pexpect
import pytest

from calibration.data import load_labelled
from calibration.label import Item, render, select_items, start, step
from router.errors import InvalidInput

NOW = datetime(2026, 3, 15, 9, 30, tzinfo=UTC)
ITEMS = [Item(id=f"a{i}", text=f"message {i}", model_choice=choice, model_confidence=conf,
              shadow_choice=shadow)
         for i, (choice, conf, shadow) in enumerate(
             [("account", 0.10, "account"), ("refund", 0.90, "other"), ("other", 0.30, None),
              ("refund", 0.50, "refund"), ("unclear", 0.70, "refund")], start=1)]


def _press(state, keys: str):  # noqa: ANN001, ANN202
    rows = []
    for key in keys:
        result = step(state, key, annotator="ana", now=NOW)
        state, rows = result.state, rows + result.rows
    return state, rows


def test_label_skip_undo_quit() -> None:
    state, rows = _press(start(ITEMS, done_ids={"a2"}), "rs")
    assert [r["id"] for r in rows] == ["a1"]
    assert rows[0] == {"id": "a1", "text": "message 1", "label": "refund", "lang": "und",
                       "annotator": "ana", "labelled_at": NOW.isoformat(), "source": ""}
    assert state.current.id == "a4" and state.labelled == 1
    state, rows = _press(state, "z")  # undo the skip: back to a3, nothing written
    assert (state.current.id, rows) == ("a3", [])
    state, rows = _press(state, "z")  # undo the label: an undo row, back to a1
    assert state.current.id == "a1" and state.labelled == 0
    assert rows == [{"id": "a1", "undo": True, "annotator": "ana",
                     "labelled_at": NOW.isoformat()}]
    state, _ = _press(state, "z")
    assert state.notice == "nothing to undo in this session"
    state, _ = _press(state, "q")
    assert state.finished


def test_the_model_answer_is_revealed_only_after_labelling() -> None:
    state = start(ITEMS, done_ids=set())
    assert "the model said" not in render(state) and "0.10" not in render(state)
    state, _ = _press(state, "2")
    assert "a1: you said account; the model said account (0.10)" in render(state)
    assert "message 2" in render(state)
    assert render(state).count("the model said") == 1  # a2's answer (refund 0.90) stays hidden
    assert "0.90" not in render(state)


def test_finishing_and_unknown_keys() -> None:
    state, rows = _press(start(ITEMS[:2], done_ids=set()), "xou")
    assert [r["label"] for r in rows] == ["other", "unclear"]
    assert state.finished and "all requests in this sample are labelled" in state.notice
    assert start(ITEMS, {i.id for i in ITEMS}).finished
    state, _ = _press(start(ITEMS, set()), "x")
    assert "unknown key 'x'" in state.notice and state.position == 0


def test_sampling_strategies() -> None:
    assert [i.id for i in select_items(ITEMS, sample="uncertainty", n=3)] == ["a1", "a3", "a4"]
    assert {i.id for i in select_items(ITEMS, sample="disagreement", n=None)} == {"a2", "a5"}
    stratified = select_items(ITEMS, sample="stratified", n=4)
    assert len({i.model_choice for i in stratified}) == 4
    assert select_items(ITEMS, sample="random", n=5, seed=3) == select_items(
        ITEMS, sample="random", n=5, seed=3)
    with pytest.raises(InvalidInput, match="needs the model's confidence"):
        select_items([Item(id="x", text="t")], sample="uncertainty", n=1)


# --- the real terminal UI, driven through a pseudo-terminal ----------------------------

CLI = str(Path(sys.executable).parent / "support-router")


def _spawn(tmp_path: Path) -> pexpect.spawn:
    env = {**os.environ, "TERM": "dumb", "NO_COLOR": "1", "COLUMNS": "160",
           "SUPPORT_ROUTER_VAR_DIR": str(tmp_path / "var")}
    return pexpect.spawn(
        CLI,
        ["label", "--input", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "labels.jsonl"),
         "--annotator", "ana", "--sample", "uncertainty", "--guide", str(tmp_path / "guide.md")],
        env=env, encoding="utf-8", timeout=90, dimensions=(50, 160),
    )


def test_labelling_ui_in_a_real_terminal(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(
        {"id": i.id, "text": i.text, "choice": i.model_choice, "confidence": i.model_confidence}
    ) for i in ITEMS))
    (tmp_path / "guide.md").write_text("# Guide\n\nLabel by what the customer asks for.\n")
    child = _spawn(tmp_path)
    child.expect("request 1 of 5")
    assert "the model said" not in child.before
    child.send("?")
    child.expect("Label by what the customer asks for")
    for key, shown in (("r", "request 2 of 5"), ("a", "request 3 of 5"),
                       ("o", "request 4 of 5")):
        child.send(key)
        child.expect(shown)
    assert "a4: you said other; the model said refund (0.50)" in child.before
    child.send("z")
    child.expect("undid other for a4")
    child.expect("request 3 of 5")
    child.send("q")
    child.expect("labelled 2 this session")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    labels = {row.id: row.label for row in load_labelled(tmp_path / "labels.jsonl")}
    assert labels == {"a1": "refund", "a3": "account"}  # uncertainty order: a1 a3 a4 a5 a2

    child = _spawn(tmp_path)  # resume: a4 comes first, two already labelled
    child.expect("request 1 of 3")
    child.expect("message 4")
    assert "earlier 2" in child.before + child.after
    child.send("u")
    child.expect("request 2 of 3")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    labels = {row.id: row.label for row in load_labelled(tmp_path / "labels.jsonl")}
    assert labels == {"a1": "refund", "a3": "account", "a4": "unclear"}
    raw = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert len(raw) == 5 and raw[3] == {"id": "a4", "undo": True, "annotator": "ana",
                                        "labelled_at": raw[3]["labelled_at"]}
