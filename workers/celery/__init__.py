"""Celery wiring: the app factory (merging every domain's beat schedule) and the `celery -A` shim."""
