"""``python -m schedule_sdk``: the ``schedule-sdk`` command line."""

from __future__ import annotations

import sys

from schedule_sdk.entrypoints.cli import main

sys.exit(main())
