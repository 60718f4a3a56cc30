"""One module per lint rule; see :mod:`backend_spec.lint.registry` for what a module defines."""
