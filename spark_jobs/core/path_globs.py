"""Path globs (pure): a cleaning or lifecycle policy's ``paths`` as regular expressions, for Python's ``re``
(``path_glob``: what decides) and for RE2 (``re2_glob``: Arrow's regex kernels, ``core.path_columns``), both written
by one renderer, so that the two read a glob alike wherever ``re2_glob`` gives a pattern at all."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


@functools.lru_cache(maxsize=1024)
def path_glob(glob: str) -> re.Pattern[str]:
    """A path glob as a regular expression: ``*`` and ``?`` stay within one folder, ``**`` (a whole segment) spans
    any number of folders, ``[...]`` as in fnmatch. ``tables/events/**`` matches everything under tables/events/."""
    return re.compile(render_glob(glob, literal=re.escape, char_class=_python_class) + r"\Z", re.DOTALL)


def render_glob(glob: str, *, literal: Callable[[str], str],
                char_class: Callable[[str], str | None]) -> str | None:
    """``glob`` (``path_glob``'s syntax) as an unanchored regular expression whose literal characters and classes
    ``literal`` and ``char_class`` (the body between the brackets, ``!`` first when negated) write; None when
    ``char_class`` cannot write one."""
    out, segments = [], glob.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        at = 0
        while at < len(segment):
            c = segment[at]
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "[" and (end := segment.find("]", at + 2)) != -1:
                written = char_class(segment[at + 1:end])
                if written is None:
                    return None
                out.append(written)
                at = end
            else:
                out.append(literal(c))
            at += 1
        out.append("" if last else "/")
    return "".join(out)


def _python_class(body: str) -> str:
    return "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"


_CLASS_BODY = re.compile(r"(?:[\w.](?:-[\w.])?)+\Z", re.ASCII)  # what RE2 and Python read alike in [...]


@functools.lru_cache(maxsize=1024)
def re2_glob(glob: str) -> str | None:
    """``path_glob(glob)`` as an anchored RE2 pattern, or None when this translation cannot promise the
    same matches (a character class of anything but letters, digits, ``_``, ``.`` and ranges between them)."""
    written = render_glob(glob, literal=_re2_literal, char_class=_re2_class)
    return None if written is None else "^(?s)" + written + r"\z"


def _re2_literal(c: str) -> str:
    return c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}"  # a code point, whatever RE2 escapes


def _re2_class(body: str) -> str | None:
    negated = body.startswith("!")
    members = body[1:] if negated else body
    if not _CLASS_BODY.match(members) or any(a > b for a, b in re.findall(r"(.)-(.)", members)):
        return None  # (a reversed range is an error to both: covers raises it)
    return "[" + ("^" if negated else "") + members + "]"
