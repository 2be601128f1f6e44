"""The data team's weekly loop runs exactly as `docs/data-team.md` writes it.

Every fenced ```bash block of the guide whose first line is `# guide-loop` is a step of
the loop. This test reads those blocks, and runs each command in order as a real
subprocess of the CLI (`support-router` → `python -m router`), from a folder laid out
like the project root: `models/` with the session's trained model and its own copy of
the policy, `var/` for the decision log and the score cache, settings pointing at them.

What a person does between the commands, the test does instead:

- last week's traffic: a few hundred test-split messages sent through a real gateway
  process, so `export-decisions` reads a real decision log;
- the annotators' key presses: `label` reads them from standard input (one label per
  request, in the order the session shows them; the second annotator disagrees now and
  then, so `agreement` has something to report);
- adjudication and the other weeks' labels: `labels/week11.jsonl` from the true labels
  of the exported requests, `labels/week10.jsonl` with the earlier weeks (the rest of
  the test split: certifying 2% needs a few thousand rows), and `labels/week12.jsonl`,
  next week's, before the check.

Each command must exit 0 and leave the files the next one reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from calibration.data import LabelledRow, iter_jsonl, load_labelled, select_split
from calibration.label import items_from_rows, select_items
from router.app.training import TrainResult
from router.storage.policy_store import load_policy
from tests.paths import REPO_ROOT
from tests.servers import GatewayProcess

GUIDE = REPO_ROOT / "docs" / "data-team.md"
MARKER = "# guide-loop"
KEYS = {"refund": "r", "account": "a", "other": "o", "unclear": "u"}
WEEK_ROWS = 300
BO_DISAGREES_EVERY = 10
COMMAND_TIMEOUT_S = 900
START_TIMEOUT_S = 300
REQUIRED_ORDER = ["export-decisions", "label", "agreement", "score", "calibrate", "report",
                  "policy publish", "check", "policy rollback"]


# -- reading the guide --------------------------------------------------------------------


def loop_commands(markdown: str) -> list[list[str]]:
    """The argv of every command in the guide's `# guide-loop` blocks, in order."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.S | re.M):
        lines = block.splitlines()
        if not lines or lines[0].strip() != MARKER:
            continue
        joined = re.sub(r"\\\n\s*", " ", "\n".join(lines[1:]))
        for line in joined.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(shlex.split(line))
    return commands


def step_name(argv: list[str]) -> str:
    return " ".join(argv[1:3]) if argv[1] == "policy" else argv[1]


def option(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else default


def test_the_guide_has_a_complete_loop() -> None:
    commands = loop_commands(GUIDE.read_text(encoding="utf-8"))
    assert commands, f"no ```bash block starting with {MARKER!r} in {GUIDE}"
    assert all(argv[0] == "support-router" for argv in commands), commands
    steps = [step_name(argv) for argv in commands]
    positions = [steps.index(step) if step in steps else -1 for step in REQUIRED_ORDER]
    assert -1 not in positions, f"the loop lacks {REQUIRED_ORDER[positions.index(-1)]!r}"
    assert positions == sorted(positions), f"loop steps out of order: {steps}"


def test_commands_are_read_across_continuation_lines() -> None:
    markdown = (
        "```bash\n# guide-loop\nsupport-router a --x 1 \\\n    --y 'two words'\n"
        "# a comment\nsupport-router b\n```\n\n```bash\nsupport-router not-in-the-loop\n```\n"
    )
    assert loop_commands(markdown) == [
        ["support-router", "a", "--x", "1", "--y", "two words"], ["support-router", "b"]]


# -- the week's data -----------------------------------------------------------------------


def _test_split_rows() -> list[LabelledRow]:
    """The routing data's test split (never trained on), in a fixed order."""
    rows = select_split(load_labelled(REPO_ROOT / "datasets" / "routes"), "test")
    usable = [r for r in rows if 0 < len(r.text) <= 8000]
    return sorted(usable, key=lambda r: hashlib.sha256(r.id.encode()).hexdigest())


def _write_labels(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def _plain(rows: list[LabelledRow]) -> list[dict]:
    return [{"id": r.id, "text": r.text, "label": r.label} for r in rows]


@dataclass
class Week:
    """The loop's folder and what the test knows that the commands do not."""

    root: Path
    env: dict[str, str]
    original_version: str
    earlier: list[LabelledRow]
    this_week: list[LabelledRow]
    next_week: list[LabelledRow]
    truth_by_request: dict[str, str] = field(default_factory=dict)
    calibrated_version: str | None = None

    def path(self, value: str) -> Path:
        return self.root / value


def _environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update({
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                    os.environ.get("PYTHONPATH")])),
        "SUPPORT_ROUTER_VAR_DIR": str(root / "var"),
        "SUPPORT_ROUTER_MODEL_DIR": str(root / "models"),
        "SUPPORT_ROUTER_POLICY_PATH": str(root / "models" / "policy.json"),
        "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "160",
    })
    return env


