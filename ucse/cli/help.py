"""``--help`` text generated from the config dataclasses: every field with its type, default and docstring.

The field docstrings (the string literal under each field, as in ``ucse/config/schema.py``) are read from the
dataclass's source with ``ast``, so the help can never drift from the schema.
"""

from __future__ import annotations

import ast
import enum
import inspect
import os
import shutil
import sys
import textwrap
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache
from typing import Any


@dataclass
class FieldHelp:
    """One config field as the help shows it.

    Attributes:
        key: dotted key (``optim.lr``).
        type: the annotation as written (``float``, ``str | None``), with an enum's choices.
        default: the default value as a command-line value.
        doc: the field's docstring, whitespace collapsed.
    """

    key: str
    type: str
    default: str
    doc: str


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field name: docstring}`` of a dataclass, parsed from its source (fields without one are absent)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, nxt in zip(body, body[1:], strict=False):
        value = nxt.value if isinstance(nxt, ast.Expr) else None
        is_doc = isinstance(value, ast.Constant) and isinstance(value.value, str)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_doc:
            docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())  # type: ignore[union-attr]
    return docs


def _show(value: Any) -> str:
    """A default as it would be typed on the command line."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


def _enum_of(hint: Any) -> type[enum.Enum] | None:
    """The Enum class inside an annotation (``Pooling``, ``Pooling | None``), if any."""
    for arg in (hint, *typing.get_args(hint)):
        if isinstance(arg, type) and issubclass(arg, enum.Enum):
            return arg
    return None


def config_fields(cls: type, prefix: str = "", sections: bool = False) -> list[FieldHelp]:
    """Every leaf field of a (nested) config dataclass, in declaration order.

    Args:
        cls: the dataclass (e.g. ``TrainConfig``).
        prefix: dotted prefix of nested fields.
        sections: also return each nested dataclass field itself (``type`` ``section``) before its fields.

    Returns:
        One :class:`FieldHelp` per leaf field; nested dataclasses are expanded (``optim.lr``, ...).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    out: list[FieldHelp] = []
    for f in fields(cls):
        hint = hints[f.name]
        if is_dataclass(hint):
            if sections:
                out.append(FieldHelp(f"{prefix}{f.name}", "section", "", docs.get(f.name, "")))
            out += config_fields(hint, f"{prefix}{f.name}.", sections)  # type: ignore[arg-type]
            continue
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        kind = f.type if isinstance(f.type, str) else getattr(hint, "__name__", str(hint))
        choices = _enum_of(hint)
        if choices is not None:
            kind += " {" + ",".join(m.value for m in choices) + "}"
        shown = "(required)" if default is MISSING else _show(default)
        out.append(FieldHelp(f"{prefix}{f.name}", kind, shown, docs.get(f.name, "")))
    return out


def format_fields(
    cls: type, title: str = "Fields (key=value)", prefix: str = "", leave_out: frozenset[str] = frozenset()
) -> str:
    """A config dataclass's fields as help text: ``key: type = default``, then the wrapped docstring.

    ``prefix`` is put before every key (``uncertainty.`` where the dataclass is a group of a larger config);
    keys in ``leave_out`` are not listed (the sweep sets the seed and the run folders itself).
    """
    width = min(shutil.get_terminal_size((100, 20)).columns, 110)
    lines = [f"{title}:"]
    for f in config_fields(cls, sections=True):
        if f.key in leave_out:
            continue
        if f.type == "section":
            lines += ["", f"  [{prefix}{f.key}] {f.doc}"]
            continue
        lines.append(f"  {prefix}{f.key}: {f.type} = {f.default}")
        if f.doc:
            lines += textwrap.wrap(f.doc, width, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)


def wants_help(argv: list[str]) -> bool:
    """Whether the command line asks for help (``-h``, ``--help`` or ``help``)."""
    return any(a in ("-h", "--help") for a in argv) or argv[:1] == ["help"]


def show(text: str) -> int:
    """Print help text; a reader that stops early (``ucse train --help | head``) is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0
