"""The Python package's one-line messages, in the C++ library's form and under its log_level."""

from __future__ import annotations

import sys

from . import _core


def printable(text: str) -> str:
    """Text as steptrace echoes it everywhere (the C++ library's one rule): control characters
    and bytes outside UTF-8 escaped, so no value reaches a terminal as an escape sequence."""
    return _core.printable_text(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def say(text: str) -> None:
    """A warning line on stderr ("steptrace warning: ..."), unless log_level is error or off."""
    try:
        if _core.default_tracer().options()["log_level"] in ("error", "off"):
            return
        sys.stderr.write(f"steptrace warning: {printable(text)}\n")
        sys.stderr.flush()
    except Exception:  # a closed stderr at exit: the message is lost, nothing else
        pass
