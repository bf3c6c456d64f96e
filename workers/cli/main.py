"""``lakefs-janitor``: the click group, `serve`, and every domain's commands (lakectl-style ``lakefs://`` URIs)."""

from __future__ import annotations

import os
import sys
import tempfile

import click

from workers.branch_lifecycle import cli as branch_lifecycle_cli
from workers.gc import cli as gc_cli
from workers.idle_clock import cli as idle_clock_cli
from workers.object_lifecycle import cli as object_lifecycle_cli
from workers.shared.cli_common import Runtime, pass_runtime
from workers.shared.redis_clients import check_redis
from workers.shared.settings_sources import CONFIG_FILE_ENV


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False), envvar=CONFIG_FILE_ENV,
              help="YAML settings file (env: LAKEFS_JANITOR_CONFIG).")
@click.version_option(package_name="lakefs-janitor")
def main(config_file: str | None) -> None:
    """Branch lifecycle, object lifecycle, idle clock and garbage collection for lakeFS."""
    if config_file:
        os.environ[CONFIG_FILE_ENV] = config_file


@main.command()
@click.option("--bind", default="127.0.0.1:8080", show_default=True, help="host:port to listen on.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Threads per worker (gthread): more throughput, wider latency spread; see bench/README.md.")
@pass_runtime
def serve(rt: Runtime, bind: str, workers: int, threads: int) -> None:
    """Run the webhook receiver and policy API under gunicorn."""
    if rt.settings.webhook_secret is None:
        raise click.ClickException("LAKEFS_JANITOR_WEBHOOK_SECRET is not set: the receiver would accept nobody")
    check_redis(rt.settings)  # a wrong password or master name is a SettingsError, named, before gunicorn starts
    env = dict(os.environ)
    env.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), f"lakefs-janitor-metrics-{os.getpid()}"))
    # No control socket: gunicorn would put one at the same path in $HOME for every instance on the host.
    args = [sys.executable, "-m", "gunicorn", "--bind", bind, "--workers", str(workers), "--threads", str(threads),
            "--no-control-socket", "--config", "python:webhook.gunicorn_conf", "--access-logfile", "-",
            "webhook.wsgi:app"]
    os.execve(sys.executable, args, env)


for _command in (*idle_clock_cli.COMMANDS, *branch_lifecycle_cli.COMMANDS, *gc_cli.COMMANDS,
                 *object_lifecycle_cli.COMMANDS):
    main.add_command(_command)


if __name__ == "__main__":
    main()
