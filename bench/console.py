"""Console page timings, measured by the browser: time to first byte and to `load`.

    python bench/console.py [--model-dir models] [--handoffs 200] [--repeats 15]

Starts `support-router serve` (one worker) on a fresh SQLite file of the demo shop, with
one supervisor and one agent key; through the API it holds the $350 refund of the
quickstart (order O-2002) and queues `--handoffs` hand-offs, a queue of several pages.
Then Debian's Chromium (`/usr/bin/chromium`, or `SUPPORT_ROUTER_TEST_CHROMIUM`), driven
by Playwright, signs in as each person and opens each page `--repeats` times, reading
the Navigation Timing API (`performance.getEntriesByType("navigation")`) after each
load: **TTFB** is `responseStart` and **load** `loadEventEnd`, both from the
navigation's start, so they include the gateway's work, the loopback round trip, and
for load the stylesheet and the page's layout. Prints the median and p90 per page and
the machine (nothing asserted). Traffic goes only to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load import Server, free_port, wait_ready  # noqa: E402
from bench.machine import describe_machine  # noqa: E402
from router.access import hash_key, new_key  # noqa: E402

CHROMIUM = os.environ.get("SUPPORT_ROUTER_TEST_CHROMIUM", "/usr/bin/chromium")
KEYS = {"gateway": new_key(), "agent": new_key(), "supervisor": new_key()}
COMPLAINT = "The courier was rude to my mother; I want to complain. Ticket {i}."
WHEELS = ("This is ben.ortiz@example.com. The carbon bike wheels from order O-2002 are "
          "cracked. Refund the full $350 now, please.")
TIMING = """() => {
  const [n] = performance.getEntriesByType("navigation");
  return {ttfb: n.responseStart - n.startTime, load: n.loadEventEnd - n.startTime};
}"""


@contextmanager
def gateway(model_dir: Path) -> Iterator[str]:
    """A one-worker gateway on a fresh folder; its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sr-console-bench-") as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SUPPORT_ROUTER_")}
        env |= {
            "SUPPORT_ROUTER_VAR_DIR": folder,
            "SUPPORT_ROUTER_MODEL_DIR": str(model_dir),
            "SUPPORT_ROUTER_API_KEYS": json.dumps([
                {"name": f"bench-{role}", "sha256": hash_key(key), "roles": [role]}
                for role, key in KEYS.items()]),
            "SUPPORT_ROUTER_RATE_LIMIT_PER_S": "0",
            "SUPPORT_ROUTER_LOG_LEVEL": "WARNING",
        }
        log = Path(folder) / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", "from router.cli.main import app; app()", "serve",
                 "--port", str(port)], cwd=ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(Server(process, url, "console bench"), log)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=60)


def seed(url: str, handoffs: int) -> tuple[str, str]:
    """A held refund and `handoffs` hand-offs: (the refund's operation, one case id)."""
    headers = {"X-API-Key": KEYS["gateway"]}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        held = api.post("/v1/messages", json={"text": WHEELS, "kind": "refund",
                                              "customer": "ben.ortiz@example.com"}).json()
        assert held["status"] == "awaiting_approval", held
        case_id = ""
        for i in range(handoffs):
            answer = api.post("/v1/messages", json={"text": COMPLAINT.format(i=i),
                                                    "kind": "other"}).json()
            case_id = case_id or answer["case_id"]
        (row,) = api.get("/v1/approvals",
                         headers={"X-API-Key": KEYS["supervisor"]}).json()
    return row["operation"], case_id


def measure(page, path: str, repeats: int) -> tuple[list[float], list[float]]:  # noqa: ANN001
    ttfb, load = [], []
    for _ in range(repeats):
        response = page.goto(path, wait_until="load")
        assert response is not None and response.status == 200, (path, response)
        timing = page.evaluate(TIMING)
        ttfb.append(timing["ttfb"])
        load.append(timing["load"])
    return ttfb, load


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) >= 2 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--handoffs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with gateway(args.model_dir) as url, sync_playwright() as playwright:
        operation, case_id = seed(url, args.handoffs)
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        pages = {
            "nobody": ["/console/sign-in"],
            "supervisor": ["/console/", "/console/approvals",
                           f"/console/approvals/{operation}"],
            "agent": ["/console/handoffs", "/console/handoffs?lang=en&min_wait=",
                      f"/console/handoffs/{case_id}"],
        }
        rows = []
        for person, paths in pages.items():
            context = browser.new_context(base_url=url, viewport={"width": 1280,
                                                                  "height": 800})
            page = context.new_page()
            if person in KEYS:
                page.goto("/console/sign-in")
                page.fill("#key", KEYS[person])
                page.click("button[type=submit]")
                page.wait_for_url("**/console/")
            for path in paths:
                measure(page, path, 2)  # warm: compiled templates, connection
                ttfb, load = measure(page, path, args.repeats)
                shown = path.replace(operation, "{operation}").replace(case_id, "{case}")
                rows.append((person, shown, ttfb, load))
            context.close()
        browser.close()

    print(f"machine: {describe_machine()}")
    print(f"browser: Chromium {CHROMIUM}; demo shop, 1 held refund, {args.handoffs} "
          f"hand-offs; {args.repeats} loads per page after 2 warm-up loads")
    print(f"{'page':<42} {'as':<11} {'TTFB p50':>9} {'p90':>7} {'load p50':>9} {'p90':>7}")
    for person, path, ttfb, load in rows:
        print(f"{path:<42} {person:<11} {statistics.median(ttfb):>7.1f}ms "
              f"{p90(ttfb):>5.1f}ms {statistics.median(load):>7.1f}ms {p90(load):>5.1f}ms")


if __name__ == "__main__":
    main()
