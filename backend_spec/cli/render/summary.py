"""Human-readable views of a compiled BackendConfig for ``bespec compile`` and ``bespec show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from backend_spec.build.compiler import Compiled, pattern_key
from backend_spec.cli.render.console import make_console, user_text
from backend_spec.names.labels import config_label, object_label
from backend_spec.names.naming import observation_type_name
from backend_spec.spec.fields import MODULE_KINDS, fields_of


def _console() -> Console:
    return make_console()


def counts(backend_config: Any) -> dict[str, int]:
    """Patterns, fusions, quantized patterns and distinct dtype configs of a config."""
    configs = backend_config.configs
    distinct = {repr(d.to_dict()) for c in configs for d in c.dtype_configs}
    return {
        "patterns": len(configs),
        "fusions": sum(1 for c in configs if c.fuser_method is not None),
        "quantized": sum(1 for c in configs if c.dtype_configs),
        "dtype_configs": len(distinct),
    }


def print_summary(backend_config: Any, spec: Path) -> None:
    n = counts(backend_config)
    _console().print(
        user_text("ok", "bold green"),
        user_text(f"{spec}: backend"),
        user_text(backend_config.name, "bold"),
        user_text(
            f"with {n['patterns']} patterns ({n['quantized']} quantized, {n['fusions']} "
            f"fusions) and {n['dtype_configs']} distinct dtype configs"
        ),
    )


def print_pattern_table(compiled: Compiled) -> None:
    bc = compiled.backend_config
    table = Table(title=user_text(f"{bc.name}: {len(bc.configs)} patterns"), title_justify="left")
    for column in ("#", "pattern", "observation", "dtype configs", "modules", "from"):
        table.add_column(column, overflow="fold")
    for i, config in enumerate(bc.configs, start=1):
        origin = compiled.origins.get(pattern_key(config))
        where = "" if origin is None else origin.source + (f":{origin.line}" if origin.line else "")
        modules = " ".join(
            f"{spec.short}={object_label(getattr(config, spec.getter))}"
            for spec in fields_of(*MODULE_KINDS)
            if getattr(config, spec.getter) is not None
        )
        table.add_row(
            str(i),
            user_text(config_label(config)),
            observation_type_name(config.observation_type).replace("_", " "),
            str(len(config.dtype_configs)),
            user_text(modules),
            user_text(where),
        )
    _console().print(table)
