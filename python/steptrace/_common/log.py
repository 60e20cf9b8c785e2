"""The Python package's one-line messages, in the C++ library's form and under its log_level."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict

from .. import _core


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


def to_jsonl(path: str, rank: int, record: Dict[str, Any], what: str) -> None:
    """A line of its own in the live JSONL (``jsonl_path``, ``{rank}`` filled in), appended by the
    core as it appends its windows: whole or not at all, the path held to the rule for every file
    steptrace writes (a link of yours is followed, one another user may have planted is refused:
    cpp/src/core/README.md, "Writes"). A failure is said."""
    if not path:
        return
    try:
        _core.append_line(_core.rank_path(path, rank), json.dumps(record) + "\n")
    except OSError as e:
        say(f"{what}: could not add it to {path}: {e.strerror}")
