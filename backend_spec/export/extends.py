"""``extends`` recovered: a config written as a built-in backend plus its changes.

Many real configs are torch's native config with a handful of patterns added, replaced or
dropped. Exported flat, the few changes drown in hundreds of copied entries. Here the config
is compared with a built-in's intermediate form (lifted and described once per built-in),
pattern by pattern (:func:`describe_pattern`), and planned as
the loader will rebuild it: the base's patterns in the base's order, entries with the same
pattern replaced in place, ``remove`` dropping patterns, and new entries appended. Any order
is reachable (a pattern that moved is removed and appended again), so the round trip stays
exact, pattern order included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from backend_spec._torch import BackendConfig
from backend_spec.analysis.compare import describe_pattern
from backend_spec.compiler.loader import builtin_backend
from backend_spec.ir import Entry
from backend_spec.ir.lower import entries_of
from backend_spec.names.vocabulary import BUILTIN_BACKENDS

#: Share of a config's patterns a built-in must supply unchanged to be picked automatically.
CLEARLY_CLOSEST = 0.5


@dataclass
class Plan:
    """What to write on top of ``base``: ``entries`` (index in the config, pattern config)
    and ``remove`` (forward-order patterns of the base, as torch keeps them; the document
    builder writes them as spec data)."""

    base: str
    entries: list[tuple[int, Any]] = field(default_factory=list)
    remove: list[Any] = field(default_factory=list)
    unchanged: int = 0
    kept: int = 0

    @property
    def size(self) -> int:
        return len(self.entries) + len(self.remove)


def _table(backend_config: BackendConfig) -> dict[Any, Any]:
    return dict(backend_config._pattern_complex_format_to_config)


def _in_place_prefix(keys: list[Any], base_index: dict[Any, int]) -> int:
    """How many leading patterns of the config sit in the base in the base's order."""
    last = -1
    for n, key in enumerate(keys):
        position = base_index.get(key)
        if position is None or position <= last:
            return n
        last = position
    return len(keys)


def _removable(entry: Entry) -> Any:
    """The forward pattern naming a base entry in ``remove`` (None when the format cannot
    name it: a complex-format pattern, or one that nests a tuple)."""
    if entry.get("pattern_complex_format") is not None:
        return None
    pattern = entry.pattern
    if isinstance(pattern, tuple) and any(isinstance(op, tuple) for op in pattern):
        return None
    return pattern


@cache
def _described(base: str) -> dict[Any, dict[str, Any]]:
    """Pattern key -> description of each entry of built-in ``base``, in its order (from
    its cached intermediate form, once: the plans against it only compare them)."""
    return {entry.key: describe_pattern(entry) for entry in builtin_backend(base)}


def _same(entry_of: Callable[[Any], Entry], config: Any, described: dict[str, Any]) -> bool:
    try:
        return describe_pattern(entry_of(config)) == described
    except Exception:  # a malformed entry is never "unchanged"; export reports it
        return False


def plan_against(backend_config: BackendConfig, base: str) -> Plan | None:
    """The plan of ``backend_config`` on top of built-in ``base`` (None if not expressible)."""
    base_table = _described(base)
    table = _table(backend_config)
    keys = list(table)
    base_index = {key: i for i, key in enumerate(base_table)}
    prefix = _in_place_prefix(keys, base_index)
    kept = set(keys[:prefix])
    plan = Plan(base, kept=prefix)
    entry_of = entries_of(backend_config)
    for entry in builtin_backend(base):
        if entry.key not in kept:
            removable = _removable(entry)
            if removable is None:
                return None
            plan.remove.append(removable)
    for index, key in enumerate(keys):
        config = table[key]
        if index < prefix and _same(entry_of, config, base_table[key]):
            plan.unchanged += 1
        else:
            plan.entries.append((index, config))
    return plan


def rebase(backend_config: BackendConfig, base: str) -> Plan:
    """:func:`plan_against`, or ValueError naming why ``base`` cannot be used."""
    if base not in BUILTIN_BACKENDS:
        raise ValueError(f"unknown base {base!r}: expected one of {', '.join(BUILTIN_BACKENDS)}")
    plan = plan_against(backend_config, base)
    if plan is None:
        raise ValueError(f"{base} has a pattern that 'remove' cannot name")
    return plan


def closest_builtin(backend_config: BackendConfig) -> str | None:
    """The built-in a config is clearly made from, or None.

    Clearly: it supplies, unchanged, at least half of the config's patterns and half of its
    own; among several, the one that leaves the least to write.
    """
    count = len(backend_config.configs)
    if count == 0:
        return None
    best: Plan | None = None
    for name in BUILTIN_BACKENDS:
        plan = plan_against(backend_config, name)
        if plan is None:
            continue
        base_count = plan.kept + len(plan.remove)  # every base pattern is kept or removed
        if min(plan.unchanged / count, plan.unchanged / max(base_count, 1)) < CLEARLY_CLOSEST:
            continue
        if best is None or (plan.size, -plan.unchanged) < (best.size, -best.unchanged):
            best = plan
    return None if best is None else best.base
