"""While the services are not built, the gate answers: health yes, everything else 503.

A `TestClient` used without `with` never runs the lifespan, which is exactly an app
whose start-up has not finished.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from router.gateway.app import create_app
from router.settings import Settings


def test_a_starting_gateway_answers_health_and_says_what_it_waits_for(
    settings: Settings,
) -> None:
    app = create_app(settings)
    app.state.startup.waiting_for = ["local model training"]
    client = TestClient(app)
    assert client.get("/healthz").status_code == 200
    assert client.get("/openapi.json").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json() == {"ready": False, "status": "starting",
                            "waiting_for": ["local model training"]}
    for response in (client.post("/v1/route", json={"text": "hello"}),
                     client.get("/v1/handoffs"), client.get("/v1/nope")):
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "starting"
        assert response.headers["Retry-After"] == "5"
        assert "local model training" in response.json()["error"]["message"]
