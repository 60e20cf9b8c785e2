"""The Python package's one-line messages, in the C++ library's form and under its log_level."""

from __future__ import annotations

import sys

from . import _core


def say(text: str) -> None:
    """A warning line on stderr ("steptrace warning: ..."), unless log_level is error or off."""
    try:
        if _core.default_tracer().options()["log_level"] in ("error", "off"):
            return
        sys.stderr.write(f"steptrace warning: {text}\n")
        sys.stderr.flush()
    except Exception:  # a closed stderr at exit: the message is lost, nothing else
        pass
