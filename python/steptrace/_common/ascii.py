"""Numbers in text other processes wrote (a rank's key in the store, an environment variable, a
row's fields): read only when they are ASCII digits. ``str.isdigit()`` is true of ``²`` and
``٣``, and ``int()`` then raises or reads them: one such value must not blind a rank's view."""

from __future__ import annotations

from typing import Optional


def number(text: str, signed: bool = False) -> Optional[int]:
    """``text`` as an int when it is ASCII digits (a leading ``-`` with ``signed``), else None."""
    digits = text[1:] if signed and text.startswith("-") else text
    if not digits or len(digits) > 30 or not digits.isascii() or not digits.isdigit():
        return None
    return int(text)
