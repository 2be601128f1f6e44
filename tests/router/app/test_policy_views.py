"""The policy page's read model: pure over the stored versions and the history."""

from __future__ import annotations

from datetime import UTC, datetime

from router.app.policy_views import held_out_figures, policy_versions_view
from router.contracts import Guarantee, Policy, PolicyModel
from router.storage.policy_db import StoredVersion

MODEL = PolicyModel(backend="local", name="local-tfidf-lr@abc", artifact_sha="abc")
GUARANTEE = Guarantee(alpha=0.02, delta=0.05, n_certify=900, misroutes=8, upper_bound=0.019)
TEST_METRICS = {
    "n": 600, "accuracy": 0.91, "bootstrap": "percentile, 1000 resamples, seed 0",
    "routing": {"coverage": {"value": 0.8, "ci95": [0.77, 0.83]},
                "misroute_rate_routed": {"value": 0.012, "ci95": [0.006, 0.02]}},
}


def _at(day: int) -> datetime:
    return datetime(2026, 12, day, tzinfo=UTC)


def _event(day: int, action: str, version: str, previous: str | None,
           by: str | None) -> dict[str, object]:
    return {"at": _at(day).isoformat(), "action": action, "version": version,
            "previous": previous, "by": by}


def test_held_out_figures_list_the_rates_in_the_pages_order() -> None:
    figures = held_out_figures(TEST_METRICS)
    assert figures is not None
    assert (figures.n, figures.accuracy) == (600, 0.91)
    assert [(r.name, r.value, r.low, r.high) for r in figures.rates] == [
        ("misroute_rate_routed", 0.012, 0.006, 0.02), ("coverage", 0.8, 0.77, 0.83)]
    assert held_out_figures({}) is None  # the default policy `train` writes has none


def test_versions_newest_first_with_who_last_made_each_active() -> None:
    trained = Policy(version="trained", model=MODEL, threshold=0.85, guarantee=GUARANTEE)
    v1 = Policy(version="v1", model=MODEL, threshold=0.7, metrics_test=TEST_METRICS)
    view = policy_versions_view(
        slot="local", versions=[StoredVersion("trained", _at(1), trained),
                                StoredVersion("v1", _at(2), v1)], served_version="v1",
        history=[_event(1, "adopt", "trained", None, None),
                 _event(2, "publish", "v1", "trained", "alice"),
                 _event(3, "rollback", "trained", "v1", "bob"),
                 _event(4, "publish", "v1", "trained", "carol")])
    assert (view.active_version, view.rollback_to, view.served_version) == ("v1", "trained",
                                                                             "v1")
    assert [(v.version, v.active, v.published_by, v.published_at) for v in view.versions] == [
        ("v1", True, "carol", _at(4)), ("trained", False, "bob", _at(3))]
    assert view.versions[1].guarantee == GUARANTEE and view.versions[1].held_out is None
    assert view.versions[0].held_out is not None
    assert [e.by for e in view.history] == ["carol", "bob", "alice", None]


def test_nothing_published_yet() -> None:
    view = policy_versions_view(slot="local", versions=[], history=[], served_version="x")
    assert (view.active_version, view.rollback_to, view.versions) == (None, None, [])


def test_a_version_that_does_not_load_is_listed_with_why() -> None:
    trained = Policy(version="trained", model=MODEL, threshold=0.85)
    view = policy_versions_view(
        slot="local", served_version="trained",
        versions=[StoredVersion("trained", _at(1), trained),
                  StoredVersion("v1", _at(2), None, "field 'threshold': too big")],
        history=[_event(1, "adopt", "trained", None, None),
                 _event(2, "publish", "v1", "trained", "alice")])
    assert (view.active_version, view.active, view.rollback_to) == ("v1", None, "trained")
    assert [(u.version, u.active, u.problem) for u in view.unreadable] == [
        ("v1", True, "field 'threshold': too big")]
