"""Build the running system from settings: engine, schema, models, policies, services.

The local model is trained on first start when its artifact is missing, so a fresh
clone serves without a separate training step. A remote backend (typesafe) is always
paired with the local model as its fallback, each with its own policy: a threshold
chosen for one model never silently applies to another.

A gateway configured for the cascade (local, then e5) whose e5 stage or cascade policy
is missing starts as the local model alone, under the local policy slot, and the rest
is trained, certified and swapped in by a background thread (`start_cascade_join`,
router/app/cascade_join.py): e5 takes far longer to train than a first start may.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from sqlalchemy import Engine

from handlers.desk import SupportDesk, build_desk
from router.app.cascade_join import CascadeJoin, JoinStep
from router.app.drift import DriftGauges
from router.app.experiment_sync import ExperimentFollower
from router.app.policy_sync import PolicyFollower
from router.app.services import Services
from router.app.training import train_local
from router.contracts import ExperimentConfig, Policy, PolicyModel, VariantConfig
from router.errors import ArtifactError, CalibrationError, InvalidInput, SupportRouterError
from router.models.base import DecisionModel
from router.models.breaker import CircuitBreaker, GuardedRouteModel
from router.models.local.model import LocalRouteModel
from router.routing.service import BoundModel, LiveExperiment, RouterService
from router.routing.shadows import ShadowEnqueuer
from router.settings import Settings, resolve_path
from router.storage.db import make_engine, migrate
from router.storage.decision_log import DecisionLog
from router.storage.experiment_db import ExperimentDB
from router.storage.policy_db import PolicyDB, policy_slot
from router.storage.policy_store import active_policy_path, load_policy, load_serving_policy
from router.storage.shadow_stream import ShadowStreamWriter
from router.telemetry.metrics import export_cascade_joined, track_breaker

logger = logging.getLogger(__name__)


TRAINING_LOCK = ".training.lock"
PROGRESS_EVERY_S = 30.0
LOCK_POLL_S = 0.5


def _artifact_paths(settings: Settings, backend: str) -> tuple[Path, Path]:
    if backend == "local":
        return settings.local_model_path, settings.policy_path
    return settings.e5_model_path, settings.e5_policy_path


def _is_trained(settings: Settings, backend: str) -> bool:
    # The policy is written after the model: both there means training finished.
    return all(path.exists() for path in _artifact_paths(settings, backend))


def models_to_train(settings: Settings) -> list[str]:
    """The backends a start with these settings would have to train first (usually none).

    Not e5 for a cascade: the gateway serves the local model meanwhile and the e5 stage
    joins once trained (`start_cascade_join`)."""
    backends = ["local", "e5"] if settings.backend == "e5" else ["local"]
    return [backend for backend in backends if not _is_trained(settings, backend)]


def cascade_is_ready(settings: Settings) -> bool:
    """Both stages trained and the cascade's policy written: it loads without waiting."""
    return (_is_trained(settings, "local") and _is_trained(settings, "e5")
            and settings.cascade_policy_path.exists())


