"""Human-readable views of a compiled BackendConfig for ``bespec compile`` and ``bespec show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from backend_spec.build.compiler import Compiled, pattern_key
from backend_spec.cli.render.console import make_console
from backend_spec.spec.fields import MODULE_KINDS, fields_of


def _console() -> Console:
    return make_console()


def _pattern_of(config: Any) -> Any:
    return config.pattern if config.pattern is not None else config._pattern_complex_format


def label(config: Any) -> str:
    """The pattern of a config as a spec writes it (``(nn.Conv2d, nn.ReLU)``)."""
    from backend_spec.export.document import pattern_label

    return pattern_label(_pattern_of(config))


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
        f"[bold green]ok[/] {spec}: backend [bold]{backend_config.name}[/] with "
        f"{n['patterns']} patterns ({n['quantized']} quantized, {n['fusions']} fusions) "
        f"and {n['dtype_configs']} distinct dtype configs"
    )


def _short(obj: Any) -> str:
    from backend_spec.analysis.compare import label as object_label

    return "" if obj is None else object_label(obj)


def print_pattern_table(compiled: Compiled) -> None:
    bc = compiled.backend_config
    table = Table(title=f"{bc.name}: {len(bc.configs)} patterns", title_justify="left")
    for column in ("#", "pattern", "observation", "dtype configs", "modules", "from"):
        table.add_column(column, overflow="fold")
    for i, config in enumerate(bc.configs, start=1):
        origin = compiled.origins.get(pattern_key(config))
        where = "" if origin is None else origin.source + (f":{origin.line}" if origin.line else "")
        modules = " ".join(
            f"{spec.short}={_short(getattr(config, spec.getter))}"
            for spec in fields_of(*MODULE_KINDS)
            if getattr(config, spec.getter) is not None
        )
        table.add_row(
            str(i),
            label(config),
            config.observation_type.name.lower().replace("_", " "),
            str(len(config.dtype_configs)),
            modules,
            where,
        )
    _console().print(table)
