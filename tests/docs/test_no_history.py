"""The project says how things are, not how they came to be: no logbook in its files.

History lives in git (commit messages may carry the figures of a change). A comment, a
docstring or a docs page that numbers the stages of its own past ("session 7", "was 25 →
21 µs") goes stale the day it is written and tells the reader nothing about *why* the
code is as it is. This test reads every tracked text file except the labelled data
(`datasets/`, written by people and never narrating the code) and fails with the file
and line of each such marker.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

MARKERS = {
    "a numbered session": re.compile(r"\bsessions?[ -]\d+", re.IGNORECASE),
    "a numbered issue": re.compile(r"\bissues?[ -]\d+", re.IGNORECASE),
    "a figure and what it was": re.compile(r"\bwas \d[\d,.]* *(?:→|->)", re.IGNORECASE),
    "a before → after figure": re.compile(r"\d[\d,.]*\s*(?:%|µs|ms|s|x|×)?\s*(?:→|->)\s*\d"),
    "a figure that went somewhere": re.compile(
        r"\b(?:went|rose|fell|dropped|grew|moved) from \d[\d,.]* *\S* to \d", re.IGNORECASE),
    "a stage of its own past": re.compile(
        r"\b(?:until|since) (?:this|that|the last|the previous) session\b",
        re.IGNORECASE),
}
SKIPPED_PREFIXES = ("datasets/",)
THIS_FILE = Path(__file__).resolve()  # holds every marker, as the examples below
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".html",
                 ".css", ".js", ".json", ".mako", ".sh", ""}


def tracked_text_files(root: Path) -> list[Path]:
    """Files git tracks (or would track: new, not ignored) under `root`, minus datasets."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, check=True, capture_output=True,
    ).stdout.decode("utf-8").split("\0")
    files = []
    for name in filter(None, listed):
        path = root / name
        if name.startswith(SKIPPED_PREFIXES) or path.suffix not in TEXT_SUFFIXES:
            continue
        if path.resolve() == THIS_FILE:
            continue
        if path.is_file():
            files.append(path)
    return files


def narration(text: str) -> list[tuple[int, str, str]]:
    """(line number, marker name, line) of every logbook marker in `text`."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for name, pattern in MARKERS.items():
            if pattern.search(line):
                found.append((number, name, line.strip()))
    return found


@pytest.mark.parametrize(("text", "expected"), [
    ("# Measured in session 7 on the test split.", "a numbered session"),
    ("Sessions 11 and 12 made it faster.", "a numbered session"),
    ("the session-6 columns", "a numbered session"),
    ("the issue-7 latency target", "a numbered issue"),
    ("p50 was 0.25 -> 0.21 ms", "a figure and what it was"),
    ("(25 → 21 µs per message)", "a before → after figure"),
    ("accuracy 0.881 → 0.907", "a before → after figure"),
    ("the clause breaks went from 9.3 to 5.7 µs per message", "a figure that went somewhere"),
    ("Until this session it was the loosest threshold", "a stage of its own past"),
])
def test_each_marker_is_recognised(text: str, expected: str) -> None:
    assert expected in {name for _, name, _ in narration(text)}


@pytest.mark.parametrize("text", [
    "fixture: one embedded model trained per test session",
    "nothing to undo in this session",
    "a labelling session resumes where it stopped",
    "refund → approval flow when a refund is held",
    "misroute_rate_routed = misroutes / routed",
    "the walk starts at 0.99 and goes down to 0.00",
])
def test_ordinary_prose_passes(text: str) -> None:
    assert narration(text) == []


def test_no_file_narrates_history() -> None:
    files = tracked_text_files(REPO_ROOT)
    assert any(f.name == "README.md" for f in files)  # the listing itself works
    problems = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not a text file after all
        for number, name, line in narration(text):
            problems.append(f"{path.relative_to(REPO_ROOT)}:{number}: {name}: {line[:120]}")
    assert not problems, (
        "say how things are now and why; the history belongs in git:\n" + "\n".join(problems)
    )
