"""A summary's Python face: the table as its ``str()``, the JSON as ``to_dict()`` / ``to_json()``,
the timeline, the HTML report (in Jupyter too) and the Prometheus text, each made by the core."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Union

from .. import _core


class Summary:
    """The end-of-run summary: ``str()`` is the table; ``to_dict()`` follows the JSON schema."""

    def __init__(self, core: _core.Summary, tracer: Any = None) -> None:
        self._core = core
        self._tracer = tracer  # the tracer whose summary() made it: told when it is shown

    def _shown(self) -> None:
        """The table or the JSON text reached the program: the exit report need not repeat it."""
        if self._tracer is not None:
            self._tracer._shown_recorded = self._core.recorded

    @property
    def label(self) -> Optional[str]:
        """The diagnosis, one of ``steptrace.LABELS`` (INPUT-BOUND, ...); None with no steps."""
        return self._core.label

    @property
    def steps(self) -> int:
        return self._core.steps

    @property
    def rank(self) -> Optional[int]:
        """The torch.distributed rank this summary is from; None in a lone process. On rank 0
        after a gather, ``to_dict()["ranks"]`` has every rank's row."""
        return self._core.rank

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self._core.json())  # every capture is the core's (Python's noted there)

    def to_json(self, path: Union[str, "os.PathLike[str]", None] = None) -> str:
        """The summary as JSON (schema ``steptrace.summary/1``), also written to ``path``, whole
        or not at all (as every file steptrace writes)."""
        text = self._core.json()
        if path is not None:
            _core.write_file(os.fsencode(path), text + "\n")
        else:
            self._shown()  # the text itself, to print or send: shown; a file written is not
        return text

    def to_trace(self, path: Union[str, "os.PathLike[str]", None] = None) -> str:
        """The flight recorder's timeline as Chrome trace event JSON, which Perfetto UI and
        chrome://tracing open: a track per thread (steps enclosing their phases, the slowest
        flagged), a track per stream with device activity and the idle gaps. Also written to ``path``."""
        text = self._core.trace()
        if path is not None:
            _core.write_file(os.fsencode(path), text + "\n")
        return text

    def to_html(self, path: Union[str, "os.PathLike[str]", None] = None, title: str = "steptrace report") -> str:
        """A self-contained HTML report (the table, the diagnosis, a chart of the phases over the
        run, the slowest steps, the kernels with a device view, time set aside). Also written to ``path``."""
        from . import html as _html

        drawn = self._core.drawn()  # what the page draws: its cost is bounded whatever the file held
        text = _html.render(json.loads(drawn.json()), str(self), _html.idle_gaps(drawn.trace()), title)
        if path is not None:
            _core.write_file(os.fsencode(path), text)
        return text

    def kernels_table(self) -> str:
        """The device's time per step by kernel, by the op that launched it and by kind, each row
        (from a trace with a GPU; one line saying why otherwise)."""
        return self._core.kernels_table()

    def prometheus(self, prefix: str = "steptrace") -> str:
        """The figures in the Prometheus text format, metric names under ``prefix``."""
        return self._core.prometheus(prefix)

    def __str__(self) -> str:
        self._shown()
        return self._core.table()

    def __repr__(self) -> str:
        """The table, as a terminal REPL shows a value (``str()`` is the same)."""
        return self._core.table()

    def _repr_html_(self) -> str:
        """Jupyter shows a summary (or ``steptrace.load()`` of a trace) as its HTML report: the
        same as ``to_html``, as one element sized for a cell."""
        from . import html as _html

        drawn = self._core.drawn()
        return _html.fragment(json.loads(drawn.json()), self._core.table(), _html.idle_gaps(drawn.trace()))
