"""The same spec drives torchao's pt2e flow.

``backend_spec.quantizer(spec)`` compiles a spec (or a BackendConfig) into a rule table of plain
data (:mod:`.rules`, with ATen chains from :mod:`.aten`) and returns the torchao ``Quantizer``
that interprets it (:mod:`.runtime`). torchao is an optional extra (``backend-spec[pt2e]``);
everything else in bespec works without it, and :func:`quantizer` then raises one clear error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from backend_spec._torch import BackendConfig

if TYPE_CHECKING:
    from backend_spec.pt2e.rules import Report
    from backend_spec.pt2e.runtime import TableQuantizer

__all__ = ["TorchaoMissing", "compile_table", "quantizer", "require_torchao"]

INSTALL_HINT = "install the pt2e extra: pip install 'backend-spec[pt2e]' (torchao==0.18.0)"


class TorchaoMissing(ImportError):
    """torchao, which the pt2e flow needs, is not installed."""


def require_torchao() -> None:
    """Raise :class:`TorchaoMissing` with the install hint when torchao cannot be imported."""
    import importlib.util

    try:
        found = importlib.util.find_spec("torchao") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise TorchaoMissing(f"the pt2e flow needs torchao, which is not installed: {INSTALL_HINT}")


def compile_table(
    spec_or_backend_config: BackendConfig | str | os.PathLike[str],
    *,
    engine: str | None = None,
    allow_imports: Iterable[str] = (),
    qat: bool = False,
    runnable_first: bool = True,
) -> tuple[dict[str, Any], Report]:
    """(rule table, report) of a spec path or a BackendConfig; needs no torchao."""
    from backend_spec.analysis.qconfigs import resolve_backend_config
    from backend_spec.pt2e.rules import compile_table as compile_backend

    backend_config = resolve_backend_config(spec_or_backend_config, allow_imports)
    return compile_backend(backend_config, engine=engine, qat=qat, runnable_first=runnable_first)


def quantizer(
    spec_or_path: BackendConfig | str | os.PathLike[str],
    *,
    allow_imports: Iterable[str] = (),
    engine: str | None = None,
    qat: bool = False,
    runnable_first: bool = True,
) -> TableQuantizer:
    """A torchao ``Quantizer`` that quantizes like ``prepare_fx`` with
    ``backend_spec.qconfig_mapping`` under the same spec.

    Use it as ``prepare_pt2e(torch.export.export(model, args).module(), quantizer(spec))``.
    With ``qat=True`` it is for ``prepare_qat_pt2e`` and trains like ``prepare_qat_fx`` with
    ``qconfig_mapping(spec, qat=True)``: the spec's ``fake_quant`` kinds, conv-bn chains
    annotated whole (see :mod:`.qat`).
    ``engine`` and ``runnable_first`` choose the QConfigs as ``qconfig_mapping`` does (``check
    --flow both`` builds it like the FX check's mapping).
    Its ``.report`` lists the rules, the entries skipped (with the reason) and conflicts.
    """
    require_torchao()
    from backend_spec.analysis.qconfigs import resolve_backend_config
    from backend_spec.ir.lower import backend_of

    backend_config = resolve_backend_config(spec_or_path, allow_imports)
    table, report = compile_table(
        backend_config, engine=engine, qat=qat, runnable_first=runnable_first
    )
    from backend_spec.pt2e.runtime import TableQuantizer

    # The spec_version 8 passes, as the compiler resolved them through the allow-list.
    passes = tuple(ref.function for ref in backend_of(backend_config).transform_for_annotation)
    result = TableQuantizer(table, passes=passes)
    result.report = report
    return result
