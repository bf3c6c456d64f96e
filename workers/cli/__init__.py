"""The ``lakefs-janitor`` command line: the click group in ``main``, shared helpers in ``common``; each domain
adds its own commands from its ``cli`` module."""

from workers.cli.main import main

__all__ = ["main"]
