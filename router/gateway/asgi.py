"""ASGI entry point for servers: what `support-router serve` runs in each granian worker.

Any ASGI server can run it too (`granian --interface asgi router.gateway.asgi:app`,
`uvicorn router.gateway.asgi:app`), but then the connection limits and timeouts of
router/gateway/server.py are that server's to set. Settings are read from the
environment when the app starts, in each worker. Logs are JSON lines
(router/telemetry/logs.py) whoever started the process, the heap alive after start-up is
frozen out of the garbage collector's passes, and a model that must be trained first is
trained in the background while `/healthz` answers (see `create_app`).
"""

from router.gateway.app import create_app

app = create_app(json_logs=True, freeze_heap=True, background_start=True)
