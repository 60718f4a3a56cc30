"""The report of ``bespec export`` for a pt2e Quantizer: the verdict, match counts, and per ATen
op what the spec's quantizer does differently (or what the format could not say)."""

from __future__ import annotations

from typing import Any

from backend_spec.cli.render.console import escape

#: Lines shown per differing op (the rest are counted).
SHOWN_PER_OP = 3


def render_summary(result: Any) -> str:
    """One line: models and probes that quantize identically."""
    probes = sum(r.identical for r in result.probes)
    flow = " in the QAT flow (prepare_qat_pt2e, training mode)" if result.qat else ""
    text = (
        f"verified: {result.matched}/{len(result.models)} models and {probes}/"
        f"{len(result.probes)} probes quantize identically{flow} (placement, qparams, "
        "outputs)\n"
    )
    return text + render_pipeline(result) + render_left_out(result)


def render_pipeline(result: Any) -> str:
    """Which allow-listed pass the spec runs as the quantizer's ``transform_for_annotation``
    (spec_version 8), if one reproduced it."""
    if not getattr(result, "pipeline", ""):
        return ""
    return (
        f"note: {escape(result.pipeline)} rewrites the graph as the quantizer's "
        "transform_for_annotation does: the spec runs it (transform_for_annotation)\n"
    )


def render_left_out(result: Any) -> str:
    """The models and probes the original quantizer itself fails on (left out), if any: the
    models by name, the probes by the ops they probe."""
    if not result.left_out:
        return ""
    models = [label for label in result.left_out if ":" not in label]
    probes = [label for label in result.left_out if ":" in label]
    ops = dict.fromkeys(label.split(":", 1)[1].split("#")[0] for label in probes)
    parts = []
    if models:
        parts.append(f"models {', '.join(models)}")
    if probes:
        parts.append(f"{len(probes)} probes of {', '.join(ops)}")
    return f"note: the quantizer itself fails on {escape('; '.join(parts))} (left out)\n"


def render_crash(exc: BaseException) -> str:
    """An exception inside export itself: bespec's bug, reported (nothing was written)."""
    what = escape(f"{type(exc).__name__}: {str(exc)[:300]}")
    return f"error: bespec bug: export failed: {what} (please report it)\nnothing was written\n"


#: Ops named per gap line (the rest are counted): a weight observer no spec names is one gap
#: for every spelling and fusion of every weighted op (OpenVINO's weight-only modes: 29).
SHOWN_OPS_PER_GAP = 6


def _gap_lines(gaps: list[Any]) -> list[str]:
    """What the format could not say, one line per reason with the ops it holds for (ops
    that share the same reasons are listed together)."""
    by_op: dict[str, list[str]] = {}
    for gap in gaps:
        by_op.setdefault(gap.op, []).append(gap.what)
    by_what: dict[str, list[str]] = {}
    for op, what in by_op.items():
        by_what.setdefault("; ".join(dict.fromkeys(what)), []).append(op)
    if not by_what:
        return []
    lines = ["note: inference found what the format cannot say:"]
    for what, ops in by_what.items():
        shown = ", ".join(ops[:SHOWN_OPS_PER_GAP])
        more = f" and {len(ops) - SHOWN_OPS_PER_GAP} more" if len(ops) > SHOWN_OPS_PER_GAP else ""
        lines.append(f"  {escape(shown + more)}: {escape(what)}")
    return lines


def render_refusal(result: Any) -> str:
    """Why the spec was not written: the crash, or each differing ATen op with examples, and
    the gaps inference found (what the format could not say)."""
    lines = [f"error: not verified: {escape(why)}" for why in result.unverified]
    if result.error.startswith("spec: "):
        where = f" on {', '.join(result.bug)}" if result.bug else ""
        lines.append(
            f"error: bespec bug: the quantizer of the inferred spec fails{escape(where)}: "
            f"{escape(result.error.removeprefix('spec: '))} (please report it)"
        )
    elif result.error.startswith("compile: "):
        lines.append(
            "error: bespec bug: the inferred spec does not compile: "
            f"{escape(result.error.removeprefix('compile: '))} (please report it)"
        )
    elif result.error:
        lines.append(f"error: the original quantizer fails: {escape(result.error)}")
    differing = result.differing_ops()
    if differing:
        names = ", ".join(escape(op) for op in differing)
        count = len(differing)
        lines.append(f"error: the spec cannot express the quantizer on {count} ops: {names}")
        for op, found in differing.items():
            lines.append(f"  {escape(op)} ({len(found)} nodes):")
            lines += [f"    {escape(line)}" for line in found[:SHOWN_PER_OP]]
            if len(found) > SHOWN_PER_OP:
                lines.append(f"    ... and {len(found) - SHOWN_PER_OP} more")
    lines += _gap_lines(result.gaps())
    if result.left_out:
        lines.append(render_left_out(result).rstrip("\n"))
    if getattr(result, "pipeline", ""):
        lines.append(render_pipeline(result).rstrip("\n"))
    lines.append("nothing was written")
    return "\n".join(lines) + "\n"
