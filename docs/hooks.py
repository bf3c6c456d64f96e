"""MkDocs hooks: the landing page from README.md, and the references generated from the code at every build.

The CLI reference comes from the click group, the settings reference from the pydantic settings model, the metrics
reference from the Prometheus registry the service fills; a page asks for one with a marker line
(``<!-- reference: cli -->``), so that none of them is written by hand and none can drift from the code.
README.md and CONTRIBUTING.md stay where a repository's visitor looks for them; the site shows them as its home
and contributing pages, their links to ``docs/`` pages rewritten to site links.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import click
from mkdocs.structure.files import File
from prometheus_client import CollectorRegistry
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from workers.cli.main import main
from workers.shared.metrics import Metrics
from workers.shared.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[1]

# Site page <- repository file shown as it is (links into docs/ rewritten).
COPIED = {"index.md": "README.md", "contributing.md": "CONTRIBUTING.md"}
MARKER = re.compile(r"^<!-- reference: (\w+) -->$", re.MULTILINE)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _site_links(markdown: str) -> str:
    """A repository file's links as the site serves them: docs/x.md is x.md, the copied files are their pages."""
    markdown = re.sub(r"\]\(docs/", "](", markdown)
    for page, source in COPIED.items():
        markdown = markdown.replace(f"]({source})", f"]({page})").replace(f"]({source}#", f"]({page}#")
    return markdown


def cli_reference() -> str:
    """Every command of ``lakefs-janitor``, its usage, help and options, from the click group."""
    out: list[str] = []

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(command, info_name=path[-1], parent=parent)
        out.append(f"{'#' * min(len(path) + 1, 6)} `{' '.join(path)}`\n")
        out.append(f"```\n{' '.join(path)} {' '.join(command.collect_usage_pieces(ctx))}\n```\n")
        if command.help:
            text = inspect.cleandoc(command.help).replace("\b\n", "")
            out.append(text.replace("<", "&lt;").replace(">", "&gt;") + "\n")
        rows = [_param_row(param) for param in command.get_params(ctx)
                if isinstance(param, click.Argument)
                or isinstance(param, click.Option) and not param.hidden
                and param is not command.get_help_option(ctx)]
        if rows:
            out.append("| name | kind | type | default | help |\n|---|---|---|---|---|")
            out.extend(f"| {' | '.join(row)} |" for row in rows)
            out.append("")
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name], ctx)

    walk(main, ["lakefs-janitor"], None)
    return "\n".join(out)


def _param_row(param: Any) -> tuple[str, ...]:
    if isinstance(param, click.Argument):
        return f"`{param.human_readable_name}`", "argument", _type(param), "", ""
    names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
    if param.default is None or getattr(param.default, "name", None) == "UNSET" or param.is_flag and not param.default:
        default = ""
    else:
        default = "(computed)" if callable(param.default) else f"`{param.default}`"
    return names, "flag" if param.is_flag else "option", _type(param), default, _cell(param.help or "")


def _type(param: Any) -> str:
    kind = param.type
    if getattr(kind, "choices", None):
        return " \\| ".join(f"`{c}`" for c in kind.choices)
    if isinstance(kind, click.types._NumberRangeBase):  # noqa: SLF001 - IntRange and FloatRange's one base
        low, high = ("" if v is None else v for v in (kind.min, kind.max))
        return f"{kind.name.removesuffix(' range')} {low}..{high}"
    return _cell(getattr(kind, "name", str(kind)))


def settings_reference() -> str:
    """Every setting, its environment variable, type, default and meaning, from the settings model."""
    rows = []

    def walk(model: type[BaseModel], path: list[str]) -> None:
        for name, field in model.model_fields.items():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, [*path, name])
                continue
            if field.default_factory is not None:
                default = f"`{field.default_factory()}`"
            elif field.default is PydanticUndefined:
                default = "required"
            elif field.default is None:
                default = "—"
            else:
                default = f"`{field.default}`"
            env = ENV_PREFIX + "__".join([*path, name]).upper()
            type_name = _cell(getattr(kind, "__name__", None) if isinstance(kind, type) else str(kind))
            type_name = type_name.replace("pydantic.types.", "").replace("typing.", "")
            rows.append(f"| `{'.'.join([*path, name])}` | `{env}` | `{type_name}` | {default} | "
                        f"{_cell(field.description or '')} |")

    walk(Settings, [])
    return "| setting (YAML) | environment variable | type | default | meaning |\n|---|---|---|---|---|\n" + \
        "\n".join(rows) + "\n"


def metrics_reference() -> str:
    """Every metric the service exposes, its type, labels and help, from the registry the service fills."""
    registry = CollectorRegistry()
    Metrics(registry)
    rows = []
    for collector in sorted(registry._collector_to_names, key=lambda c: c._name):  # noqa: SLF001
        labels = ", ".join(f"`{label}`" for label in collector._labelnames) or "—"  # noqa: SLF001
        suffix = "_total" if collector._type == "counter" else ""  # noqa: SLF001
        rows.append(f"| `{collector._name}{suffix}` | {collector._type} | {labels} | "  # noqa: SLF001
                    f"{_cell(collector._documentation)} |")  # noqa: SLF001
    return "| metric | type | labels | help |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


REFERENCES = {"cli": cli_reference, "settings": settings_reference, "metrics": metrics_reference}


def on_files(files: Any, config: Any) -> Any:
    for page, source in COPIED.items():
        files.append(File.generated(config, page, content=_site_links((ROOT / source).read_text())))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in REFERENCES:
            raise ValueError(f"{page.file.src_path}: no reference named {name!r} (known: {', '.join(REFERENCES)})")
        return REFERENCES[name]()

    return MARKER.sub(generated, markdown)
