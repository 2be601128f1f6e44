"""Starting `support-router serve`: a port in use is refused at once; a first start that
must train the model answers health checks while it trains, and trains once.

The training test gives the gateway a tiny labelled data folder (48 rows written here)
and an empty model folder, so it has to train before it can serve, with two workers.
While it trains, `/healthz` answers 200, `/readyz` 503 saying what it waits for, and a
routing request 503 `starting` with a `Retry-After`; afterwards it serves normally, and
the log shows one training, not one per worker. A first start whose training fails
(no data) ends with a non-zero exit code and the reason, instead of answering 503 for
ever.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from router.app.bootstrap import TRAINING_LOCK
from router.app.training import TrainResult
from tests.servers import GatewayProcess, free_port, gateway_env

CLI = str(Path(sys.executable).with_name("support-router"))
START_TIMEOUT_S = 180.0
TRAIN_TIMEOUT_S = 420.0
TEXTS = {
    "refund": ["Please refund my order O-{n}, it arrived broken",
               "I want my money back for order O-{n}",
               "Refund the {n} dollars for the missing part please",
               "The blender from O-{n} is faulty, refund it please"],
    "account": ["Please change my delivery address to {n} Oak Street",
                "Update the phone number on my account to 0770 {n}",
                "Change my e-mail to user{n}@example.com",
                "Unsubscribe me from the newsletter, account {n}"],
    "other": ["Where is my parcel O-{n}? It is late",
              "Do you ship to Norway? Asking about {n} items",
              "What are the opening hours of store {n}",
              "How do I track order O-{n}"],
    "unclear": ["hello {n}", "help", "?? {n}", "it doesn't work {n}",
                "refund my order O-{n} and change my address to {n} Elm Road",
                "cancel order O-{n} and also update my phone number"],
}


def _tiny_routes(folder: Path) -> Path:
    """12 rows per route; two of every six unclear ones are two requests in one."""
    folder.mkdir(parents=True)
    lines, n = [], 0
    for label, texts in TEXTS.items():
        for k in range(12):
            n += 1
            tags = ["multi_request"] if label == "unclear" and k % 6 >= 4 else []
            row = {"id": f"tiny-{n:04d}", "text": texts[k % len(texts)].format(n=1000 + n),
                   "label": label, "lang": "en", "tags": tags}
            lines.append(json.dumps(row))
    (folder / "tiny.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_port_in_use_is_refused_before_anything_loads(tmp_path: Path) -> None:
    empty_models = tmp_path / "models"
    env = gateway_env(empty_models, empty_models / "policy.json", tmp_path / "var")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([CLI, "serve", "--port", str(port)], env=env,
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr
    # Refused before the missing model was trained (or anything else was started).
    assert "training" not in done.stderr + done.stdout
    assert not empty_models.exists() or not any(empty_models.iterdir())


def test_a_first_start_whose_training_fails_exits_non_zero_and_says_why(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models"
    env = gateway_env(models, models / "policy.json", tmp_path / "var",
                      routes_data=str(tmp_path / "no-such-data"))
    done = subprocess.run([CLI, "serve", "--port", str(free_port()), "--workers", "2"],
                          env=env, capture_output=True, text=True, timeout=TRAIN_TIMEOUT_S)
    # Both workers fail in turn; the gateway stops instead of respawning them.
    assert done.returncode == 3, done.stderr[-3000:]
    assert "could not start (data_not_found: no labelled data at" in done.stderr + done.stdout
    assert "it stopped rather than restart workers that cannot start" in done.stderr


def test_a_first_start_trains_once_and_answers_health_checks_meanwhile(
    tmp_path: Path,
) -> None:
    models = tmp_path / "models"
    env = gateway_env(models, models / "policy.json", tmp_path / "var",
                      routes_data=str(_tiny_routes(tmp_path / "routes")),
                      steering_data=str(tmp_path / "no-steering"))
    (tmp_path / "no-steering").mkdir()
    with GatewayProcess(ready_path="/healthz") as server:
        server.start(env, ["--workers", "2"], tmp_path / "serve.log")
        server.wait_ready(START_TIMEOUT_S)  # /healthz: the port is open, training or not

        ready = httpx.get(f"{server.url}/readyz", timeout=10)
        assert ready.status_code == 503, ready.text
        assert ready.json()["ready"] is False
        assert ready.json()["waiting_for"] == ["local model training"]
        refused = httpx.post(f"{server.url}/v1/route", json={"text": "hello"}, timeout=10)
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "starting"
        assert int(refused.headers["Retry-After"]) >= 1
        assert (models / TRAINING_LOCK).exists()

        # Readiness is per worker: the one that trained is ready before the other has
        # loaded what it wrote. Each new connection lands on either worker (SO_REUSEPORT),
        # so ten ready answers in a row mean both are (one alone would get all ten with
        # odds of 1 in 512).
        deadline, in_a_row = time.monotonic() + TRAIN_TIMEOUT_S, 0
        while in_a_row < 10:
            assert server.process is not None and server.process.poll() is None, \
                server.output()[-4000:]
            assert time.monotonic() < deadline, server.output()[-4000:]
            ready_now = httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
            in_a_row = in_a_row + 1 if ready_now else 0
            if not ready_now:
                time.sleep(0.5)
        routed = httpx.post(f"{server.url}/v1/route", json={"text": "please refund O-1002"},
                            timeout=30)
        assert routed.status_code == 200, routed.text
        assert server.stop(timeout=60) == 0

    log = server.output()
    assert log.count("training it now") == 1, log[-4000:]
    assert log.count("trained the local model in") == 1
    assert (models / "local-route-model.json").exists() and (models / "policy.json").exists()


def test_workers_that_cannot_load_the_model_stop_the_gateway(
    trained: TrainResult, tmp_path: Path,
) -> None:
    """A model file that is there but broken: no training starts, every worker's start
    fails the same way, so the gateway stops with the reason instead of respawning."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(trained.policy_path, models / "policy.json")
    (models / trained.model_path.name).write_text('{"format": "not a model"}')
    env = gateway_env(models, models / "policy.json", tmp_path / "var")
    done = subprocess.run([CLI, "serve", "--port", str(free_port()), "--workers", "2"],
                          env=env, capture_output=True, text=True, timeout=TRAIN_TIMEOUT_S)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "error (start_failed): the gateway could not start (" in done.stderr
    assert "Traceback" not in done.stderr.split("error (start_failed)")[1]
