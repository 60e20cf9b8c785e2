"""The ``steptrace`` command (also ``python -m steptrace``): reads saved summaries, and
torch.profiler traces (``.json`` or ``.json.gz``, a pipe, ``-``) as if they were summaries.

    steptrace show run.json                          the table and the diagnosis
    steptrace show traces/                           a job: a folder of rank files (or several files, a glob)
    steptrace show server.json.gz --step execute_model   each range of that name is a step
    steptrace compare base.json new.json --max-regression 10   side by side; exit 1 on a regression
    steptrace compare base*.json vs new*.json --max-regression 10   several runs a side
    steptrace trace run.json -o trace.json           the timeline for Perfetto UI / chrome://tracing
    steptrace trace traces/                          a job: each rank's slowest steps, aligned, in one file
    steptrace report run.json -o report.html         one self-contained HTML page

Exit status: 0 done, 1 a regression beyond --max-regression, 2 bad usage or an unreadable file.
"""

import argparse
import json
import os
import sys
from typing import List, Optional, Tuple

from . import compare as _compare
from .._common.log import printable
from .._traces.read import shown


class _Unusable(Exception):
    """A file that cannot be read, written or understood, or a bad argument: exit status 2."""


def _reading(read, paths):
    """read(), a file that cannot be read or understood becoming _Unusable, named."""
    try:
        return read()
    except (ValueError, RuntimeError) as e:  # not a summary or trace: the message names the file
        raise _Unusable(str(e)) from None
    except OSError as e:
        raise _Unusable(f"{shown(e.filename) if isinstance(e.filename, str) else paths}: {e.strerror or e}") from None


def _load(paths, step: Optional[str] = None):
    """One run: a file, a pipe, ``-``, or a job (a folder of rank files, several files, a glob)."""
    from .._traces.load import load

    return _reading(lambda: load(paths, step=step), paths)


def _write(path: str, write) -> None:
    """Calls write(path); a failure names the file (a full disk, a missing folder)."""
    try:
        write(path)
    except OSError as e:
        raise _Unusable(f"cannot write {shown(path)}: {e.strerror or e}") from None


def _beside(path: str, suffix: str) -> str:
    if path == "-" or path.startswith("/dev/fd/") or path.startswith("/proc/"):  # a pipe: name it here
        return "steptrace" + suffix
    base = path.rstrip(os.sep) or path
    for ending in (".gz", ".json", ".trace", ".pt"):  # rank0.pt.trace.json.gz -> rank0
        base = base[: -len(ending)] if base.endswith(ending) else base
    return base + suffix


def _default_output(paths: List[str], suffix: str) -> str:
    """Beside the one file read; for a job (a folder, several files, a glob), beside the folder
    holding its files, never inside it, where it would be one more rank file."""
    from .._traces.load import expand

    names = expand(paths)
    if len(names) == 1 and not os.path.isdir(names[0]):
        return _beside(names[0], suffix)
    folder = names[0] if len(names) == 1 else os.path.commonpath([os.path.dirname(os.path.abspath(n)) for n in names])
    return _beside(os.path.abspath(folder), suffix)


def _output(args: argparse.Namespace, suffix: str) -> str:
    """Where `trace` or `report` writes: -o, else the default; never over a file it reads."""
    from .._traces.load import expand, rank_files
    from .._traces.read import shown

    try:
        out = args.output or _default_output(args.paths, suffix)
        if out == "-" or not os.path.exists(out):
            return out
        names = expand(args.paths)
        inputs = [r for name in names for r in (rank_files(name) if name != "-" and os.path.isdir(name) else [name])]
    except ValueError as e:  # no file matches a glob, a folder of no rank files: named as the reader names them
        raise _Unusable(str(e)) from None
    for read in inputs:
        if read != "-" and os.path.exists(read) and os.path.samefile(read, out):
            raise _Unusable(
                f"{shown(out)}: is {'the file' if read in names else 'a rank file'} being read "
                f"({shown(read)}); steptrace does not write over its input: name another -o"
            )
    return out


def _terminal(text: str) -> str:
    """Text for the terminal, a line at a time with its control characters escaped: names read
    from a file (kernels, ops, the GPU, file names) never drive the terminal (retitle it, clear it,
    hide text) nor forge a row. The core's table already does this; compare's text is made here."""
    return "\n".join(printable(line) for line in text.split("\n"))


def _show(args: argparse.Namespace) -> int:
    s = _load(args.paths, args.step)
    if args.kernels and not args.json:
        sys.stdout.write(_terminal(s.kernels_table()))
        return 0
    sys.stdout.write(json.dumps(s.to_dict(), indent=2) + "\n" if args.json else _terminal(str(s)))
    return 0


def _sides(runs: List[str]) -> Tuple[List[str], List[str]]:
    """`A B`, or several runs a side split by the word `vs`: `base*.json vs new*.json`."""
    if "vs" in runs:
        at = runs.index("vs")
        base, new = runs[:at], runs[at + 1 :]
    elif len(runs) == 2:
        base, new = runs[:1], runs[1:]
    else:
        raise _Unusable(
            f"compare takes two summaries, or several a side split by `vs` (base*.json vs new*.json); "
            f"got {len(runs)} files and no `vs`"
        )
    if not base or not new or "vs" in new:
        raise _Unusable("compare: each side of `vs` needs one summary or more, and `vs` appears once")
    return base, new


