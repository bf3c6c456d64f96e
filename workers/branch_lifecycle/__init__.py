"""Branch lifecycle: policies, pure evaluation, the policy store and deletion log, runs, restore, tasks, schedule and CLI."""
