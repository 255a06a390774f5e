"""The one rule for text the SDK stores: characters every backend can hold.

A NUL character is refused by PostgreSQL (``text`` cannot contain it) but kept by SQLite; a lone
surrogate (``"\\ud800"``, which JSON can carry as an escape) is not valid UTF-8, so the database
driver fails to encode it. Either would fail *at write time*, after the value was accepted, and
differently per backend. Checking here, when a value enters the domain, refuses both the same way
everywhere and before anything is written.
"""

from __future__ import annotations

import re

#: NUL, and any UTF-16 surrogate code point (only lone ones can occur in a Python ``str``).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_character(value: str) -> str | None:
    """Describe the first character of ``value`` that a store cannot hold (a NUL or a lone
    surrogate), or return None when every character is storable."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    char = found.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"
    return f"{what} at position {found.start()}"
