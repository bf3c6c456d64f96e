"""workers.shared.redis_script on a real Redis: steps of several stores run as one script, each seeing only its own keys and
arguments, numbered from 1."""

from __future__ import annotations

import uuid

import pytest

from spark_jobs.engine.runtime.redis_ack import Acknowledged, NotReplicated
from workers.shared import redis_script
from workers.shared.redis_script import Step

ECHO = "return {#KEYS, #ARGV, KEYS[1], ARGV[1]}"
INCR = "return redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]))"
SET_BOTH = "redis.call('SET', KEYS[1], ARGV[1]) redis.call('SET', KEYS[2], ARGV[2]) return 1"


def test_each_step_sees_its_own_keys_and_arguments(redis_client):
    k = f"scripts-test-{uuid.uuid4().hex[:8]}"
    steps = [Step(SET_BOTH, (f"{k}:a", f"{k}:b"), ("1", "2")), Step(INCR, (f"{k}:a",), (5,)),
             Step(INCR, (f"{k}:b",), (10,))]
    assert redis_script.run(redis_client, steps) == [1, 6, 12]
    assert redis_client.mget(f"{k}:a", f"{k}:b") == [b"6", b"12"]


def test_steps_of_the_same_shape_share_one_script_and_others_get_their_own(redis_client):
    k = f"scripts-test-{uuid.uuid4().hex[:8]}"
    one = redis_script.source([Step(INCR, (f"{k}:x",), (1,))])
    assert redis_script.source([Step(INCR, (f"{k}:y",), (7,))]) is one  # built and hashed once
    assert redis_script.source([Step(INCR, (f"{k}:x",), (1,)), Step(INCR, (f"{k}:y",), (1,))]) != one
    redis_client.script_flush()  # a restarted Redis: loaded again, once
    assert redis_script.run(redis_client, [Step(INCR, (f"{k}:x",), (3,))]) == [3]
    assert redis_client.script_exists(one[1]) == [True]


def test_a_step_does_not_see_the_other_steps_keys(redis_client):
    k = f"scripts-test-{uuid.uuid4().hex[:8]}"
    got = redis_script.run(redis_client, [Step(INCR, (f"{k}:a",), (1,)), Step(ECHO, (f"{k}:only",), ("mine",))])
    assert got == [1, [1, 1, f"{k}:only".encode(), b"mine"]]


def test_an_acknowledged_run_waits_for_replicas_and_says_when_none_answered(redis_client):
    """A plain Redis has no replica: with replicas=0 the run is the primary's answer (loading the script once);
    with replicas=1 it is applied but never acknowledged, and raises NotReplicated (the receiver's 503) once its
    budget is spent, trying again meanwhile."""
    k = f"scripts-test-{uuid.uuid4().hex[:8]}"
    redis_client.script_flush()
    assert redis_script.run_acknowledged(redis_client, [Step(INCR, (k,), (2,))], Acknowledged(0, 1.0)) == [2]
    with pytest.raises(NotReplicated, match="0 of 1 replica"):
        redis_script.run_acknowledged(redis_client, [Step(INCR, (k,), (1,))], Acknowledged(1, 0.6))
    assert int(redis_client.get(k)) >= 3  # applied (at least once: an unacknowledged attempt is tried again)