def _side_name(paths: List[str], other: List[str]) -> str:
    """A column head: the file's name; a folder's with a trailing slash; with the folder above it
    when the other side's file has the same name (runs/a/run.json against runs/b/run.json)."""

    def named(path: str, same: bool) -> str:
        path = path.rstrip(os.sep) or path
        name = os.path.basename(path) + (os.sep if os.path.isdir(path) else "")
        return os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))), name) if same else name

    same = named(paths[0], False) == named(other[0], False)
    head = shown(named(paths[0], same))
    return head if len(paths) == 1 else f"{head} +{len(paths) - 1}"


def _compare_runs(args: argparse.Namespace) -> int:
    base, new = _sides(args.runs)
    a, b = [_load(p, args.step) for p in base], [_load(p, args.step) for p in new]
    if args.max_regression is not None and not 0 <= args.max_regression < float("inf"):  # nan fails too
        raise _Unusable(f"--max-regression must be a percentage of 0 or more, not {args.max_regression:g}")
    c = _compare.compare([s.to_dict() for s in a], [s.to_dict() for s in b], args.max_regression)
    sys.stdout.write(_terminal(_compare.render(c, _side_name(base, new), _side_name(new, base))))
    return 1 if c.regressed else 0


def _job_trace(args: argparse.Namespace, names: List[str]) -> int:
    from .. import _core
    from .._traces.job import job_trace

    out = _output(args, ".trace.json")
    text, ranks, median = _reading(lambda: job_trace(names, args.step), names[0])
    _write(out, lambda path: _core.write_file(os.fsencode(path), text + "\n"))
    if median is None:
        print(f"wrote {printable(shown(out))}: one process's run; open it in Perfetto UI or chrome://tracing")
    else:
        print(
            f"wrote {printable(shown(out))}: the slowest steps of {ranks} ranks beside the same steps on rank {median} "
            "(the median), aligned on their collectives; open it in Perfetto UI or chrome://tracing"
        )
    return 0


def _trace(args: argparse.Namespace) -> int:
    from .._traces.load import job_files

    names = _reading(lambda: job_files(args.paths), args.paths)
    if names is not None:
        return _job_trace(args, names)
    out = _output(args, ".trace.json")
    s = _load(args.paths, args.step)
    _write(out, s.to_trace)
    kept = len(s.to_dict().get("timeline", {}).get("steps", []))
    print(f"wrote {printable(shown(out))}: {kept} steps; open it in Perfetto UI or chrome://tracing")
    return 0


def _report(args: argparse.Namespace) -> int:
    out = _output(args, ".html")
    s = _load(args.paths, args.step)
    title = os.path.basename(shown(args.paths[0]).rstrip(os.sep)) + (
        f" +{len(args.paths) - 1}" if len(args.paths) > 1 else ""
    )
    _write(out, lambda path: s.to_html(path, title=f"steptrace: {title}"))
    print(f"wrote {printable(shown(out))}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="steptrace",
        description="Read steptrace summaries (the JSON of json_path or "
        "Summary.to_json) and torch.profiler traces (.json or .json.gz).",
    )
    from .._common.version import __version__

    p.add_argument("--version", action="version", version=f"steptrace {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="command")
    paths_help = (
        "a summary or trace (- for standard input), or a job: a folder of rank files, several files, or a quoted glob"
    )
    step_help = (
        "in a trace, each range of this name (on its busiest thread) is a step: execute_model, a "
        "record_function range; a trace without ProfilerStep#N is otherwise its training loop's "
        "iterations (by its DataLoader fetches or optimizer steps), else one window"
    )
    show = sub.add_parser("show", help="print the table and the diagnosis")
    show.add_argument("paths", nargs="+", metavar="PATH", help=paths_help)
    show.add_argument("--step", metavar="NAME", help=step_help)
    show.add_argument("--json", action="store_true", help="the summary's JSON instead of the table")
    show.add_argument(
        "--kernels",
        action="store_true",
        help="the device's time by kernel, by the op that launched it and by kind (traces with a GPU)",
    )
    show.set_defaults(run=_show)
    cmp = sub.add_parser("compare", help="runs side by side; exit 1 when step time regressed beyond a threshold")
    cmp.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="BASE NEW, or several runs a side: BASE... vs NEW... (base*.json vs new*.json)",
    )
    cmp.add_argument(
        "--max-regression",
        type=float,
        metavar="PCT",
        help="exit 1 when step p50 or step mean grew by more than PCT percent (and more than the "
        "noise within and between runs)",
    )
    cmp.add_argument("--step", metavar="NAME", help=step_help)
    cmp.set_defaults(run=_compare_runs)
    tr = sub.add_parser(
        "trace",
        help="write the timeline as Chrome trace JSON (Perfetto UI, chrome://tracing); of "
        "a job, each rank's slowest steps and the median rank's same steps, aligned on the collectives",
    )
    tr.add_argument("paths", nargs="+", metavar="PATH", help=paths_help)
    tr.add_argument("--step", metavar="NAME", help=step_help)
    tr.add_argument("-o", "--output", help="default: the first path's name with .trace.json")
    tr.set_defaults(run=_trace)
    rep = sub.add_parser("report", help="write a self-contained HTML report")
    rep.add_argument("paths", nargs="+", metavar="PATH", help=paths_help)
    rep.add_argument("--step", metavar="NAME", help=step_help)
    rep.add_argument("-o", "--output", help="default: the first path's name with .html")
    rep.set_defaults(run=_report)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except _Unusable as e:
        print(f"steptrace: {printable(str(e))}", file=sys.stderr)
        return 2
    except OSError as e:
        where = shown(e.filename) if isinstance(e.filename, str) else e.filename
        print(f"steptrace: {printable(f'{where}: {e.strerror or e}')}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `steptrace show run.json | head`
        return 0
