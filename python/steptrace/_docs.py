"""Text for the README made from the definitions themselves, so the docs cannot drift:
``python -m steptrace._docs`` prints the options table the README holds between its markers."""

from __future__ import annotations

from ._api import OPTIONS


def options_markdown() -> str:
    rows = ["| option | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for name, (env, kind, default, doc) in OPTIONS.items():
        shown = f"`{default}`" if default else "none"
        rows.append(f"| `{name}` | `{env}` | {shown} | {doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(options_markdown())
