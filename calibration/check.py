"""`support-router check`: does a published guarantee still hold on newly labelled traffic?

At the policy's threshold(s), with n routed requests and k misroutes among the new
rows, an exact one-sided binomial test of H0 "misroute rate ≤ α" (scipy's `binomtest`,
alternative "greater"): a small p-value means k misroutes are too many to be chance if
the promised rate held. Per-route policies test each route at significance/3.

The check also says when the predictions were made by another model or another
question definition than the one the policy was certified for: the test then says
nothing about the published policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binomtest

from calibration.calibrate import score_with_policy
from calibration.certify import clopper_pearson_upper
from calibration.predictions import Predictions, local_question_sha
from router.contracts import Policy
from router.errors import CalibrationError

DEFAULT_SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class GuaranteeTest:
    """One exact binomial test at one threshold."""

    scope: str
    threshold: float
    routed: int
    misroutes: int
    p_value: float
    significance: float
    upper_bound: float

    @property
    def observed_rate(self) -> float:
        return self.misroutes / self.routed if self.routed else 0.0

    @property
    def holds(self) -> bool:
        return self.p_value >= self.significance


@dataclass(frozen=True)
class CheckResult:
    policy_version: str
    alpha: float
    n: int
    tests: list[GuaranteeTest]
    warnings: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return all(t.holds for t in self.tests)


def expected_question_sha(policy: Policy) -> str | None:
    """The question hash predictions must carry to be comparable with the policy."""
    sha = policy.model.artifact_sha
    if sha is None:
        return None
    return local_question_sha(sha) if policy.model.backend == "local" else sha


def model_mismatches(policy: Policy, predictions: Predictions) -> list[str]:
    """Plain-language warnings when predictions and policy belong to different models."""
    problems = []
    if predictions.model != policy.model.name:
        problems.append(f"predictions come from model {predictions.model!r} but the policy was "
                        f"certified for {policy.model.name!r}")
    expected = expected_question_sha(policy)
    if expected is not None and predictions.question_sha != expected:
        problems.append("the question definition differs: predictions "
                        f"{predictions.question_sha[:12]}, policy {expected[:12]}")
    return problems


def check_guarantee(
    labels: np.ndarray,
    probabilities: np.ndarray,
    policy: Policy,
    *,
    significance: float = DEFAULT_SIGNIFICANCE,
) -> CheckResult:
    """Test the policy's recorded α on new labelled rows.

    Parameters
    ----------
    labels : ndarray of str, shape (n,)
    probabilities : ndarray of shape (n, 4)
        Raw model probabilities (the policy's calibrator is applied here).
    policy : Policy
        Must carry a guarantee.
    significance : float
        Level of the test (per route: divided by 3).

    Returns
    -------
    CheckResult
    """
    if policy.guarantee is None:
        raise CalibrationError(f"policy {policy.version} carries no guarantee; nothing to check "
                               "(calibrate one with `support-router calibrate`)",
                               code="no_guarantee")
    alpha = policy.guarantee.alpha
    labels = np.asarray(labels)
    scored = score_with_policy(probabilities, policy)
    misrouted = scored.routed & (scored.choices != labels)
    scopes: dict[str, np.ndarray]
    thresholds: dict[str, float]
    if policy.per_route_thresholds:
        scopes = {r: scored.choices == r for r, t in policy.per_route_thresholds.items()
                  if t <= 1.0}
        thresholds = {str(r): t for r, t in policy.per_route_thresholds.items()}
        level = significance / max(1, len(scopes))
    else:
        scopes = {"all": np.ones(len(labels), dtype=bool)}
        thresholds = {"all": policy.threshold}
        level = significance
    tests = []
    for scope, mask in scopes.items():
        n, k = int((scored.routed & mask).sum()), int((misrouted & mask).sum())
        p_value = binomtest(k, n, alpha, alternative="greater").pvalue if n else 1.0
        tests.append(GuaranteeTest(scope, float(thresholds[scope]), n, k, float(p_value), level,
                                   clopper_pearson_upper(k, n, confidence=1 - level)))
    return CheckResult(policy.version, alpha, len(labels), tests)


def format_check(result: CheckResult) -> str:
    """What `check` prints: one line per test and a verdict a person can act on."""
    lines = [f"policy {result.policy_version}: promised misroute rate <= {result.alpha:g}, "
             f"{result.n} newly labelled rows"]
    lines += [f"warning: {w}" for w in result.warnings]
    for t in result.tests:
        scope = "" if t.scope == "all" else f"route {t.scope}: "
        lines.append(
            f"{scope}threshold {t.threshold:.2f}: {t.misroutes} misroutes of {t.routed} routed "
            f"(rate {t.observed_rate:.4f}, upper bound {t.upper_bound:.4f}); exact binomial "
            f"p = {t.p_value:.4g} at significance {t.significance:.4g} -> "
            f"{'holds' if t.holds else 'FAILS'}"
        )
    if result.holds:
        lines.append("the guarantee still holds on this traffic")
    else:
        failing = [t for t in result.tests if not t.holds]
        worst = failing[0]
        lines.append(
            f"the guarantee no longer holds: {worst.misroutes} misroutes in {worst.routed} routed "
            f"requests are too many for a rate of {result.alpha:g} (chance alone would give this "
            f"with probability {worst.p_value:.2g}). Recalibrate on recent labels "
            "(`support-router calibrate`) or roll back (`support-router policy rollback`)."
        )
    return "\n".join(lines)
