"""How an error message or a log line quotes a value it refuses: :func:`shown`, the one way."""

from __future__ import annotations

#: How many characters of a bad value an error message quotes (:func:`shown`).
SHOWN_CHARACTERS = 60


def shown(value: object, limit: int = SHOWN_CHARACTERS) -> str:
    """``value`` as an error message or a log line quotes it: its ``repr`` (control characters
    escaped), of at most ``limit`` characters of text, a longer one cut with a marker saying how
    much was left out (``'aaaa…' (1,048,516 more characters)``). The one way the SDK's errors
    show a value they refuse."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value) - limit:,} more characters)"
    text = repr(value)
    if len(text) > limit + 2:
        return f"{text[:limit]}… ({len(text) - limit:,} more characters)"
    return text
