"""The policy contract: everything a decision reads is checked when a policy is built."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from router.contracts import NEVER_ROUTE, ROUTES, Calibrator, Policy

BASE: dict[str, Any] = {"version": "v1", "model": {"backend": "local", "name": "m"},
                        "threshold": 0.5}
KNOTS = {"x": [0.0, 0.5, 1.0], "y": [0.0, 0.4, 1.0]}


def _isotonic(**routes: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "isotonic", "params": {r: routes.get(r, KNOTS) for r in ROUTES}}


def _refused(extra: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(ValidationError) as info:
        Policy.model_validate({**BASE, **extra})
    error: dict[str, Any] = dict(info.value.errors()[0])
    return error


@pytest.mark.parametrize(
    ("calibrator", "loc", "says"),
    [
        ({"kind": "temperature", "params": {}}, ("calibrator", "params"),
         "temperature: Field required"),
        ({"kind": "temperature", "params": {"temperature": 0}}, ("calibrator", "params"),
         "greater than 0"),
        ({"kind": "temperature", "params": {"temperature": -1.5}}, ("calibrator", "params"),
         "greater than 0"),
        ({"kind": "temperature", "params": {"temperature": "inf"}}, ("calibrator", "params"),
         "finite"),
        ({"kind": "temperature", "params": {"temperature": 1.5, "t": 2}},
         ("calibrator", "params"), "t: Extra inputs"),
        ({"kind": "isotonic", "params": {}}, ("calibrator", "params"), "every route"),
        (_isotonic(refund={"x": [], "y": []}), ("calibrator", "params"), "refund.x"),
        (_isotonic(account={"x": [0.0, 0.6, 0.5], "y": [0.0, 0.5, 1.0]}),
         ("calibrator", "params"), "account.x: knots must be strictly increasing"),
        (_isotonic(other={"x": [0.0, 0.5, 1.0], "y": [0.0, 1.5, 1.0]}),
         ("calibrator", "params"), "other.y.1"),
        (_isotonic(unclear={"x": [0.0, 1.0], "y": [0.0]}), ("calibrator", "params"),
         "x has 2 knots but y has 1"),
        ({"kind": "none", "params": {"temperature": 2}}, ("calibrator", "params"),
         "takes no params"),
        ({"kind": "platt", "params": {}}, ("calibrator", "kind"), "'isotonic'"),
    ],
    ids=["temperature-without-params", "temperature-zero", "temperature-negative",
         "temperature-infinite", "temperature-extra-param", "isotonic-empty",
         "isotonic-no-knots", "isotonic-decreasing-x", "isotonic-y-above-1",
         "isotonic-lengths", "none-with-params", "unknown-kind"],
)
def test_each_calibrator_kind_takes_exactly_its_parameters(
    calibrator: dict[str, Any], loc: tuple[str, ...], says: str
) -> None:
    error = _refused({"calibrator": calibrator})
    assert error["loc"] == loc
    assert says in error["msg"]


def test_valid_calibrators_are_kept_as_they_were_written() -> None:
    temperature = Policy.model_validate(
        {**BASE, "calibrator": {"kind": "temperature", "params": {"temperature": 2}}})
    assert temperature.calibrator == Calibrator(kind="temperature", params={"temperature": 2.0})
    isotonic = Policy.model_validate({**BASE, "calibrator": _isotonic()})
    assert isotonic.calibrator.params == {r: KNOTS for r in ROUTES}


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"threshold": -0.1}, ("threshold",)),
        ({"threshold": 1.2}, ("threshold",)),
        ({"threshold": float("nan")}, ("threshold",)),
        ({"per_route_thresholds": {"refund": -5, "account": 0.5}},
         ("per_route_thresholds", "refund")),
        ({"per_route_thresholds": {"refund": 0.5, "account": 7}},
         ("per_route_thresholds", "account")),
        ({"per_route_thresholds": {"other": float("inf")}}, ("per_route_thresholds", "other")),
        ({"per_route_thresholds": {"clarify": 0.5}}, ("per_route_thresholds", "clarify", "[key]")),
        ({"min_margin": 2.0}, ("min_margin",)),
    ],
    ids=["threshold-negative", "threshold-above-1", "threshold-nan", "route-negative",
         "route-7", "route-infinite", "route-unknown", "margin-above-1"],
)
def test_thresholds_are_finite_and_in_0_1(extra: dict[str, Any], loc: tuple[str, ...]) -> None:
    assert _refused(extra)["loc"] == loc


def test_a_route_that_never_routes_keeps_its_threshold() -> None:
    policy = Policy.model_validate({**BASE, "per_route_thresholds": {
        "refund": 0.0, "account": 1.0, "other": NEVER_ROUTE}})
    assert policy.per_route_thresholds == {"refund": 0.0, "account": 1.0, "other": NEVER_ROUTE}


@pytest.mark.parametrize(
    "version",
    ["x" * 300, "x" * 65, "", "../active", "v 1", "-v1", "v1\n", "polícy"],
    ids=["300-chars", "65-chars", "empty", "path", "space", "leading-dash", "newline",
         "non-ascii"],
)
def test_a_version_is_a_short_safe_name(version: str) -> None:
    assert _refused({"version": version})["loc"] == ("version",)


@pytest.mark.parametrize(
    "version",
    ["x" * 64, "local-default-1a2b3c4d", "local-20260315T120000Z-1a2b3c4d",
     "typesafe-uncalibrated", "0.1.0", "hand-v2", "p-0.5", "week_11"],
)
def test_the_versions_train_and_calibrate_write_are_accepted(version: str) -> None:
    assert Policy.model_validate({**BASE, "version": version}).version == version


def test_unknown_fields_are_refused() -> None:
    """A misspelt field would otherwise be dropped, and the policy route without it."""
    assert _refused({"per_route_threshold": {"refund": 0.9}})["loc"] == ("per_route_threshold",)
