"""Text for the reference (docs/) made from the definitions themselves, so the docs cannot drift:
``python -m steptrace._cli.docs`` prints the options table docs/python.md holds between its markers."""

from __future__ import annotations

from .._common.options import OPTIONS


def options_markdown() -> str:
    rows = ["| option | environment | default | meaning |", "| --- | --- | --- | --- |"]
    for name, (env, kind, default, doc) in OPTIONS.items():
        if kind == "bool":  # on/off, never a bare 1 beside a variable that turns it off
            shown = "on" if default == "1" else "off"
        else:
            shown = f"`{default}`" if default else "none"
        # the one variable that says the opposite of its option (enabled): which value does what
        variable = f"`{env}=1` turns it off" if kind == "bool" and env.endswith("_DISABLE") else f"`{env}`"
        rows.append(f"| `{name}` | {variable} | {shown} | {doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(options_markdown())
