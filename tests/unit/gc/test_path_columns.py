"""Path policies over Arrow columns (core.path_columns) decide exactly as ``CleaningPolicy.covers`` does, path by
path: on random globs and paths over an alphabet of wildcards, classes, separators, newlines and non-ASCII letters,
on paths that are not UTF-8, and on the globs users write (which must take the compiled path, not the fallback)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.core.mark import scope_mask, versions_limit
from spark_jobs.core.path_columns import scope_masks, versions_limits
from spark_jobs.core.path_globs import path_glob, re2_glob

GLOB_PARTS = ["*", "**", "?", "a", "b", "é", ".", "-", " ", "\n", "+", "(", "$", "\\", "[ab]", "[!a]", "[a-c]",
              "[0-9]", "[._]", "[!_]", "[.-_]", "[", "]", "[^a]", "[a-]", "[]a]", "[c-a]", "{x}", "|"]
PATH_CHARS = "ab/é.-_ \n+($\\[]^c0-9|x"


def glob() -> st.SearchStrategy[str]:
    segment = st.lists(st.sampled_from(GLOB_PARTS), min_size=1, max_size=4).map("".join)
    return st.lists(segment, min_size=1, max_size=4).map("/".join)


def policy(i: int, globs: list[str], keep: int) -> CleaningPolicy:
    return CleaningPolicy(id=f"p{i}", patterns=("*",), paths=tuple(globs), keep_versions=keep)


def safe_policies(draw_globs: list[list[str]]) -> list[CleaningPolicy]:
    out = []
    for i, globs in enumerate(draw_globs):
        p = policy(i, globs, i + 1)
        try:  # a glob Python's re refuses (a reversed range) is refused by both: not compared
            for g in globs:
                path_glob(g.removeprefix("!"))
        except re.error:
            continue
        out.append(p)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(glob().map(lambda g: g), min_size=1, max_size=3), min_size=1, max_size=4),
       st.lists(st.text(PATH_CHARS, max_size=14), min_size=1, max_size=30), st.data())
def test_masks_and_limits_equal_covers(globs, paths, data) -> None:
    globs = [[("!" + g if data.draw(st.booleans()) and j else g) for j, g in enumerate(gs)] for gs in globs]
    policies = safe_policies(globs)
    for column in (pa.array(paths, pa.string()), pa.array([p.encode() for p in paths], pa.binary())):
        assert scope_masks(column, policies).to_pylist() == [scope_mask(p, policies) for p in paths]
        assert versions_limits(column, policies).to_pylist() == [versions_limit(p, policies) for p in paths]


def test_paths_that_are_not_utf8_are_judged_as_covers_judges_them() -> None:
    policies = [policy(0, ["tables/*/**"], 2), policy(1, ["**", "!tables/a\ufffd/**"], 3)]
    raw = [b"tables/a\xff/x", b"tables/b/y", b"other"]
    expected = [scope_mask(p.decode(errors="replace"), policies) for p in raw]
    assert scope_masks(pa.array(raw, pa.binary()), policies).to_pylist() == expected == [1, 3, 2]


@pytest.mark.parametrize("glob", ["tables/events/**", "tables/t[0-4]/**", "**/*.parquet", "logs/2026-??-*/part-*",
                                  "!tmp/**", "data/[!_]*", "naïve/**", "a b/c+d/(x)/**"])
def test_the_globs_users_write_are_compiled(glob: str) -> None:
    assert re2_glob(glob.removeprefix("!")) is not None
