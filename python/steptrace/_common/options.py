"""Option values between Python and the C++ option table (types checked by each option's kind)."""

from __future__ import annotations

import os
from typing import Any, Dict

from .. import _core

# name -> (environment variable, kind, default text, doc), from the C++ option table.
OPTIONS: Dict[str, tuple] = {name: (env, kind, default, doc) for name, env, kind, default, doc in _core.option_table()}


def _option_text(name: str, value: Any) -> str:
    """The text form C++ parses, after the type check the option's kind asks for."""
    if name not in OPTIONS:
        return str(value)  # C++ names the unknown option and lists the known ones
    kind = OPTIONS[name][1]
    if isinstance(value, str):
        return value
    if isinstance(value, bool) and (kind == "bool" or name == "print_at_exit"):
        return "1" if value else "0"
    if kind == "uint" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind == "seconds" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value) if isinstance(value, int) else repr(value)
    if kind == "path":
        if value is None:
            return ""
        if isinstance(value, os.PathLike) and isinstance(os.fspath(value), str):
            return os.fspath(value)
    wanted = {
        "bool": "a bool",
        "uint": "an int",
        "path": "a str or os.PathLike path",
        "seconds": "a number of seconds, 'auto' or 'off'",
        "number": "a number",
    }.get(kind, "a str (" + kind.split(":", 1)[-1].replace("|", ", ") + ")")
    raise ValueError(f"steptrace: option {name!r} takes {wanted}, not {value!r} ({type(value).__name__})")


def _option_value(name: str, text: str) -> Any:
    kind = OPTIONS[name][1]
    if kind == "bool":
        return text == "1"
    if kind == "uint":
        return int(text)
    if kind == "number":
        return float(text)
    return text
