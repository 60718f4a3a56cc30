"""Export a hand-written pt2e ``Quantizer`` to a spec, by observing it.

1. **Probe** (:mod:`.probe`): annotate boards of one-op and chain models in five contexts and
   read the annotations as data;
2. **infer** (:mod:`.infer`): turn them into pattern entries and dtype configs, noting what the
   format cannot say;
3. **verify** (:mod:`.verify`): quantize the probe boards, the verification models
   (:mod:`.models`) and the caller's own models with the original quantizer and with the
   written spec's quantizer, and compare q/dq placement, qparams and outputs per ATen op.

The spec text is returned only with the verdict; the CLI writes it (atomically) only when every
model matched. Probe results are cached on disk per torch / torchao version and quantizer
identity (:func:`identity`) when the quantizer has a stable description.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend_spec.export.quantizer.infer import Gap, Inferred, infer
from backend_spec.export.quantizer.verify import ModelResult, compare_models

__all__ = ["QuantizerExport", "export_quantizer", "is_quantizer", "quantizer_factory"]

#: Bumped whenever the probe boards or the probe data layout change (old cache entries die).
PROBE_FORMAT = 1


@dataclass
class QuantizerExport:
    """The spec text, what was inferred, and how each verification model compared."""

    text: str
    inferred: Inferred
    results: list[ModelResult] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(result.identical for result in self.results)

    @property
    def ok(self) -> bool:
        return self.matched == len(self.results)

    def differing_ops(self) -> dict[str, list[str]]:
        """ATen op -> one line per differing node (``model: node: what``), over all models."""
        found: dict[str, list[str]] = {}
        for result in self.results:
            for op, lines in result.differences.items():
                found.setdefault(op, []).extend(f"{result.name}: {line}" for line in lines)
        return found

    def gaps(self) -> list[Gap]:
        return self.inferred.gaps


def is_quantizer(obj: Any) -> bool:
    """Whether ``obj`` is a torchao pt2e ``Quantizer`` (without importing torchao otherwise)."""
    return any(
        cls.__name__ == "Quantizer" and cls.__module__.startswith("torchao.quantization.pt2e")
        for cls in type(obj).__mro__
    )


def quantizer_factory(obj: Any) -> Callable[[], Any]:
    """A factory of fresh quantizers: annotating may change a quantizer's state, so every
    probe and model gets its own copy of an instance."""
    return functools.partial(copy.deepcopy, obj)


def export_quantizer(
    factory: Callable[[], Any],
    *,
    name: str,
    fmt: str = "yaml",
    probe_models: Iterable[tuple[str, Any, tuple]] = (),
    cache_dir: Path | None = None,
) -> QuantizerExport:
    """Probe, infer, write and verify; see the module docstring."""
    from backend_spec.export import dump

    boards = _boards()
    probed = _cached_probe(factory, boards, cache_dir)
    inferred = infer(probed, {unit.key: unit.names for unit in boards.units}, name)
    text = dump(inferred.backend_config, fmt, name=name)
    candidate = _spec_quantizer(text, fmt)
    models = [(f"probe board ({c})", g, boards.boards.inputs) for c, g in _verify_boards(boards)]
    models += [(label, *made) for label, made in _model_set()]
    models += list(probe_models)
    result = QuantizerExport(text, inferred)
    result.results = compare_models(factory, candidate, models)
    return result


@dataclass
class _Exported:
    boards: Any
    graphs: dict[str, Any]

    @property
    def units(self) -> Any:
        return self.boards.units


@functools.cache
def _boards() -> _Exported:
    """The probe boards, built and exported once per process (they do not depend on the
    quantizer)."""
    from backend_spec.export.quantizer import probe

    boards = probe.build_units()
    return _Exported(boards, {c: probe.export_board(boards, c) for c in probe.CONTEXTS})


def _verify_boards(boards: _Exported) -> list[tuple[str, Any]]:
    return [(c, boards.graphs[c]) for c in ("alone", "pre_post", "mixed")]


def _model_set() -> list[tuple[str, tuple]]:
    from backend_spec.export.quantizer.models import MODELS
    from backend_spec.pt2e.nets import NETS

    chosen = {**MODELS, "x86_net": NETS["x86_net"], "tutorial_net": NETS["tutorial_net"]}
    return [(label, factory()) for label, factory in chosen.items()]


def _spec_quantizer(text: str, fmt: str) -> Callable[[], Any]:
    """A factory of the quantizer of ``text`` as a spec file loads it (the file round-trips)."""
    import backend_spec

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"spec.{fmt}"
        path.write_text(text, encoding="utf-8")
        backend_config = backend_spec.load(path)
    return functools.partial(backend_spec.quantizer, backend_config)


# --- the probe cache --------------------------------------------------------------------------


def _cached_probe(factory: Callable[[], Any], boards: _Exported, cache_dir: Path | None) -> dict:
    from backend_spec.export.quantizer import probe

    key = identity(factory())
    path = None if key is None else (cache_dir or default_cache_dir()) / f"{key}.json"
    if path is not None and path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    probed = probe.probe(factory, boards.boards, boards.graphs)
    if path is not None:
        _store(path, probed)
    return probed


def _store(path: Path, data: dict) -> None:
    from backend_spec.files import WriteError, write_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, sort_keys=True))
    except (OSError, WriteError):
        pass  # a cache that cannot be written only costs time


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bespec" / "quantizer-probes"


def identity(quantizer: Any) -> str | None:
    """A stable key for the quantizer's behaviour: versions, class and its state's repr.

    ``None`` (no caching) when the state's repr is not stable across processes (it shows an
    address, ``at 0x...``): then two different quantizers could not be told apart."""
    import torch
    import torchao

    try:
        state = repr(sorted(vars(quantizer).items(), key=lambda item: item[0]))
    except TypeError:
        return None
    if " at 0x" in state or "object at" in state:
        return None
    cls = type(quantizer)
    text = "\n".join(
        [str(PROBE_FORMAT), torch.__version__, torchao.__version__,
         f"{cls.__module__}.{cls.__qualname__}", state]
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
