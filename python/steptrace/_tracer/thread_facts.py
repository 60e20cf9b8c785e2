"""Tells the diagnosis how many intra-op threads torch runs (the fact ``torch.num_threads``), so
a process that waits for cores hears first to run fewer of its own threads when they outnumber
the cores it gets. Nothing is imported: torch counts only if the program imported it."""

from __future__ import annotations

import sys
from typing import Any


def note_threads(core: Any) -> None:
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    if get is None:
        return
    try:
        core.set_fact("torch.num_threads", str(int(get())))
    except Exception:  # a torch that cannot say: the advice goes without it
        pass
