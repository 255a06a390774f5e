"""``python -m schedule_sdk.timer``: run the timer service (same as ``schedule-sdk timer``)."""

from __future__ import annotations

import sys

from schedule_sdk.entrypoints.timer_service import main

sys.exit(main())
