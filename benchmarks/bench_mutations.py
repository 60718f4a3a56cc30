"""Mutation score of ``bespec check --golden``: how many single-field spec edits it notices.

    python benchmarks/bench_mutations.py [SPEC] [--count N] [--jobs J] [--seed S] [--models]
                                         [--quick]

Records a golden of SPEC (default ``specs/native.yaml``), then applies N random single-field
edits of the kinds a reviewer would worry about (swapped observation types, dtype configs,
reference, fused and root modules, ``input_type_to_index``, narrowed activation ranges, QAT
root modules), checks each edited spec against the golden and prints which edits went unnoticed.
Edits that make the spec invalid are not counted. Slow: one full check per edit, so not part
of ``make bench``; ``--quick`` makes two edits of ``specs/tutorial.yaml`` (see ``_bench.py``).
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from _bench import QUICK, exit_code, ratio
from ruamel.yaml import YAML

from backend_spec._torch import silence_globally
from backend_spec.check import compare_to_golden, run_check
from backend_spec.check.golden import golden_from_report
from backend_spec.diagnostics import SpecError

TUTORIAL = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "specs", "tutorial.yaml"
)
Doc = dict[str, Any]
Edit = tuple[str, Callable[[Doc], None]]

_SWAPS = {
    "observation_type": [
        "output_share_observer_with_input",
        "output_use_different_observer_as_input",
    ],
    "reference_quantized_module": ["nnqr.Conv1d", "nnqr.Conv2d", "nnqr.Linear", "nnqr.Conv3d"],
    "fused_module": ["nni.ConvReLU1d", "nni.ConvReLU2d", "nni.LinearReLU", "nni.ConvBn2d"],
    "root_module": ["nn.Conv1d", "nn.Conv2d", "nn.Linear", "nn.Conv3d"],
}


def edits(doc: Doc) -> Iterator[Edit]:
    """Every candidate single-field edit of ``doc``."""
    names = list(doc.get("dtype_configs", {}))
    for i, entry in enumerate(doc["patterns"]):
        label = f"patterns[{i}] {entry.get('pattern', entry.get('pattern_complex_format'))}"
        for key, choices in _SWAPS.items():
            if key in entry or key == "observation_type":
                default = choices[1] if key == "observation_type" else None  # torch's default
                for choice in choices:
                    if entry.get(key, default) != choice:  # a real edit, not the default again
                        yield f"{label}: {key} -> {choice}", _setter(i, key, choice)
        if "input_type_to_index" in entry:
            swapped = {"weight": 2, "bias": 1}
            yield (
                f"{label}: input_type_to_index swapped",
                _setter(i, "input_type_to_index", swapped),
            )
        for name in names:
            if entry.get("dtype_configs") and entry["dtype_configs"] != [name]:
                yield f"{label}: dtype_configs -> [{name}]", _setter(i, "dtype_configs", [name])
    for name, config in doc.get("dtype_configs", {}).items():
        for side in ("input_dtype", "output_dtype"):
            value = config.get(side)
            dtype = value if isinstance(value, str) else (value or {}).get("dtype")
            if dtype in ("quint8", "qint8"):
                low = 0 if dtype == "quint8" else -128
                narrowed = {
                    "dtype": dtype,
                    "quant_min_lower_bound": low,
                    "quant_max_upper_bound": low + 63,
                }
                yield f"dtype_configs.{name}.{side} narrowed", _dtype_setter(name, side, narrowed)


def _setter(index: int, key: str, value: Any) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        doc["patterns"][index][key] = value

    return apply


def _dtype_setter(name: str, side: str, value: Any) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        doc["dtype_configs"][name][side] = value

    return apply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("spec", nargs="?", default="specs/native.yaml")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", action="store_true", help="include the zoo models")
    parser.add_argument("--quick", action="store_true", help="two edits of the tutorial spec")
    args = parser.parse_args()
    if QUICK:
        args.spec, args.count, args.jobs, args.models = TUTORIAL, 2, 1, False
    silence_globally()
    with open(args.spec, encoding="utf-8") as handle:
        doc = YAML(typ="safe").load(handle)
    models = None if args.models else []
    with tempfile.TemporaryDirectory(prefix="bespec-mutations-") as folder:
        base = os.path.join(folder, "base.yaml")
        _write(base, doc)
        golden = golden_from_report(run_check(base, jobs=args.jobs, models=models))
        candidates = _round_robin(list(edits(doc)), random.Random(args.seed))
        caught = counted = 0
        for description, apply in candidates[: args.count]:
            edited = copy.deepcopy(doc)
            apply(edited)
            path = os.path.join(folder, "edited.yaml")
            _write(path, edited)
            try:
                report = run_check(path, jobs=args.jobs, models=models)
            except SpecError:
                print(f"invalid   {description}")
                continue
            drift = compare_to_golden(report, golden)
            counted += 1
            caught += bool(drift)
            print(
                f"{'caught' if drift else 'MISSED':9s} {description}"
                + (f"  [{drift[0]}]" if drift else "")
            )
    ratio(f"edits caught ({caught})", caught / max(counted, 1), f"the {counted} valid edits")
    return exit_code()


def _round_robin(candidates: list[Edit], rng: random.Random) -> list[Edit]:
    """Shuffled edits, alternating between kinds (the text after the colon's first word), so
    that a small ``--count`` samples every kind rather than mostly dtype_configs swaps."""
    kinds: dict[str, list[Edit]] = {}
    for edit in candidates:
        kind = edit[0].split(": ", 1)[1].split()[0] if ": " in edit[0] else "narrowed"
        kinds.setdefault(kind, []).append(edit)
    for group in kinds.values():
        rng.shuffle(group)
    ordered = []
    while any(kinds.values()):
        for group in kinds.values():
            if group:
                ordered.append(group.pop())
    return ordered


def _write(path: str, doc: Doc) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        YAML(typ="safe").dump(doc, handle)


if __name__ == "__main__":
    raise SystemExit(main())
