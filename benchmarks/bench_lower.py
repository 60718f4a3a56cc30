"""Lowering figures (issue 29), as ratios measured inside one process.

* per model, the latency of the spec's lowered int8 program against the hand-written
  quantizer's lowered int8 program (``specs/xnnpack.yaml`` vs executorch's ``XNNPACKQuantizer``
  through the XNNPACK delegate, ``specs/x86_inductor.yaml`` vs torchao's
  ``X86InductorQuantizer`` through x86 inductor): 1.0x means the spec lowers as well as the
  quantizer it ports (medians after warm-up, one thread);
* the spec's int8 program against its fp32 program (what ``check --lower`` reports);
* the whole ``check --lower`` over the zoo against the issue's budgets (60 s for XNNPACK,
  5 min for inductor, on 2 cores).

Run: ``.venv/bin/python benchmarks/bench_lower.py [--quick] [--strict] [xnnpack|inductor]``
(``--quick``: the tutorial net through XNNPACK only). See ``_bench.py``.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _bench import QUICK, args, exit_code, ratio

from backend_spec._torch import torch
from backend_spec.lower import LoweringMissing, require
from backend_spec.lower.measure import median_us
from backend_spec.lower.quantized import quantize, quantize_with
from backend_spec.lower.run import Lowering, default_models, factory_for, lower_check

ROOT = Path(__file__).resolve().parent.parent
SPECS = {"xnnpack": ROOT / "specs/xnnpack.yaml", "inductor": ROOT / "specs/x86_inductor.yaml"}
BUDGET_SECONDS = {"xnnpack": 60.0, "inductor": 300.0}
#: Rounds of alternating spec / hand-written timing.
ROUNDS = 3


def hand_written(target: str):
    if target == "xnnpack":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        quantizer = XNNPACKQuantizer()
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
        return quantizer
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    quantizer = X86InductorQuantizer()
    quantizer.set_global(get_default_x86_inductor_quantization_config())
    return quantizer


def compare(target: str, models: list[str]) -> None:
    """Spec vs hand-written quantizer, lowered the same way, per model: whether the lowered
    programs are the same, and their latencies timed in alternation (rounds of spec, hand)."""
    from backend_spec.compiler.backends import load_backend
    from backend_spec.lower import inductor, xnnpack

    module = xnnpack if target == "xnnpack" else inductor
    lowering = Lowering(target, load_backend(str(SPECS[target])))
    torch.set_num_threads(1)
    spec_vs_hand, int8_vs_fp32 = [], []
    for name in models:
        model, inputs = factory_for(name)()
        spec_quantized = quantize(lowering.template, lowering.origins or {}, model, inputs)
        spec = module.lower_model(name, spec_quantized)
        if not spec.ops or spec.int8_us is None:
            continue  # nothing quantized, or it did not lower: no latency to compare
        try:
            hand_quantized = quantize_with(hand_written(target), model, inputs)
        except Exception as exc:  # X86InductorQuantizer refuses a module called twice
            print(f"{target} {name}: skipped, the hand-written quantizer fails: {exc}")
            continue
        if target == "xnnpack":  # timings are noisy on a shared machine; bytes are not
            same = _pte(spec_quantized) == _pte(hand_quantized)
            print(
                f"{target} {name}: the spec's .pte is byte-identical to the hand-written's: {same}"
            )
        else:
            hand = module.lower_model(name, hand_quantized, timing=False)
            same = spec.counters == hand.counters
            print(f"{target} {name}: inductor's int8 lowering counters are the same: {same}")
        spec_us, hand_us = _alternating(
            _runner(target, spec_quantized), _runner(target, hand_quantized)
        )
        spec_vs_hand.append(spec_us / hand_us)
        ratio(f"{target} {name}: spec int8", spec_us / hand_us, "hand-written int8")
        if spec.latency_ratio is not None:
            int8_vs_fp32.append(spec.latency_ratio)
    if spec_vs_hand:
        ratio(
            f"{target}: spec int8 (median over {len(spec_vs_hand)} models)",
            statistics.median(spec_vs_hand),
            "hand-written quantizer's int8",
        )
    if int8_vs_fp32:
        ratio(f"{target}: spec int8 (median)", statistics.median(int8_vs_fp32), "fp32 lowered")


def _runner(target: str, quantized):
    """A call of the lowered int8 program of ``quantized``."""
    from backend_spec.lower import inductor, xnnpack

    inputs = quantized.inputs
    if target == "xnnpack":
        exported = torch.export.export(quantized.converted, inputs)
        program = xnnpack.load(xnnpack.lower_program(exported)[0])
        return lambda: program.forward(inputs)
    inductor.register_passes()
    compiled = torch.compile(quantized.converted)

    def run():
        with torch.no_grad():
            return compiled(*inputs)

    run()
    return run


def _alternating(first, second, rounds: int = ROUNDS) -> tuple[float, float]:
    """The lowest of ``rounds`` medians of each, timed in turn, so that load on the machine
    falls on both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        times[0].append(median_us(first))
        times[1].append(median_us(second))
    return min(times[0]), min(times[1])


def _pte(quantized) -> bytes:
    from backend_spec.lower import xnnpack

    exported = torch.export.export(quantized.converted, quantized.inputs)
    return bytes(xnnpack.lower_program(exported)[0].to_executorch().buffer)


def budget(target: str) -> None:
    start = time.perf_counter()
    report = lower_check(str(SPECS[target]), target)
    seconds = time.perf_counter() - start
    if report.failed:
        sys.exit(f"check --lower {target} failed on the zoo: the benchmark is broken")
    limit = BUDGET_SECONDS[target]
    ratio(f"check --lower {target} on the zoo", seconds / limit, f"the {limit:g} s budget", 1.0)


def main() -> int:
    targets = args() or ["xnnpack", "inductor"]
    for target in targets:
        try:
            require(target)
        except LoweringMissing as exc:
            print(f"{target}: skipped ({exc})")
            continue
        if QUICK:
            compare(target, ["tutorial_net"])
            break
        compare(target, default_models())
        budget(target)
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
