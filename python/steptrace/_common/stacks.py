"""Every Python thread's stack in a hang report, where CPython keeps its own dump to itself.

The core's watch writes a hang report from steptrace's own thread, without the interpreter's lock
(the stuck thread may hold it). CPython 3.11 and 3.12 export the dump faulthandler uses, which the
bindings call directly; 3.10 and 3.13 do not. There, faulthandler is asked once, at import, to
dump every thread's stack into an anonymous file on a real-time signal nobody handles
(``faulthandler.register``); the watch raises that signal on its own thread, where faulthandler's C
handler writes the stacks, and reads the file back. A program that already handles every such
signal keeps its handlers; its reports then say the stacks are not available. So do the reports of
a program that took the signal or the descriptor back later (reset or handled the signal, closed
the descriptor or opened another file under its number): the watch checks both against what was
registered here before it raises the signal (bindings/hangs.cpp).
"""

from __future__ import annotations

import os
import signal

from .. import _core

_SIGNALS_TRIED = 8  # real-time signals from the top, skipping those a handler already has


def install() -> None:
    if not _core.stacks_need_signal() or not hasattr(signal, "SIGRTMAX") or not hasattr(os, "memfd_create"):
        return
    try:
        import faulthandler

        for offset in range(2, 2 + _SIGNALS_TRIED):
            number = signal.SIGRTMAX - offset
            if signal.getsignal(number) is not signal.SIG_DFL:  # None: a handler made outside Python
                continue
            fd = os.memfd_create("steptrace-stacks", os.MFD_CLOEXEC)
            faulthandler.register(number, file=fd, all_threads=True, chain=False)
            if not _core.set_stack_signal(number, fd):
                faulthandler.unregister(number)
                os.close(fd)
            return
    except (OSError, RuntimeError, ValueError):  # no stacks in the reports, nothing else changes
        return
