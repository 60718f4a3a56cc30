"""Human-readable views of a compiled BackendConfig for ``bespec compile`` and ``bespec show``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from backend_spec.cli.render.console import make_console, plural, print_table, user_text
from backend_spec.compiler.compiler import Compiled
from backend_spec.names.labels import config_label, object_label
from backend_spec.names.naming import observation_type_name
from backend_spec.specfile.fields import MODULE_KINDS, fields_of


def counts(backend_config: Any) -> dict[str, int]:
    """Pattern entries by kind, which add up to ``patterns``: ``fusions`` (entries with a
    fuser), ``quantized`` (other entries with dtype configs) and ``other`` (neither); plus the
    number of distinct dtype configs."""
    configs = backend_config.configs
    distinct = {repr(d.to_dict()) for c in configs for d in c.dtype_configs}
    fusions = sum(1 for c in configs if c.fuser_method is not None)
    quantized = sum(1 for c in configs if c.fuser_method is None and c.dtype_configs)
    return {
        "patterns": len(configs),
        "fusions": fusions,
        "quantized": quantized,
        "other": len(configs) - fusions - quantized,
        "dtype_configs": len(distinct),
    }


def summary_text(backend_config: Any, spec: Path | str) -> str:
    """``SPEC: backend NAME with 3 patterns (2 quantized, 1 fusion) and 1 dtype config``."""
    n = counts(backend_config)
    parts = [plural(n["quantized"], "quantized", "quantized"), plural(n["fusions"], "fusion")]
    if n["other"]:
        parts.append(f"{n['other']} without dtype configs")
    return (
        f"{spec}: backend {backend_config.name} with {plural(n['patterns'], 'pattern')} "
        f"({', '.join(parts)}) and {plural(n['dtype_configs'], 'distinct dtype config')}"
    )


def print_summary(backend_config: Any, spec: Path) -> None:
    line = Text("ok", style="bold green")
    line.append(user_text(f" {summary_text(backend_config, spec)}"))
    make_console().print(line, soft_wrap=True)


def dtype_config_labels(compiled: Compiled) -> Any:
    """A function naming each DTypeConfig of ``compiled``: the spec's own name when it has one,
    else the name ``bespec export`` would give it (``weighted_op_quint8``...)."""
    from backend_spec.export.dtypes import DTypeConfigTable

    table = DTypeConfigTable()

    def name_of(dtype_config: Any) -> str:
        return dtype_config.name or table.name_of(dtype_config)

    return name_of


def print_pattern_table(compiled: Compiled) -> None:
    """Every pattern entry (of the intermediate form): its dtype configs by name, modules,
    observation and origin."""
    bc = compiled.backend_config
    name_of = dtype_config_labels(compiled)
    rows = []
    entries = zip(bc.configs, compiled.backend, strict=True)
    for i, (config, entry) in enumerate(entries, start=1):
        origin = entry.origin
        where = origin.source + (f":{origin.line}" if origin.line else "")
        modules = " ".join(
            f"{spec.short}={object_label(entry.get(spec.key))}"
            for spec in fields_of(*MODULE_KINDS)
            if entry.get(spec.key) is not None
        )
        rows.append(
            [
                str(i),
                config_label(config),
                " ".join(name_of(dc) for dc in entry.dtype_configs),
                modules,
                observation_type_name(config.observation_type).replace("_", " "),
                where,
            ]
        )
    title = f"{bc.name}: {plural(len(bc.configs), 'pattern')}"
    headers = ("#", "pattern", "dtype configs", "modules", "observation", "from")
    console = make_console()
    print_table(console, title, headers, rows, heading_cells=2)
    print_dtype_table(console, compiled, name_of)


def print_dtype_table(console: Any, compiled: Compiled, name_of: Any) -> None:
    """The dtype configs the entries name, each once: dtypes, constraints and the version 2
    observer options (per-channel weights, observers) a BackendConfig has no field for."""
    from backend_spec.cli.render.docs import dtype_cells

    rows: dict[str, list[str]] = {}
    for entry in compiled.backend:
        for dc in entry.dtype_configs:
            rows.setdefault(name_of(dc), [name_of(dc), *dtype_cells(dc)])
    if rows:
        headers = ("dtype config", "input", "weight", "output", "bias", "dynamic")
        title = plural(len(rows), "dtype config")
        print_table(console, title, headers, list(rows.values()), heading_cells=1)
