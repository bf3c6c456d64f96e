"""Domain logic, the idle clock, lakeFS clients, Celery tasks and the CLI of lakefs-janitor."""
