"""One atomic Redis call made of the Lua steps of several stores.

A lakeFS hook changes keys that belong to different stores (the idle clock's branch record and repository summary,
GC's commit count). Each store keeps its keys and its Lua to itself and hands out a ``Step``; ``run`` joins the
steps into one script, so the whole change is one round trip and no other command runs between the steps. The
script for a given sequence of steps is put together and hashed once per process, then sent with EVALSHA (loaded
once per Redis, again after a restart or SCRIPT FLUSH).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from redis.exceptions import NoScriptError

from spark_jobs.engine.runtime.redis_ack import Acknowledged, write_acknowledged

Arg = str | int | float


@dataclass(frozen=True, slots=True)
class Step:
    """A store's part of an atomic call. ``lua`` is the body of a Lua function that sees only this step's ``keys``
    and ``args``, as ``KEYS`` and ``ARGV`` numbered from 1 (as in a script of its own), and returns one value (not
    nil: Redis would cut the list of results there).
    ``lua`` is a module-level constant of the store: it names the script, so it must not be built per call."""

    lua: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...]


_Shape = tuple[tuple[str, int, int], ...]
_scripts: dict[_Shape, tuple[str, str]] = {}


def source(steps: Sequence[Step]) -> tuple[str, str]:
    """The script that runs ``steps`` in order and returns their results as a list, and its SHA-1."""
    shape = tuple((s.lua, len(s.keys), len(s.args)) for s in steps)
    found = _scripts.get(shape)
    if found is None:
        functions, calls, k, a = [], [], 0, 0
        for i, (lua, nkeys, nargs) in enumerate(shape, 1):
            functions.append(f"local function step{i}(KEYS, ARGV)\n{lua}\nend")
            # Each step's share of KEYS and ARGV as table literals: cheaper in Redis than copying in a loop.
            own_keys = ", ".join(f"KEYS[{k + j}]" for j in range(1, nkeys + 1))
            own_args = ", ".join(f"ARGV[{a + j}]" for j in range(1, nargs + 1))
            calls.append(f"(step{i}({{{own_keys}}}, {{{own_args}}}))")
            k, a = k + nkeys, a + nargs
        text = "\n".join([*functions, "return {" + ", ".join(calls) + "}"])
        found = _scripts[shape] = (text, hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest())
    return found


def run(client: redis.Redis, steps: Sequence[Step]) -> list:
    """Run ``steps`` as one script, in one round trip; each step's result, in order. Atomic as Redis scripts are:
    nothing else runs in between, and a step that fails stops the script (the steps before it stay applied)."""
    text, sha = source(steps)
    keys = [key for step in steps for key in step.keys]
    args = [arg for step in steps for arg in step.args]
    try:
        return client.evalsha(sha, len(keys), *keys, *args)
    except NoScriptError:  # a Redis that has not seen it yet (or restarted): load it, then once more
        client.script_load(text)
        return client.evalsha(sha, len(keys), *keys, *args)


def run_acknowledged(client: redis.Redis, steps: Sequence[Step], durability: Acknowledged) -> list:
    """``run``, counted done only once ``durability.replicas`` replicas acknowledged it, retried (re-resolving the
    primary) for ``durability.budget_seconds`` (``spark_jobs.engine.runtime.redis_ack.write_acknowledged``); still one round
    trip when all goes well. Raises a ``redis.RedisError`` when it could not confirm the write in time."""
    text, sha = source(steps)
    keys = [key for step in steps for key in step.keys]
    args = [arg for step in steps for arg in step.args]

    def load(exc: Exception) -> bool:
        if isinstance(exc, NoScriptError):
            client.script_load(text)
            return True
        return False

    return write_acknowledged(client, lambda c: c.evalsha(sha, len(keys), *keys, *args), durability=durability,
                              recover=load)
