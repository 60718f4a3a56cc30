"""One module per group of commands; each registers its commands on the app of
:mod:`backend_spec.cli.options`."""
