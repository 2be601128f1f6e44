"""ASGI entry point for process managers: `uvicorn router.gateway.asgi:app --workers N`.

Settings are read from the environment when the app starts, in each worker.
"""

from router.gateway.app import create_app

app = create_app()