@pytest.fixture
def week(tmp_path: Path, trained: TrainResult) -> Iterator[Week]:
    """A project-root-like folder: the trained model (linked), a private policy file."""
    models = tmp_path / "models"
    models.mkdir()
    (models / trained.model_path.name).symlink_to(trained.model_path)
    shutil.copy(trained.policy_path, models / "policy.json")
    rows = _test_split_rows()
    assert len(rows) > 3 * WEEK_ROWS
    yield Week(root=tmp_path, env=_environment(tmp_path),
               original_version=load_policy(models / "policy.json").version,
               this_week=rows[:WEEK_ROWS], next_week=rows[WEEK_ROWS:2 * WEEK_ROWS],
               earlier=rows[2 * WEEK_ROWS:])


# -- what people do between the commands ----------------------------------------------------


def _last_weeks_traffic(week: Week) -> None:
    """This week's messages through a real gateway, so the decision log holds them."""
    with GatewayProcess() as server:
        server.start(week.env, [], week.root / "serve.log")
        server.wait_ready(START_TIMEOUT_S)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for row in week.this_week:
                answer = client.post("/v1/route", json={"text": row.text})
                assert answer.status_code == 200, answer.text
                week.truth_by_request[answer.json()["request_id"]] = row.label


def _annotator_keys(week: Week, argv: list[str]) -> str:
    """One key per request, in the order `label` shows them; bo sometimes disagrees."""
    source = week.path(option(argv, "--input") or "")
    items = items_from_rows(iter_jsonl(source), source=source.name)
    n = option(argv, "--n")
    chosen = select_items(items, sample=option(argv, "--sample", "random"),  # type: ignore[arg-type]
                          n=int(n) if n else None, seed=int(option(argv, "--seed", "0") or 0))
    routes = list(KEYS)
    labels = [week.truth_by_request[item.id] for item in chosen]
    if option(argv, "--annotator") != "ana":
        labels = [routes[(routes.index(label) + 1) % 4] if i % BO_DISAGREES_EVERY == 0
                  else label for i, label in enumerate(labels)]
    return "\n".join(KEYS[label] for label in labels) + "\n"


def _adjudicated_and_earlier_labels(week: Week) -> None:
    """The agreed labels of this week's export, and the earlier weeks' labels."""
    exported = list(iter_jsonl(week.path("week11.jsonl")))
    _write_labels(week.path("labels/week11.jsonl"), [
        {"id": row["id"], "text": row["text"], "label": week.truth_by_request[row["id"]]}
        for row in exported])
    _write_labels(week.path("labels/week10.jsonl"), _plain(week.earlier))


def _next_weeks_labels(week: Week) -> None:
    _write_labels(week.path("labels/week12.jsonl"), _plain(week.next_week))


