"""The ``lakefs-janitor`` command line: the click group in ``main``, with every domain's commands (each from its
``cli`` module; their shared helpers are in ``workers.shared.cli_common``)."""

from workers.cli.main import main

__all__ = ["main"]
