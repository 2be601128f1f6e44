"""Admin endpoints: start and stop an online experiment, list them.

An experiment is started only once its config fits its contract
(`router.contracts.ExperimentConfig`; 422 `invalid_experiment`, the message naming the
field) and every variant loads in this worker (422 `invalid_variant`, naming the
variant); while one runs, another is refused with 409 `experiment_running`. A refused
start writes nothing. A start or stop is recorded in the shared database under the
caller's key name (`router.storage.experiment_db`) and takes effect in this worker at
once; every other worker and host follows within the poll interval
(`router.app.experiment_sync`).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from router.contracts import ExperimentConfig
from router.errors import InvalidInput
from router.gateway.deps import PrincipalDep, ServicesDep, require_role
from router.gateway.errors import refusing_route
from router.gateway.middleware.access import ACCESS_RESPONSES
from router.storage.experiment_db import ExperimentRun

ExperimentRoute = refusing_route(lambda message: InvalidInput(
    f"not a valid experiment: {message}", code="invalid_experiment"))

router = APIRouter(prefix="/v1/admin/experiments", tags=["admin"],
                   dependencies=[Depends(require_role("admin"))],
                   responses=ACCESS_RESPONSES, route_class=ExperimentRoute)


class ExperimentsOut(BaseModel):
    running: ExperimentRun | None
    """The running experiment as the database says, whether or not this worker runs it."""
    history: list[ExperimentRun]
    """Every start, oldest first."""


@router.post("", response_model=ExperimentRun, status_code=201)
def start_experiment(body: ExperimentConfig, services: ServicesDep,
                     principal: PrincipalDep) -> ExperimentRun:
    """Start an experiment: its variants are loaded and checked before anything is written.

    422 `invalid_experiment` (the field) or `invalid_variant` (the variant that does not
    load); 409 `experiment_running` while another runs, `experiment_name_taken` when its
    name was used for another config.
    """
    return services.experiments.begin(body, by=principal)


@router.post("/{name}/stop", response_model=ExperimentRun)
def stop_experiment(name: str, services: ServicesDep, principal: PrincipalDep) -> ExperimentRun:
    """Stop the running experiment `name`: requests from here on are in no experiment.

    404 `unknown_experiment` when it was never started, 409 `experiment_not_running`
    when it is not the running one.
    """
    return services.experiments.end(name, by=principal)


@router.get("", response_model=ExperimentsOut)
def list_experiments(services: ServicesDep) -> ExperimentsOut:
    """The running experiment (if any) and every start, oldest first."""
    db = services.experiments.db
    return ExperimentsOut(running=db.running(), history=db.history())