def _before(week: Week, argv: list[str]) -> str | None:
    """Do what a person does before this command; the command's standard input."""
    step = step_name(argv)
    if step == "export-decisions":
        _last_weeks_traffic(week)
    elif step == "label":
        return _annotator_keys(week, argv)
    elif step == "score" and option(argv, "--data") == "labels/":
        if not week.path("labels/week11.jsonl").exists():
            _adjudicated_and_earlier_labels(week)
    elif step == "score" and option(argv, "--data") == "labels/week12.jsonl":
        _next_weeks_labels(week)
    return None


# -- what each command must leave behind ----------------------------------------------------


def _after(week: Week, argv: list[str], output: str) -> None:
    step = step_name(argv)
    out = option(argv, "--out")
    if out is not None and "--dry-run" not in argv:
        assert week.path(out).exists(), f"{step} wrote no {out}"
    checks: dict[str, Callable[[], None]] = {
        "export-decisions": lambda: _exported(week),
        "label": lambda: _labelled(week, argv),
        "agreement": lambda: _agreement(output),
        "score": lambda: _scored(week, argv, output),
        "calibrate": lambda: _calibrated(week, argv),
        "report": lambda: _reported(week, argv),
        "policy publish": lambda: _active_is(week, week.calibrated_version),
        "policy history": lambda: _history(output),
        "check": lambda: _checked(output),
        "policy rollback": lambda: _active_is(week, week.original_version),
    }
    checks.get(step, lambda: None)()


def _exported(week: Week) -> None:
    exported = list(iter_jsonl(week.path("week11.jsonl")))
    assert {row["id"] for row in exported} == set(week.truth_by_request)
    assert all(row["confidence"] is not None for row in exported)


def _labelled(week: Week, argv: list[str]) -> None:
    labels = load_labelled(week.path(option(argv, "--out") or ""))
    assert len(labels) == int(option(argv, "--n") or 0)
    assert {row.id for row in labels} <= set(week.truth_by_request)


def _agreement(output: str) -> None:
    assert "Cohen's kappa" in output and "disagreements to resolve" in output, output


def _scored(week: Week, argv: list[str], output: str) -> None:
    if "--dry-run" in argv:
        assert output.startswith("dry run:"), output
        return
    scored = {row["id"] for row in iter_jsonl(week.path(option(argv, "--out") or ""))}
    assert scored == {row.id for row in load_labelled(week.path(option(argv, "--data") or ""))}


def _calibrated(week: Week, argv: list[str]) -> None:
    policy = load_policy(week.path(option(argv, "--out") or ""))
    assert policy.guarantee is not None
    assert policy.guarantee.alpha == float(option(argv, "--alpha") or 0)
    assert policy.version != week.original_version
    week.calibrated_version = policy.version


def _reported(week: Week, argv: list[str]) -> None:
    folder = week.path(option(argv, "--out") or "")
    assert (folder / "index.html").is_file()
    assert list(folder.glob("*.png"))


def _active_is(week: Week, version: str | None) -> None:
    assert version is not None
    assert load_policy(week.path("models/policy.json")).version == version


def _history(output: str) -> None:
    assert "publish" in output, output


def _checked(output: str) -> None:
    assert "the guarantee still holds" in output, output


# -- the loop ---------------------------------------------------------------------------------


def test_the_weekly_loop_runs_as_written(week: Week) -> None:
    commands = loop_commands(GUIDE.read_text(encoding="utf-8"))
    assert commands
    for argv in commands:
        stdin = _before(week, argv)
        done = subprocess.run(
            [sys.executable, "-m", "router", *argv[1:]], cwd=week.root, env=week.env,
            input=stdin if stdin is not None else "", capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        shown = shlex.join(argv)
        assert done.returncode == 0, (
            f"`{shown}` exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\n"
            f"stderr:\n{done.stderr[-3000:]}")
        _after(week, argv, done.stdout)
