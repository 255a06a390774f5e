"""What ``import schedule_sdk`` costs: a fresh interpreter, so nothing another test imported counts."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_package_does_not_load_alembic():
    code = "import sys, schedule_sdk; print('alembic' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
