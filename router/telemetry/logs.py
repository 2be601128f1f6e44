"""Structured logs: one JSON object per line, the request id on every line, customer data masked.

Why JSON: log pipelines index fields (`request_id`, `path`, `status`, `duration_ms`) instead
of parsing free text, and one request's lines are found by its id — the same id the
client got back in `X-Request-ID`.

Why mask in the formatter: a log line is written far more widely than the database is
read (shipped, indexed, kept for months). E-mail addresses and order/account ids are
replaced in the message, in extra fields and in tracebacks, whichever logger (ours, a
library's, uvicorn's) wrote the record. `Settings.log_customer_data` turns masking off
where the retention policy allows it. Customer message text is never logged by this
code; a line that quotes it must use `excerpt()` (masked and cut short).

The request ids travel in contextvars set by the gateway's middleware; Starlette copies
the context into the threadpool that runs sync endpoints, so a line logged deep inside a
handler carries it too.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import IO, Any

from router.settings import Settings

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
client_request_id_var: ContextVar[str | None] = ContextVar("client_request_id", default=None)
"""The caller's own `X-Request-ID`, logged next to ours so their traces join our lines."""

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
ORDER_ID = re.compile(r"(?<![\w-])#?(?:[OoОо][-–—_]?\s?\d{3,}|A-?\d{3,})(?![\w-])")
"""Order ids as customers write them (O-1002, o1002, #O 1002, Cyrillic О) and account ids."""
MAX_MESSAGE_CHARS = 4000
"""A message longer than this is cut: no log line can carry a whole customer message."""

_RECORD_FIELDS = frozenset(
    logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "taskName",
    "color_message",  # uvicorn's copy of the message with terminal colour codes
}
_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.asgi")


def mask(text: str) -> str:
    """Replace e-mail addresses with [email] and order/account ids with [id]."""
    if "@" in text:
        text = EMAIL.sub("[email]", text)
    return ORDER_ID.sub("[id]", text)


def excerpt(text: str, *, limit: int = 80) -> str:
    """At most `limit` characters of customer text, masked: the only way to log it."""
    masked = mask(text)
    return masked if len(masked) <= limit else masked[:limit] + "…"


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "message", "request_id", …extra fields, "exc_info"}`."""

    def __init__(self, *, mask_customer_data: bool = True) -> None:
        super().__init__()
        self.mask_customer_data = mask_customer_data
        self._second = -1
        self._second_text = ""

    def _timestamp(self, created: float) -> str:
        """ISO 8601 UTC with milliseconds; the seconds part is reused within a second
        (an access line per request makes this the formatter's hottest step)."""
        second = int(created)
        if second != self._second:
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._second_text}.{int((created - second) * 1000):03d}Z"

    def _clean(self, value: str) -> str:
        return mask(value) if self.mask_customer_data else value

    def format(self, record: logging.LogRecord) -> str:
        # Mask before cutting: a cut through an e-mail or order id would hide it from the mask.
        message = self._clean(record.getMessage())
        if len(message) > MAX_MESSAGE_CHARS:
            message = f"{message[:MAX_MESSAGE_CHARS]}… [{len(message) - MAX_MESSAGE_CHARS} " \
                      "more characters]"
        out: dict[str, Any] = {
            "ts": self._timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        client_request_id = client_request_id_var.get()
        if client_request_id is not None:
            out["client_request_id"] = client_request_id
        for key, value in record.__dict__.items():  # the `extra=` fields, in their order
            if key not in _RECORD_FIELDS and key not in out:
                out[key] = self._clean(value) if isinstance(value, str) else value
        if record.exc_info:
            out["exc_info"] = self._clean(self.formatException(record.exc_info))
        elif record.exc_text:
            out["exc_info"] = self._clean(record.exc_text)
        if record.stack_info:
            out["stack_info"] = self._clean(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class JsonLogHandler(logging.StreamHandler):
    """A stream handler that writes to the *current* `sys.stderr` unless given a stream.

    Looking stderr up at each write (as logging's last-resort handler does) keeps the
    handler valid when something swaps `sys.stderr` (test capture, daemonisers).
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream)
        self._fixed = stream

    @property  # type: ignore[override]
    def stream(self) -> IO[str]:
        return self._fixed if self._fixed is not None else sys.stderr

    @stream.setter
    def stream(self, value: IO[str] | None) -> None:
        self._fixed = value


def configure_logging(settings: Settings, *, stream: IO[str] | None = None) -> JsonLogHandler:
    """Send every log record (ours, libraries', uvicorn's) to one JSON handler on the root.

    Idempotent: a handler installed by an earlier call is replaced, other handlers (a
    test's capture, say) are left alone. uvicorn's own handlers are removed so its lines
    come out in the same format, and its access log is switched off: the gateway's
    middleware writes one access line per request instead (`router.requests`).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, JsonLogHandler):  # ours, from an earlier call or dictConfig
            root.removeHandler(handler)
    handler = JsonLogHandler(stream)
    handler.setFormatter(JsonFormatter(mask_customer_data=not settings.log_customer_data))
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    for name in _UVICORN_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False
    access.disabled = True
    return handler


def install_logging(settings: Settings) -> Callable[[], None]:
    """`configure_logging` for the app's lifetime; returns the undo for its shutdown.

    Why undo: the root logger is process-global. An app that stops (tests build many; a
    CLI command may run after one in the same process) must not leave its handler and
    level behind, or later INFO lines from anything would land on stderr as JSON.
    """
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    handler = configure_logging(settings)

    def undo() -> None:
        root.removeHandler(handler)
        for previous in saved_handlers:
            if previous not in root.handlers:
                root.addHandler(previous)
        root.setLevel(saved_level)

    return undo


def uvicorn_log_config(settings: Settings) -> dict[str, Any]:
    """A `logging.config.dictConfig` for `uvicorn.run(log_config=…)`.

    uvicorn applies it in the supervisor and in every worker process before the app
    starts, so even its start-up lines are JSON; the app's start-up then re-applies
    `configure_logging` (same result).
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter,
                                "mask_customer_data": not settings.log_customer_data}},
        "handlers": {"json": {"()": JsonLogHandler, "formatter": "json"}},
        "root": {"handlers": ["json"], "level": settings.log_level},
        "loggers": {
            **{name: {"handlers": [], "propagate": True} for name in _UVICORN_LOGGERS},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "CRITICAL"},
        },
    }
