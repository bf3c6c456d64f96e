"""A policy file as a person writes it: YAML or JSON, read strictly (a key given twice is refused, not silently the
last one), every mistake reported with its line and column. Each domain validates the document it gets."""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import NoReturn

import yaml


class DocumentTextError(ValueError):
    """The text is not one YAML or JSON document; the message says where and why."""


def load_document_text(text: str, *, expected: str) -> object:
    """The document of a YAML or JSON text; ``expected`` says what it should hold (e.g. "a mapping with a 'rules'
    list"), for the messages about an empty file."""
    if not text.strip():
        _fail(f"the file is empty; expected {expected}")
    document = _load_json_or_yaml(text) if text.lstrip()[:1] in ("{", "[") else _load_yaml(text)
    if document is None:
        _fail(f"the file holds no document (only comments?); expected {expected}")
    return document


def _load_json_or_yaml(text: str) -> object:
    # JSON is YAML, except that YAML forbids the tab indentation JSON files commonly use: try JSON first.
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        _fail(f"duplicate key {quote_value(e.args[0])}: each field may appear once per mapping")
    except json.JSONDecodeError as json_error:
        try:  # flow-style YAML such as `[{patterns: [a]}]` also starts with a bracket
            return yaml.load(text, Loader=_StrictLoader)
        except yaml.YAMLError:
            _fail(f"line {json_error.lineno}, column {json_error.colno}: invalid JSON: {json_error.msg}")
    return None


def _load_yaml(text: str) -> object:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        context = getattr(error, "context", None)
        message = f"{problem} ({context})" if context else problem
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        _fail(f"{where}invalid YAML: {message}")
    return None


def _fail(message: str) -> NoReturn:
    raise DocumentTextError(message)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys: PyYAML would silently keep the last `max_age:`."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {quote_value(key)}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def quote_value(value: object) -> str:
    """A value of a document as it appears in a message (JSON, so a string shows its quotes)."""
    return json.dumps(value, ensure_ascii=False, default=repr)


def kind_of(value: object) -> str:
    """What a value of a document is, in a person's words (for "expected a list, got a string")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    names = {str: "a string", int: "a number", float: "a number", list: "a list", dict: "a mapping"}
    return next((name for t, name in names.items() if isinstance(value, t)), type(value).__name__)
