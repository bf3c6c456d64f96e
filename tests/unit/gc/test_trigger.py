from workers.gc.trigger import due


def test_due_after_n_commits_and_not_before():
    counts = {"a": 4, "b": 5, "c": 9}
    assert due(counts, 5) == ["b", "c"]
    assert due(counts, 10) == []
    assert due(counts, 0) == []  # the trigger is off
