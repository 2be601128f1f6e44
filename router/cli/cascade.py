"""`support-router certify-cascade`: certify the local model, then e5, as one router.

Registered on the main app by `register(app)`. It trains nothing: it reads two model
folders `train` wrote (each with its out-of-fold scores) and writes the cascade's policy
(`router.app.cascade`); `SUPPORT_ROUTER_BACKEND=cascade` then serves it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from router.app.cascade import CascadeResult


def format_cascade(result: CascadeResult) -> str:
    """What `certify-cascade` prints: the certified pair, or why there is none."""
    policy, cert = result.policy, result.certification
    stages = policy.stages or []
    lines = [f"policy {result.policy_path}  version {policy.version}"]
    lines += [f"  stage {i + 1}: {s.model.name}  threshold {s.threshold:.2f}"
              for i, s in enumerate(stages)]
    if policy.guarantee is None:
        lines.append(f"no (t_fast, t_strong) pair certified on {cert.n} rows: strictest "
                     "thresholds, no guarantee")
    else:
        g = policy.guarantee
        lines.append(f"certified: misroutes among routed <= {g.alpha:g} with probability "
                     f">= {1 - g.delta:g}; {cert.misroutes} misroutes of {cert.routed} routed "
                     f"of {cert.n} rows (upper bound {g.upper_bound:.4f}); the fast stage "
                     f"answers {cert.fast_share:.1%}")
    return "\n".join(lines)


def certify_cascade(
    fast: Annotated[Path | None, typer.Option(
        help="Folder with the local model and its out-of-fold scores (default: model_dir).")
    ] = None,
    strong: Annotated[Path | None, typer.Option(
        help="Folder with the e5 model and its out-of-fold scores (default: model_dir).")
    ] = None,
    out: Annotated[Path | None, typer.Option(
        help="Cascade policy file (default: cascade_policy_path).")] = None,
    alpha: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Largest misroute rate among routed requests.")] = 0.02,
    delta: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Allowed probability that the promise fails.")] = 0.05,
    as_json: Annotated[bool, typer.Option("--json", help="Print the policy as JSON.")] = False,
) -> None:
    """Certify the cascade local -> e5 on both models' out-of-fold scores and write its
    policy (thresholds searched jointly, one Learn-then-Test guarantee)."""
    from router.app.cascade import certify_cascade_models
    from router.errors import CalibrationError
    from router.settings import get_settings

    if not (0 < alpha < 1 and 0 < delta < 1):
        raise CalibrationError(f"alpha={alpha}, delta={delta}; both must be in (0, 1)")
    settings = get_settings()
    result = certify_cascade_models(
        settings, fast_dir=fast or settings.model_dir, strong_dir=strong or settings.model_dir,
        out=out or settings.cascade_policy_path, alpha=alpha, delta=delta)
    if as_json:
        typer.echo(json.dumps(result.policy.model_dump(mode="json"), indent=2))
    else:
        typer.echo(format_cascade(result))


def register(app: typer.Typer) -> None:
    """Add `certify-cascade` to the main `support-router` app."""
    app.command("certify-cascade")(certify_cascade)