@contextmanager
def training_lock(model_dir: Path, *,
                  done: Callable[[], bool] = lambda: False) -> Iterator[bool]:
    """Held while a model is trained into `model_dir`: one process trains, others wait.

    Yields True once held; False, without it, as soon as `done()` (the artifact this
    caller waits for is there) while another process holds it: that process may go on
    to train something else (the cascade's e5 stage) for much longer.

    Taken only when something must be trained, so a read-only model folder (an image
    with the models in it) never needs to be writable. `flock` is released by the
    kernel if the holder dies, so a killed trainer never blocks the next start.
    """
    model_dir.mkdir(parents=True, exist_ok=True)
    with (model_dir / TRAINING_LOCK).open("a") as handle:
        if not _try_lock(handle):
            logger.warning("another process is training a model in %s; waiting for it",
                           model_dir)
            while not _try_lock(handle):
                if done():
                    yield False
                    return
                time.sleep(LOCK_POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


STARTING = ("a few minutes on 2 cores; the gateway answers /healthz meanwhile, and /readyz "
            "once it is loaded")


def ensure_trained(settings: Settings, backend: str = "local", *,
                   meanwhile: str = STARTING) -> None:
    """Train the local model (or its e5 variant) from the labelled data if it or its policy
    is missing, so a fresh install serves without a separate training step.

    Once per model folder, whichever processes start at the same time (`training_lock`);
    its stages are logged, with a line every 30 s while it runs, so a first start that
    takes minutes cannot be mistaken for a hang.
    """
    if _is_trained(settings, backend):
        return
    model_path, policy_path = _artifact_paths(settings, backend)
    with training_lock(settings.model_dir, done=lambda: _is_trained(settings, backend)):
        if _is_trained(settings, backend):  # another process trained it while we waited
            logger.warning("the %s model was trained by another process; loading it", backend)
            return
        logger.warning("no %s model at %s: training it now from %s (%s)", backend,
                       model_path, settings.routes_data, meanwhile)
        started = time.monotonic()
        done = threading.Event()
        threading.Thread(target=_report_progress, args=(backend, started, done),
                         name="training-progress", daemon=True).start()
        try:
            result = train_local(
                settings.routes_data,
                settings.model_dir,
                policy_path=policy_path,
                steering_data=settings.steering_data,
                backend=backend,
            )
        finally:
            done.set()
            _release_training_workers()
        logger.warning("trained the %s model in %.0f s: %s, policy %s (threshold %.2f)",
                       backend, time.monotonic() - started, result.model_path,
                       result.policy_path, result.policy.threshold)


def _release_training_workers() -> None:
    """Stop the worker processes training fitted its folds in (joblib keeps them for
    reuse): a server that trained at start has no further use for them, and their
    manager thread would hold up the process's exit by the length of its stop grace."""
    from joblib.externals.loky import get_reusable_executor  # type: ignore[import-untyped]

    get_reusable_executor().shutdown(wait=True)


def _report_progress(backend: str, started: float, done: threading.Event) -> None:
    while not done.wait(PROGRESS_EVERY_S):
        logger.warning("still training the %s model (%.0f s so far)", backend,
                       time.monotonic() - started)


def load_local(settings: Settings) -> BoundModel:
    """The embedded model and its policy, trained if either is missing."""
    ensure_trained(settings)
    model = LocalRouteModel.load(settings.local_model_path)
    return BoundModel(model, load_serving_policy(settings.policy_path))


def load_e5(settings: Settings) -> BoundModel:
    """The [e5] backend and its policy, trained if either is missing."""
    from router.models.e5.model import E5RouteModel

    ensure_trained(settings, "e5")
    return BoundModel(
        E5RouteModel.load(settings.e5_model_path), load_serving_policy(settings.e5_policy_path)
    )


def load_cascade(settings: Settings) -> BoundModel:
    """The cascade local → e5 under its certified policy (`support-router
    certify-cascade`), its stages loaded from the configured model folder.

    Raises
    ------
    ArtifactError
        No cascade policy, or one certified for other stage models than these.
    """
    from router.models.e5.model import E5RouteModel
    from router.routing.cascade import CascadeModel

    ensure_trained(settings)
    ensure_trained(settings, "e5")
    if not settings.cascade_policy_path.exists():
        raise ArtifactError(f"no cascade policy at {settings.cascade_policy_path}; run "
                            "`support-router certify-cascade` once both models are trained")
    policy = load_serving_policy(settings.cascade_policy_path)
    if policy.stages is None:
        raise ArtifactError(f"policy {policy.version} at {settings.cascade_policy_path} is "
                            "not a cascade policy")
    models: list[DecisionModel] = [LocalRouteModel.load(settings.local_model_path),
                                   E5RouteModel.load(settings.e5_model_path)]
    return BoundModel(CascadeModel(models, policy.stages), policy)


def certify_cascade_if_missing(settings: Settings) -> None:
    """Certify the cascade of the model folder's two stages if its policy is missing, and
    write the policy only if it carries a guarantee, so every start tries again rather
    than serve a cascade that was never certified. Once per model folder (`training_lock`).

    Raises
    ------
    CalibrationError
        `not_certified`: no pair of stage thresholds keeps the promise on these rows.
    """
    from router.app.cascade import certify_cascade_models

    out = settings.cascade_policy_path
    if out.exists():
        return
    with training_lock(settings.model_dir, done=out.exists):
        if out.exists():  # another process certified it while we waited
            return
        draft = out.with_name(f".{out.name}.draft")
        result = certify_cascade_models(settings, fast_dir=settings.model_dir,
                                        strong_dir=settings.model_dir, out=draft,
                                        alpha=settings.cascade_alpha)
        if result.policy.guarantee is None:
            draft.unlink()
            cert = result.certification
            raise CalibrationError(
                f"no pair of stage thresholds keeps misroutes among routed requests at most "
                f"{settings.cascade_alpha:g} on the {cert.n} train and calibration rows; no "
                "cascade policy was written (more labelled data would certify one; "
                "`support-router certify-cascade` shows the search)", code="not_certified")
        draft.replace(out)
        logger.warning("certified the cascade: policy %s at %s", result.policy.version, out)


E5_MEANWHILE = ("20 to 40 minutes on 2 cores on the shipped data; the gateway serves the "
                "local model meanwhile, and the cascade joins once e5 is trained and the "
                "cascade certified")


def start_cascade_join(settings: Settings, engine: Engine,
                       policies: PolicyFollower) -> CascadeJoin:
    """Train e5 and certify the cascade where missing, in a daemon thread, then serve the
    cascade under its own policy slot (router/app/cascade_join.py)."""
    steps = []
    if not _is_trained(settings, "e5"):
        steps.append(JoinStep("cascade: training the e5 stage",
                              lambda: ensure_trained(settings, "e5", meanwhile=E5_MEANWHILE)))
    steps.append(JoinStep("cascade: certifying the cascade policy",
                          lambda: certify_cascade_if_missing(settings)))

    def join(bound: BoundModel) -> None:
        policies.follow(bound, PolicyDB(engine, "cascade"),
                        policy_file=settings.cascade_policy_path)

    joining = CascadeJoin(steps, load=lambda: load_cascade(settings), join=join)
    joining.start()
    return joining


def load_typesafe(settings: Settings) -> BoundModel:
    """The remote model behind a circuit breaker, with its own policy file if one exists."""
    from router.models.typesafe import build_typesafe_model

    breaker = CircuitBreaker(
        failure_threshold=settings.breaker_failure_threshold, reset_s=settings.breaker_reset_s
    )
    model = GuardedRouteModel(build_typesafe_model(settings), breaker)
    track_breaker(model.name, breaker)  # exported as support_router_breaker_state
    if settings.typesafe_policy_path.exists():
        return BoundModel(model, load_serving_policy(settings.typesafe_policy_path))
    logger.warning(
        "no typesafe policy at %s; using an uncertified threshold of %.2f until "
        "`support-router calibrate` writes one",
        settings.typesafe_policy_path,
        settings.typesafe_default_threshold,
    )
    policy = Policy(
        version="typesafe-uncalibrated",
        model=PolicyModel(backend="typesafe", name=model.name),
        threshold=settings.typesafe_default_threshold,
        notes="uncertified default; calibrate on labelled data before relying on it",
    )
    return BoundModel(model, policy)


def load_backend(settings: Settings, backend: str) -> BoundModel:
    """A backend with its own policy, for offline tools (eval, score)."""
    if backend == "local":
        return load_local(settings)
    if backend == "e5":
        return load_e5(settings)
    if backend == "typesafe":
        return load_typesafe(settings)
    if backend == "cascade":
        return load_cascade(settings)
    raise ArtifactError(f"unknown backend {backend!r}; choose local, e5, typesafe or cascade")


def load_variant(settings: Settings, variant: VariantConfig) -> BoundModel:
    """An experiment variant's model with its own policy; a local policy must name the
    loaded artifact (a threshold never silently moves to another model). Relative paths
    in the experiment are resolved against the data dir, like every path setting."""

    def _path(value: str | Path) -> Path:
        return resolve_path(Path(value), settings.data_dir)

    if variant.backend == "typesafe":
        chosen = settings.model_copy(update={"typesafe_model": variant.model or
                                             settings.typesafe_model})
        bound = load_typesafe(chosen)
        return BoundModel(bound.model, load_policy(_path(variant.policy))
                          if variant.policy else bound.policy)
    if variant.model is None and variant.policy is None:
        return load_backend(settings, variant.backend)
    model: DecisionModel
    if variant.backend == "e5":
        from router.models.e5.model import E5RouteModel

        model = E5RouteModel.load(_path(variant.model or settings.e5_model_path))
        policy = load_policy(_path(variant.policy or settings.e5_policy_path))
    else:
        model = LocalRouteModel.load(_path(variant.model or settings.local_model_path))
        policy = load_policy(_path(variant.policy or settings.policy_path))
    if policy.model.name != model.name:
        raise ArtifactError(
            f"variant {variant.name!r}: policy {policy.version} is for model "
            f"{policy.model.name}, but the variant loads {model.name}")
    return BoundModel(model, policy)


def load_experiment(settings: Settings, config: ExperimentConfig) -> LiveExperiment:
    """Load every live and shadow variant of an experiment.

    Raises
    ------
    InvalidInput
        `invalid_variant`, naming the first variant that does not load (a missing or
        broken model or policy file, a policy for another model).
    """
    def _load(variant: VariantConfig) -> BoundModel:
        try:
            return load_variant(settings, variant)
        except (SupportRouterError, OSError, ValueError) as exc:
            why = exc.message if isinstance(exc, SupportRouterError) else type(exc).__name__
            raise InvalidInput(f"variant {variant.name!r} does not load: {why}",
                               code="invalid_variant") from None

    return LiveExperiment(
        config,
        variants={v.name: _load(v) for v in config.variants},
        shadows={v.name: _load(v) for v in config.shadows},
    )


SHADOW_ENQUEUE_TIMEOUT_S = 0.1
"""Redis's socket timeout for a shadow job's append: the most a request waits on it."""


def shadow_queue(settings: Settings) -> ShadowEnqueuer | None:
    """The durable shadow queue when Redis is configured; None: an in-process thread."""
    if not settings.redis_url:
        return None
    writer = ShadowStreamWriter(settings.redis_url, prefix=settings.redis_prefix,
                                maxlen=settings.shadow_stream_maxlen,
                                timeout_s=SHADOW_ENQUEUE_TIMEOUT_S)
    return ShadowEnqueuer(writer)


def build_router(settings: Settings, log: DecisionLog, *,
                 local_first: bool = False) -> RouterService:
    """The router service with no experiment: which one runs is the database's to say
    (router/app/experiment_sync.py). `local_first`: a cascade that is not ready yet
    starts with the local model alone (`start_cascade_join` brings in the rest)."""
    local = load_local(settings)
    queue, rate = shadow_queue(settings), settings.shadow_sample_rate
    if settings.backend == "local" or local_first:
        # The local model is also the fallback: an experiment's live variant may be remote,
        # and a failing remote variant must be answered locally, not with a 503.
        return RouterService(local, log, fallback=local, shadow_queue=queue,
                             shadow_sample_rate=rate)
    return RouterService(load_backend(settings, settings.backend), log, fallback=local,
                         shadow_queue=queue, shadow_sample_rate=rate)


def build_router_offline(settings: Settings) -> RouterService:
    """A router for one-off CLI use: decisions go to an in-memory log, not the gateway's."""
    return build_router(settings, DecisionLog(make_engine("sqlite://")))


def open_desk(settings: Settings, engine: Engine) -> SupportDesk:
    """The handlers on a migrated database: the one place the schema is brought to head
    (safe with several workers starting at once) before the store is seeded."""
    migrate(engine)
    return build_desk(
        engine, fixture_path=settings.store_fixture, today=settings.today,
        fallback_model=settings.fallback_model,
        fallback_max_tokens=settings.fallback_max_tokens,
        checkpoint_path=settings.var_dir / "agent-checkpoints.sqlite",
        verification_ttl_s=settings.verification_code_ttl_s,
        verification_max_attempts=settings.verification_max_attempts)


def build_services(settings: Settings, *, join_cascade: bool = False) -> Services:
    """Everything an entry point serves with. `join_cascade` (the gateway): a cascade
    whose e5 stage or policy is missing starts with the local model under the local
    policy slot, and joins when ready (`start_cascade_join`); without it such a cascade
    is loaded here (`load_cascade`: a missing stage trained, a missing policy refused)."""
    engine = make_engine(settings.resolved_database_url)
    desk = open_desk(settings, engine)
    log = DecisionLog(engine)
    joining = (join_cascade and settings.backend == "cascade"
               and not cascade_is_ready(settings))
    router = build_router(settings, log, local_first=joining)
    slot, policy_file = (("local", settings.policy_path) if joining else
                         (policy_slot(settings), active_policy_path(settings)))
    policies = PolicyFollower(PolicyDB(engine, slot), router, policy_file=policy_file,
                              poll_s=settings.policy_poll_s)
    experiments = ExperimentFollower(
        ExperimentDB(engine), router, load=lambda config: load_experiment(settings, config),
        seed=settings.experiment, poll_s=settings.policy_poll_s)
    drift = DriftGauges(log, lambda: router.primary.policy, window_s=settings.drift_window_s,
                        refresh_s=settings.drift_refresh_s, max_rows=settings.drift_max_rows)
    services = Services(settings=settings, engine=engine, router=router, desk=desk,
                        policies=policies, experiments=experiments, drift=drift, log=log)
    policies.start()  # the database's active policy from here on, in every worker
    experiments.start()  # and its running experiment
    services.ready = True
    if joining:
        services.cascade = start_cascade_join(settings, engine, policies)
    elif settings.backend == "cascade":
        export_cascade_joined(True)
    return services
