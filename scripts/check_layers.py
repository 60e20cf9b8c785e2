#!/usr/bin/env python3
"""Fails when a source file includes something its layer may not: the rule is the table between
the include-rule markers in docs/architecture.md, read here so it is written down once."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def read_rule() -> dict[str, list[str]]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- include-rule: begin -->")[1].split("<!-- include-rule: end -->")[0]
    rule = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        rule[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    if not rule:
        sys.exit(f"{DOC}: no include rule found between the markers")
    return rule


def main() -> int:
    rule = read_rule()
    bad = []
    checked = 0
    for folder, allowed in rule.items():
        base = ROOT / folder
        if not base.is_dir():
            bad.append(f"{folder}: named in the include rule but not in the tree")
            continue
        own = folder.removeprefix("cpp/src/") + "/" if folder.startswith("cpp/src/") else None
        for path in sorted(p for p in base.rglob("*") if p.suffix in (".hpp", ".cpp", ".h")):
            checked += 1
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = m.group(1)
                if (own and target.startswith(own)) or any(target.startswith(a) for a in allowed):
                    continue
                if folder == "cpp/include/steptrace" or "/" in target:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: includes \"{target}\", which {folder} may not")
    for b in bad:
        print(b)
    print(f"include rule: {checked} files checked, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
