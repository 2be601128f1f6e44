"""One exception hierarchy for the whole project; each class carries a stable API code.

    SupportRouterError            code=internal_error        500
    ├── InvalidInput              code=invalid_input         422
    │   ├── TextTooLong, …        (subclasses set their own code)
    │   └── InvalidPolicy         code=invalid_policy        422
    ├── NotFound                  code=not_found             404
    ├── Conflict                  code=conflict              409
    ├── PolicyViolation           code=policy_violation      403
    ├── ModelUnavailable          code=model_unavailable     503
    ├── CalibrationError          code=calibration_error     422
    ├── StoreError                code=store_error           503
    └── ArtifactError             code=artifact_error        500

The gateway maps each class to its status and the common JSON error shape
`{"error": {"code", "message", "request_id"}}`; the CLI prints the message and exits 1.
"""

from __future__ import annotations


class SupportRouterError(Exception):
    code = "internal_error"
    status_code = 500

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidInput(SupportRouterError):
    code = "invalid_input"
    status_code = 422


class InvalidPolicy(InvalidInput):
    """A policy that fails its contract or would not route (see router/routing/policy_check.py).

    The message names the field at fault, so the author knows what to change.
    """

    code = "invalid_policy"


class NotFound(SupportRouterError):
    code = "not_found"
    status_code = 404


class Conflict(SupportRouterError):
    code = "conflict"
    status_code = 409


class PolicyViolation(SupportRouterError):
    code = "policy_violation"
    status_code = 403


class ModelUnavailable(SupportRouterError):
    """A decision-model backend could not answer (network, 429/5xx, timeout, bad body)."""

    code = "model_unavailable"
    status_code = 503

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = retry_after_s


class CalibrationError(SupportRouterError):
    code = "calibration_error"
    status_code = 422


class StoreError(SupportRouterError):
    code = "store_error"
    status_code = 503


class ArtifactError(SupportRouterError):
    """A model or policy artifact is missing, corrupt or does not match its hash."""

    code = "artifact_error"
    status_code = 500
