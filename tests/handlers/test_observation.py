from __future__ import annotations

import pytest
from pydantic import ValidationError

from handlers.observation import Observation, fail, success, warning


def test_constructors_set_status_and_artifacts() -> None:
    ok = success("refund_issued", "done", refund_id=2)
    assert ok.status == "success" and ok.ok and ok.artifacts == {"refund_id": 2}
    held = warning("refund_held", "held", next_actions=["await_supervisor"])
    assert held.ok and held.next_actions == ["await_supervisor"]


def test_an_error_says_whether_to_retry_and_stop() -> None:
    err = fail("refund_service_unreachable", "no answer", retry=True, stop=True,
               retry_after_s=30.0)
    assert not err.ok and err.retry and err.stop and err.retry_after_s == 30.0
    with pytest.raises(TypeError):
        fail("x", "y")  # type: ignore[call-arg]


def test_observations_round_trip_as_json() -> None:
    obs = success("address_updated", "ok", line1="Schönhauser Allee 12")
    assert Observation.model_validate_json(obs.model_dump_json()) == obs


def test_status_is_checked() -> None:
    with pytest.raises(ValidationError):
        Observation(status="fine", code="x", summary="y")  # type: ignore[arg-type]
