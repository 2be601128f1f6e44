"""ASGI entry point for process managers: `uvicorn router.gateway.asgi:app --workers N`.

Settings are read from the environment when the app starts, in each worker. Logs are
JSON lines (router/telemetry/logs.py) whoever started the process, replacing uvicorn's own format,
and the heap alive after start-up is frozen out of the garbage collector's passes (see
`create_app`).
"""

from router.gateway.app import create_app

app = create_app(json_logs=True, freeze_heap=True)
