"""The web dashboard's public face: :func:`create_dashboard`, the :data:`AuthHook` it takes and the
:class:`TenantScope` such a hook may return.

The pages, actions and their guard live in :mod:`schedule_sdk.entrypoints.dashboard`; needs the
``dashboard`` extra (``pip install 'schedule-sdk[dashboard]'``).
"""

from __future__ import annotations

from schedule_sdk.entrypoints.dashboard import AuthHook, TenantScope, create_dashboard

__all__ = ["AuthHook", "TenantScope", "create_dashboard"]
