"""mkdocs hooks: the configuration and CLI reference pages are generated from the code
(``Settings`` and the click commands), so they cannot drift from it."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETTINGS_MARK = "<!-- generated: settings -->"
CLI_MARK = "<!-- generated: cli -->"


def settings_reference() -> str:
    from agentstream.cli import _click_type
    from agentstream.settings_help import FLAG_ALIASES, default_of, setting_fields, setting_help

    rows = ["| setting | environment variable | worker flag | default | what |", "|---|---|---|---|---|"]
    for f, tp in setting_fields():
        dash = f.name.replace("_", "-")
        ctype = _click_type(tp)
        if ctype is None:
            flag = "(App argument only)"
        elif ctype is bool:
            flag = f"`--{dash}` / `--no-{dash}`"
        else:
            flag = ", ".join(f"`{n}`" for n in (f"--{dash}", *FLAG_ALIASES.get(f.name, ())))
        default = default_of(f)
        shown = str(default) if not isinstance(default, str) else (repr(default) if default else '""')
        if f.name == "dead_letter_topic":
            shown = "`<app id>-dead-letters`"
        else:
            shown = f"`{shown}`"
        what = setting_help(f, tp).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{f.name}` | `AGENTSTREAM_{f.name.upper()}` | {flag} | {shown} | {what} |")
    return "\n".join(rows)


def cli_reference() -> str:
    import click

    from agentstream.cli import cli

    os.environ.setdefault("COLUMNS", "100")
    out = []
    root = click.Context(cli, info_name="agentstream", terminal_width=100, max_content_width=100)
    out.append("## agentstream\n\n```text\n" + cli.get_help(root) + "\n```\n")
    for name in sorted(cli.commands):
        cmd = cli.commands[name]
        ctx = click.Context(cmd, info_name=name, parent=root, terminal_width=100, max_content_width=100)
        out.append(f"## {name}\n\n```text\n{cmd.get_help(ctx)}\n```\n")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if SETTINGS_MARK in markdown:
        markdown = markdown.replace(SETTINGS_MARK, settings_reference())
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    return markdown
