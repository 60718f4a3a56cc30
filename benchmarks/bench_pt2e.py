"""pt2e figures, as ratios measured inside one process.

* building the quantizer of ``specs/x86.yaml``, cached (the packaged ATen table of this torch
  minor version, the normal case) against ``import torch``, and cold (every op traced with
  torch.export, as on a first run under a torch without a table) against cached;
* annotate + ``prepare_pt2e`` with that quantizer on a ResNet-18-shaped model against
  ``prepare_fx`` with ``backend_spec.qconfig_mapping`` on the same model. Budget (issue 13):
  prepare_pt2e is no slower than prepare_fx (ratio <= 1);
* ``prepare_pt2e`` with the port ``specs/x86_inductor.yaml`` against the hand-written
  ``X86InductorQuantizer`` it reproduces, on the residual parity net (printed, not budgeted).

Run: ``.venv/bin/python benchmarks/bench_pt2e.py [--no-cold] [--quick] [--strict]``
(``make bench``; ``--quick``: the tutorial spec and model, no cold build). See ``_bench.py``.
"""

from __future__ import annotations

import time

start = time.perf_counter()
import torch  # noqa: E402  (timed: the yardstick)

IMPORT_TORCH = time.perf_counter() - start

import copy  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from _bench import QUICK, args, best, exit_code, ratio  # noqa: E402

import backend_spec  # noqa: E402
from backend_spec._torch import quiet  # noqa: E402
from backend_spec.pt2e import aten, nets, rules  # noqa: E402
from backend_spec.pt2e.parity_nets import PARITY_NETS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "specs" / ("tutorial.yaml" if QUICK else "x86.yaml")


def _clear_trace_caches() -> None:
    for cached in (aten._packaged, aten._disk_cache, aten._traced, aten.called_fuser):
        cached.cache_clear()


def build_times(cold: bool) -> None:
    bc = backend_spec.load(SPEC)
    rules.compile_table(bc)  # warm imports
    cached = best(lambda: rules.compile_table(bc), 2 if QUICK else 5)
    ratio(
        f"quantizer build of {SPEC.name}, cached ATen table", cached / IMPORT_TORCH, "import torch"
    )
    if not cold:
        return
    packaged = aten._packaged
    with tempfile.TemporaryDirectory() as cache:
        os.environ["BESPEC_CACHE_DIR"] = cache  # an empty trace cache
        aten._packaged = lambda: {}  # no table for this torch
        _clear_trace_caches()
        try:
            t0 = time.perf_counter()
            rules.compile_table(bc)
            traced = time.perf_counter() - t0
        finally:
            aten._packaged = packaged
            del os.environ["BESPEC_CACHE_DIR"]
            _clear_trace_caches()
    ratio("quantizer build, cold (trace every op)", traced / cached, "the cached build")


def prepare_times() -> None:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    with quiet():
        from torch.ao.quantization.quantize_fx import prepare_fx

    model, inputs = nets.tutorial_net() if QUICK else nets.resnet18_net()
    bc = backend_spec.load(SPEC)
    qmap = backend_spec.qconfig_mapping(bc)
    quantizer = backend_spec.quantizer(SPEC)
    repeat = 1 if QUICK else 3

    def fx() -> None:
        with quiet():
            prepare_fx(copy.deepcopy(model), qmap, inputs, backend_config=bc)

    def exported():
        with quiet():
            return torch.export.export(copy.deepcopy(model), inputs).module()

    graphs = [exported() for _ in range(repeat + 1)]

    def pt2e() -> None:
        with quiet():
            prepare_pt2e(graphs.pop(), quantizer)

    fresh = exported()
    annotate = best(lambda: quantizer.annotate(fresh), 1)
    t_fx, t_pt2e = best(fx, repeat), best(pt2e, repeat)
    ratio("annotate", annotate / t_fx, "prepare_fx")
    ratio("prepare_pt2e (annotate included)", t_pt2e / t_fx, "prepare_fx", budget=1.0)


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
    ratio(
        "prepare_pt2e with specs/x86_inductor.yaml (quantizer build included)",
        t_spec / t_hand,
        "X86InductorQuantizer",
    )


def main() -> int:
    build_times(cold="--no-cold" not in args() and not QUICK)
    prepare_times()
    if not QUICK:
        port_ratio()
    return exit_code()


if __name__ == "__main__":
    sys.exit(main())
