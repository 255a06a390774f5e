"""Integrations with web frameworks: :mod:`schedule_sdk.contrib.django` (an installable Django
app) and :mod:`schedule_sdk.contrib.fastapi` (an ASGI lifespan)."""
