"""``bespec check --flow pt2e|both`` and ``bespec explain --flow pt2e``.

``--flow pt2e`` quantizes the reference models (the check zoo, the pt2e reference nets and any
``--model module:factory``) with the spec's quantizer and reports each one's SQNR against float.
``--flow both`` runs FX too and fails on any difference outside the documented classes of
:data:`backend_spec.pt2e.flows.DIFFERENCE_CLASSES`. With ``--qat`` both train instead
(``prepare_qat_pt2e`` / ``prepare_qat_fx``, :mod:`backend_spec.pt2e.qat`). Both return the exit
status.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import typer

from backend_spec._torch import BackendConfig

Factory = Callable[[], tuple[Any, tuple]]


def reference_models(extra: Sequence[str] = ()) -> dict[str, Factory]:
    """The zoo, the pt2e reference nets, then ``module:factory`` models of the command line."""
    from backend_spec.analysis.explain import model_from_factory
    from backend_spec.check import zoo
    from backend_spec.pt2e import nets

    models: dict[str, Factory] = {**zoo.MODELS, **nets.NETS}
    for ref in extra:
        models[ref] = lambda ref=ref: model_from_factory(ref)
    return models


def flow_check(
    backend_config: BackendConfig,
    flow: str,
    models: dict[str, Factory],
    fmt: str,
    *,
    qat: bool = False,
) -> int:
    """Run the pt2e (or both) flow over ``models``; print a table or JSON; exit status."""
    from backend_spec.pt2e import quantizer, require_torchao

    require_torchao()
    template = quantizer(backend_config, qat=qat)
    rows = []
    for name, factory in models.items():
        rows.append(_one(name, backend_config, template, factory, flow, qat))
    failed = [row for row in rows if not row["ok"]]
    if fmt == "json":
        document = {"flow": flow, "qat": qat, "models": rows, "failed": len(failed)}
        typer.echo(json.dumps(document, indent=2))
    else:
        _print_text(rows, flow, template.report.summary())
    return 1 if failed else 0


def _one(name, backend_config, template, factory, flow, qat) -> dict[str, Any]:
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
        compared = compare(name, backend_config, fresh, factory)
    except Exception as exc:  # a model that does not export or quantize is a failed row
        return {"model": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    ok = compared.identical or bool(compared.classes)
    return {
        "model": name,
        "ok": ok,
        "identical": compared.identical,
        "classes": compared.classes,
        "fx_db": _finite(compared.fx_db),
        "pt2e_db": _finite(compared.pt2e_db),
        "between_db": _finite(compared.between_db),
        "quantize_ops": [compared.fx.quantize_ops, compared.pt2e.quantize_ops],
    }


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 2)


def _print_text(rows: list[dict[str, Any]], flow: str, summary: str) -> None:
    typer.echo(f"pt2e quantizer: {summary}")
    for row in rows:
        if "error" in row:
            typer.echo(f"FAIL {row['model']}: {row['error']}")
        elif flow == "pt2e":
            typer.echo(
                f"ok   {row['model']}: pt2e {_db(row['pt2e_db'])} vs float, "
                f"{row['quantize_ops']} quantize ops"
            )
        else:
            verdict = "same" if row["identical"] else ", ".join(row["classes"]) or "UNEXPLAINED"
            typer.echo(
                f"{'ok  ' if row['ok'] else 'FAIL'} {row['model']}: FX {_db(row['fx_db'])}, "
                f"pt2e {_db(row['pt2e_db'])}, between {_db(row['between_db'])}, quantize ops "
                f"{row['quantize_ops'][0]}/{row['quantize_ops'][1]}: {verdict}"
            )
    failed = sum(1 for row in rows if not row["ok"])
    typer.echo(f"{len(rows) - failed} of {len(rows)} models ok")


def _db(value: float | None) -> str:
    return "exact" if value is None else f"{value:.1f} dB"


def explain_pt2e(
    backend_config: BackendConfig, model: Any, inputs: tuple, fmt: str, *, qat: bool = False
) -> None:
    """Per ATen node: the rule that annotated it, or why none did (with ``qat``: the QAT
    quantizer on the training-mode export, where conv-bn chains are whole)."""
    from backend_spec._torch import quiet, torch
    from backend_spec.pt2e import quantizer

    made = quantizer(backend_config, qat=qat)
    with quiet():
        graph_module = torch.export.export(model.train(qat), inputs).module()
    verdicts = list(made.explain(graph_module))
    if fmt == "json":
        typer.echo(json.dumps([vars(v) for v in verdicts], indent=2))
        return
    for verdict in verdicts:
        head = f"{verdict.node} ({verdict.target})"
        if verdict.rule is not None:
            typer.echo(f"{head}: {verdict.rule}: {verdict.reason}")
        else:
            typer.echo(f"{head}: not annotated: {verdict.reason}")
