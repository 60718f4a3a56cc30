"""The ``bespec`` command line: argument parsing only; the work lives in the stage packages and
the output in :mod:`backend_spec.cli.app.render`."""

from backend_spec.cli.app import main

__all__ = ["main"]
