"""pt2e figures, as ratios and times measured inside one process.

* building the quantizer of ``specs/x86.yaml``: cold (every op traced with torch.export, as
  under a torch version the packaged ATen table was not made for) and cached (the packaged
  table, the normal case);
* annotate + ``prepare_pt2e`` with that quantizer on a ResNet-18-shaped model against
  ``prepare_fx`` with ``backend_spec.qconfig_mapping`` on the same model. Budget (issue 13):
  prepare_pt2e is no slower than prepare_fx (ratio <= 1);
* ``prepare_pt2e`` with the port ``specs/x86_inductor.yaml`` against the hand-written
  ``X86InductorQuantizer`` it reproduces, on the residual parity net (printed, not budgeted).

Run: ``.venv/bin/python benchmarks/bench_pt2e.py [--no-cold]`` (``make bench``). Exits 1 if over
budget.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path

import backend_spec
from backend_spec._torch import quiet, torch
from backend_spec.pt2e import aten, nets, rules
from backend_spec.pt2e.parity_nets import PARITY_NETS

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / "x86.yaml"


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def build_times(cold: bool) -> None:
    bc = backend_spec.load(SPEC)
    rules.compile_table(bc)  # warm imports
    if cold:
        saved = aten.TABLE_PATH
        aten.TABLE_PATH = Path("/nonexistent/aten_table.json")
        for cached in (aten._packaged, aten._traced, aten.called_fuser):
            cached.cache_clear()
        t0 = time.perf_counter()
        rules.compile_table(bc)
        print(f"quantizer build, cold (trace every op): {time.perf_counter() - t0:.2f} s")
        aten.TABLE_PATH = saved
        aten._packaged.cache_clear()
    cached = best(lambda: rules.compile_table(bc), 5)
    print(f"quantizer build, cached ATen table: {cached * 1000:.0f} ms")


def prepare_times() -> float:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    with quiet():
        from torch.ao.quantization.quantize_fx import prepare_fx

    model, inputs = nets.resnet18_net()
    bc = backend_spec.load(SPEC)
    qmap = backend_spec.qconfig_mapping(bc)
    quantizer = backend_spec.quantizer(SPEC)

    def fx() -> None:
        with quiet():
            prepare_fx(copy.deepcopy(model), qmap, inputs, backend_config=bc)

    def exported():
        with quiet():
            return torch.export.export(copy.deepcopy(model), inputs).module()

    graphs = [exported() for _ in range(4)]

    def pt2e() -> None:
        with quiet():
            prepare_pt2e(graphs.pop(), quantizer)

    fresh = exported()
    annotate = best(lambda: quantizer.annotate(fresh), 1)
    t_fx, t_pt2e = best(fx, 3), best(pt2e, 3)
    print(f"annotate: {annotate * 1000:.1f} ms")
    print(
        f"prepare_fx: {t_fx * 1000:.0f} ms; prepare_pt2e (annotate included): "
        f"{t_pt2e * 1000:.0f} ms; ratio {t_pt2e / t_fx:.2f} (budget <= 1)"
    )
    return t_pt2e / t_fx


def port_ratio() -> None:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer,
        get_default_x86_inductor_quantization_config,
    )

    # The residual parity net: X86InductorQuantizer refuses the ResNet net (a ReLU module
    # called twice per block).
    model, inputs = PARITY_NETS["residual"]()
    with quiet():
        graphs = [torch.export.export(copy.deepcopy(model), inputs).module() for _ in range(6)]
    port = ROOT / "specs" / "x86_inductor.yaml"

    def spec() -> None:
        with quiet():
            prepare_pt2e(graphs.pop(), backend_spec.quantizer(port))

    def hand_written() -> None:
        config = get_default_x86_inductor_quantization_config()
        with quiet():
            prepare_pt2e(graphs.pop(), X86InductorQuantizer().set_global(config))

    t_spec, t_hand = best(spec, 3), best(hand_written, 3)
    print(
        f"prepare_pt2e, X86InductorQuantizer: {t_hand * 1000:.0f} ms; specs/x86_inductor.yaml "
        f"(quantizer build included): {t_spec * 1000:.0f} ms; ratio {t_spec / t_hand:.2f}"
    )


def main() -> int:
    build_times(cold="--no-cold" not in sys.argv)
    ratio = prepare_times()
    port_ratio()
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
