"""``bespec check --flow pt2e|both`` and ``bespec explain --flow pt2e``.

``--flow pt2e`` quantizes the reference models (the check zoo, the pt2e reference nets and any
``--model module:factory``) with the spec's quantizer and reports each one's SQNR against float.
``--flow both`` runs FX too and fails on any difference outside the documented classes of
:data:`backend_spec.pt2e.flows.DIFFERENCE_CLASSES`. With ``--qat`` both train instead
(``prepare_qat_pt2e`` / ``prepare_qat_fx``, :mod:`backend_spec.pt2e.qat`). Both return their
rows; the CLI renders them (:mod:`backend_spec.cli.render.pt2e`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from backend_spec._torch import BackendConfig

Factory = Callable[[], tuple[Any, tuple]]


def reference_models() -> dict[str, Factory]:
    """The named reference models: the check zoo, then the pt2e reference nets (every flow
    takes these names for ``--model``; the pt2e flows run them all by default)."""
    from backend_spec.check import zoo
    from backend_spec.pt2e import nets

    return {**zoo.MODELS, **nets.NETS}


@dataclass(frozen=True)
class FlowReport:
    """One ``check --flow pt2e|both`` run: a row per model, and the quantizer's summary."""

    flow: str
    rows: list[dict[str, Any]]
    summary: str
    qat: bool = False

    @property
    def failed(self) -> int:
        return sum(1 for row in self.rows if not row["ok"])


def flow_check(
    backend_config: BackendConfig,
    flow: str,
    models: dict[str, Factory],
    *,
    engine: str | None = None,
    qat: bool = False,
) -> FlowReport:
    """Run the pt2e (or both) flow over ``models``, a row per model; with ``qat``, training
    (``prepare_qat_pt2e`` against ``prepare_qat_fx``). ``engine``: the one ``check`` runs FX
    on; the FX side is ``check``'s own pipeline (its verdict is the row's ``fx``), and the
    quantizer takes the same QConfigs."""
    from backend_spec.pt2e import quantizer, require_torchao

    require_torchao()
    engine = None if qat else engine
    template = quantizer(backend_config, qat=qat, engine=engine, runnable_first=False)
    rows = [
        _one(name, backend_config, template, factory, flow, qat, engine)
        for name, factory in models.items()
    ]
    return FlowReport(flow, rows, template.report.summary(), qat)


def _one(name, backend_config, template, factory, flow, qat, engine) -> dict[str, Any]:
    from backend_spec.pt2e import flows
    from backend_spec.pt2e import qat as qat_flows
    from backend_spec.pt2e.runtime import TableQuantizer

    run_pt2e = qat_flows.run_pt2e_qat if qat else flows.run_pt2e
    compare = qat_flows.compare_qat if qat else flows.compare

    def fresh() -> TableQuantizer:
        made = TableQuantizer(template.table)
        made.report = template.report
        return made

    try:
        if flow == "pt2e":
            model, inputs = factory()
            result = run_pt2e(fresh(), model, inputs, flows.calibration(inputs))
            reference = flows.first_tensor(model(*inputs))
            db = flows.sqnr(reference, result.output)
            return {
                "model": name,
                "ok": True,
                "pt2e_db": _finite(db),
                "quantize_ops": result.quantize_ops,
            }
        if qat:
            compared = compare(name, backend_config, fresh, factory)
        else:
            compared = compare(name, backend_config, fresh, factory, engine=engine)
    except flows.FxFailed as exc:  # check's own FX row, verdict and cause
        fx = exc.result
        return {
            "model": name,
            "ok": False,
            "fx": fx.status,
            "error": f"FX: {fx.reason}",
            "fx_detail": fx.detail,
        }
    except Exception as exc:  # a model that does not export or quantize is a failed row
        return {"model": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    fx = compared.fx_check
    ok = (fx is None or fx.status != "fail") and (compared.identical or bool(compared.classes))
    return {
        "model": name,
        "ok": ok,
        "fx": None if fx is None else fx.status,
        "fx_reason": "" if fx is None else fx.reason,
        "fx_detail": "" if fx is None else fx.detail,
        "identical": compared.identical,
        "classes": compared.classes,
        "fx_db": _finite(compared.fx_db),
        "pt2e_db": _finite(compared.pt2e_db),
        "between_db": _finite(compared.between_db),
        "quantize_ops": [compared.fx.quantize_ops, compared.pt2e.quantize_ops],
    }


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 2)


def explain_pt2e(
    backend_config: BackendConfig, model: Any, inputs: tuple, *, qat: bool = False
) -> list[Any]:
    """Per ATen node: the rule that annotated it, or why none did (with ``qat``: the QAT
    quantizer on the training-mode export, where conv-bn chains are whole)."""
    from backend_spec._torch import quiet, torch
    from backend_spec.pt2e import quantizer

    made = quantizer(backend_config, qat=qat)
    with quiet():
        graph_module = torch.export.export(model.train(qat), inputs).module()
    return list(made.explain(graph_module))
