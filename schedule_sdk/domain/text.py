"""The one rule for text the SDK stores: characters every backend can hold; and the limits on
JSON and on how a URL is shown.

A NUL character is refused by PostgreSQL (``text`` cannot contain it) but kept by SQLite; a lone
surrogate (``"\\ud800"``, which JSON can carry as an escape) is not valid UTF-8, so the database
driver fails to encode it. Either would fail *at write time*, after the value was accepted, and
differently per backend. Checking here, when a value enters the domain, refuses both the same way
everywhere and before anything is written: every text field of a job (topic, metadata, cron
expression, the strings and keys of its payload), every timer id, and every text filter of a
read. An id that holds such a character names no job and no timer.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from schedule_sdk.domain.errors import ScheduleValidationError
from schedule_sdk.domain.quoting import SHOWN_CHARACTERS as SHOWN_CHARACTERS
from schedule_sdk.domain.quoting import shown as shown

#: NUL, and any UTF-16 surrogate code point (only lone ones can occur in a Python ``str``).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: A JSON string (to its closing quote, or to the end of a truncated text) or a bracket. Strings
#: are matched whole, possessively, so brackets inside them are skipped and the scan is linear.
_JSON_STRUCTURE = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)|[\[\]{}]', re.DOTALL)
_JSON_STRUCTURE_BYTES = re.compile(rb'"(?:[^"\\]++|\\.?)*+(?:"|\Z)|[\[\]{}]', re.DOTALL)
#: A ``\u0000`` escape in JSON text (an even run of backslashes before it is escaped backslashes).
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def unstorable_character(value: str) -> str | None:
    """Describe the first character of ``value`` that a store cannot hold (a NUL or a lone
    surrogate), or return None when every character is storable."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    char = found.group()
    what = "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"
    return f"{what} at position {found.start()}"


def storable(value: str, field: str, error: type[ScheduleValidationError]) -> str:
    """Return ``value`` if every character of it is storable, else raise ``error`` naming
    ``field`` and the character (:func:`unstorable_character`)."""
    problem = unstorable_character(value)
    if problem is not None:
        raise error(f"{field} contains {problem}, which no store can hold")
    return value


#: C0 controls (tab, CR, LF and ESC among them), DEL, C1 controls, and the Unicode line and
#: paragraph separators: characters that move a terminal's cursor, start an ANSI escape, or
#: break a log line, which no id or metadata field needs.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: The control characters ``json.dumps(ensure_ascii=False)`` writes raw.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u2028\u2029]")


def control_character(value: str) -> str | None:
    """Describe the first control character of ``value`` (:data:`_CONTROL`: C0, DEL, C1, a
    line or paragraph separator), or return None when it has none."""
    found = _CONTROL.search(value)
    if found is None:
        return None
    return f"a control character (U+{ord(found.group()):04X}) at position {found.start()}"


def plain_id(value: str, field: str, error: type[ScheduleValidationError]) -> str:
    """Return ``value`` if it may be stored as an id or a metadata field: storable
    (:func:`storable`) and free of control characters (:func:`control_character`), which would
    reach terminals and logs as escapes or line breaks; else raise ``error`` naming ``field``."""
    storable(value, field, error)
    problem = control_character(value)
    if problem is not None:
        raise error(f"{field} contains {problem}: ids and metadata are refused with control characters")
    return value


def escaped(text: str) -> str:
    """``text`` with each control character (:func:`control_character`'s) written as its Python
    escape (``\\x1b``, ``\\n``), for a terminal or a log line that shows text as it came."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def json_escaped(text: str) -> str:
    """JSON ``text`` (from ``json.dumps``, which escapes the C0 controls in strings) with DEL, the
    C1 controls and U+2028/9, which ``ensure_ascii=False`` leaves raw, written as ``\\uXXXX``
    escapes: only strings can hold them, so the text stays the same JSON."""
    return _RAW_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def holds_storable_text(value: str | None) -> bool:
    """Whether ``value`` (None counts) could be stored: what a lookup checks before it asks a
    store for text no row can hold."""
    return value is None or _UNSTORABLE.search(value) is None


def json_too_deep(text: str | bytes, limit: int) -> bool:
    """Whether the arrays and objects of JSON ``text`` nest deeper than ``limit`` (a linear scan
    that needs no decoding; strings are skipped whole). Fast path: text with no more brackets
    than ``limit`` cannot nest deeper."""
    opening = ("[", "{") if isinstance(text, str) else (b"[", b"{")
    closing = ("]", "}") if isinstance(text, str) else (b"]", b"}")
    if text.count(opening[0]) + text.count(opening[1]) <= limit:  # type: ignore[arg-type]
        return False
    scan = _JSON_STRUCTURE if isinstance(text, str) else _JSON_STRUCTURE_BYTES
    depth = 0
    for token in scan.finditer(text):  # type: ignore[arg-type]
        char = token.group()
        if char in opening:
            depth += 1
            if depth > limit:
                return True
        elif char in closing:
            depth -= 1
    return False


def json_holds_nul(text: str) -> bool:
    """Whether JSON ``text`` (as encoded, NUL written ``\\u0000``) has a NUL in a string."""
    return "\\u0000" in text and _NUL_ESCAPE.search(text) is not None


def masked_url(url: object) -> str:
    """``url`` with its password replaced by ``***`` (``postgresql://app:***@db/jobs``): the one
    way a database or Redis URL is shown, in errors, logs and the CLI. Text that does not parse
    as a URL is shown only up to its scheme."""
    text = str(url)
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:
        return text.split(":", 1)[0] + ":<unparsable URL>"
    if password is None:
        return text
    user, host = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0], parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def without_secret(text: str, url: object) -> str:
    """``text`` (an error message that may quote ``url``) with ``url`` shown masked
    (:func:`masked_url`) and its password, wherever else it appears, replaced by ``***``."""
    raw = str(url)
    text = text.replace(raw, masked_url(raw))
    try:
        password = urlsplit(raw).password
    except ValueError:
        password = None
    if password:
        text = text.replace(password, "***")
    return text
