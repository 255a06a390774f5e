"""``python -m examples.fastapi_app``: serve the reminders app with uvicorn (HOST, PORT from the env)."""

from __future__ import annotations

import logging
import os

import uvicorn

from .application import create_app


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8000"))
    uvicorn.run(create_app(), host=host, port=port)


if __name__ == "__main__":
    main()
