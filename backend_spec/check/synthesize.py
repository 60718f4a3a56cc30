"""Pattern -> the smallest model that contains it.

A BackendPatternConfig names ops (module classes, functions, method names) but not how to call
them. This module knows, per op family, sensible constructor arguments and call arguments, and
strings the ops of a pattern into a :class:`Chain` module that torch.fx can trace:
``x -> op1 -> op2 -> op3``. Binary ops (``add``, ``mul``, ``cat``, ``matmul``) take a second model
input. Anything without a recipe raises :class:`SkipPattern` with the reason, so the check reports
it instead of passing it silently.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendPatternConfig, quiet, torch
from backend_spec.analysis.qconfigs import pattern_ops
from backend_spec.compiler.samples import (
    LAYOUTS,
    VOCAB,
    SkipPattern,
    float_module,
    module_layout,
    name_layout,
)
from backend_spec.names.fused import FUSED_PARTS

nn = torch.nn
F = torch.nn.functional

with quiet():
    import torch.ao.nn.intrinsic as nni
    from torch.ao.quantization.utils import MatchAllNode

#: How many calibration batches prepare's observers see.
CALIBRATION_BATCHES = 4


#: A step of a chain: ``step(chain, x, inputs) -> output``.
Step = Callable[[nn.Module, Any, tuple], Any]


class Chain(nn.Module):
    """Runs its steps in order on the first input; steps may read the other inputs."""

    def __init__(self) -> None:
        super().__init__()
        self._steps: list[Step] = []
        self._count = 0

    def add_module_step(
        self, module: nn.Module, select_first: bool = False, extra: tuple[int, ...] = ()
    ) -> str:
        """Call ``module`` on the running value, plus the model inputs numbered ``extra``."""
        name = self.fresh("op")
        self.add_module(name, module)

        def step(chain: nn.Module, x: Any, inputs: tuple) -> Any:
            out = getattr(chain, name)(x, *(inputs[i] for i in extra))
            return out[0] if select_first else out

        self._steps.append(step)
        return name

    def add_param(self, tensor: torch.Tensor) -> str:
        name = self.fresh("w")
        self.register_parameter(name, nn.Parameter(tensor, requires_grad=False))
        return name

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def forward(self, *inputs: Any) -> Any:
        x = inputs[0]
        for step in self._steps:
            x = step(self, x, inputs)
        return x


@dataclass
class Synthesized:
    """A model for one pattern, its inputs, and the ops to look for in its graphs."""

    model: nn.Module
    example_inputs: tuple
    calibration: list[tuple]
    #: Where each op of the pattern lives in the model, in forward order. Fusion may fold later
    #: ops into the first one's module, so the checker looks them up by these, not by type.
    ops: list[OpRef]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OpRef:
    """A graph node to look for: ``call_module`` of a submodule name, ``call_function`` of a
    function or ``call_method`` of a method name."""

    kind: str
    target: Any


@dataclass
class _Builder:
    chain: Chain
    inputs: list[torch.Tensor]
    make_input: Callable[[str], torch.Tensor]
    qconfig: Any
    #: Fused module class -> (its float parts, the spec's fuser method), from the spec itself.
    fusers: dict[type, tuple[tuple[type, ...], Any]] = field(default_factory=dict)
    refs: list[OpRef] = field(default_factory=list)


def synthesize(
    config: BackendPatternConfig,
    *,
    qconfig: Any = None,
    input_range: tuple[float, float] | None = None,
    seed: int = 0,
    backend_config: Any = None,
) -> Synthesized:
    """A minimal eval-mode model containing ``config``'s pattern.

    ``qconfig`` is needed only by QAT module patterns (QAT modules are built from float ones
    with a QConfig). ``input_range`` draws inputs uniformly from that range instead of a normal
    distribution: fixed-qparams ops quantize their inputs with the fixed scale too, so inputs
    outside its range would be clipped and say nothing about the op. ``backend_config`` lends
    its fuser methods to build fused modules bespec has no recipe for.
    """
    chain = chain_ops(config)
    ops = [op for op, _ in chain]
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)

    def make_input(layout: str) -> torch.Tensor:
        shape = LAYOUTS[layout]
        if layout == "tokens":
            return torch.randint(0, VOCAB, shape, generator=gen)
        if input_range is not None:
            lo, hi = input_range
            return torch.rand(shape, generator=gen) * (hi - lo) + lo
        return torch.randn(shape, generator=gen)

    layout = _layout_of(ops[0]) or "2d"
    builder = _Builder(
        Chain(), [make_input(layout)], make_input, qconfig, spec_fusers(backend_config)
    )
    with quiet():
        sample = builder.inputs[0]
        for op, position in chain:
            sample = _add_op(builder, op, sample, position)
    model = builder.chain.eval()
    example_inputs = tuple(builder.inputs)
    calibration = [example_inputs] + [
        tuple(_like(t, make_input) for t in example_inputs) for _ in range(CALIBRATION_BATCHES - 1)
    ]
    return Synthesized(model, example_inputs, calibration, builder.refs)


def _like(tensor: torch.Tensor, make_input: Callable[[str], torch.Tensor]) -> torch.Tensor:
    """Another batch with the same shape and distribution as ``tensor``."""
    for layout, shape in LAYOUTS.items():
        if tuple(tensor.shape) == shape and (tensor.dtype == torch.long) == (layout == "tokens"):
            return make_input(layout)
    return tensor.clone()


def _layout_of(op: Any) -> str | None:
    """The input layout an op needs, or ``None`` if it takes any tensor."""
    if isinstance(op, type) and issubclass(op, nn.Module):
        layout = module_layout(op)
        if layout is not None:
            return layout
        float_cls = _float_counterpart(op)
        if float_cls is not None:
            return _layout_of(float_cls)
        if issubclass(op, nni._FusedModule):
            return _layout_of(FUSED_PARTS.get(op, (None,))[0])
    return name_layout(op if isinstance(op, str) else _fn_name(op))


def chain_ops(config: BackendPatternConfig) -> list[tuple[Any, int]]:
    """The ops of a pattern in forward order, each with the argument position the previous op's
    output takes (``0`` but for the legacy complex format: ``(add, MatchAllNode, conv)`` adds
    the conv's output as the *second* operand)."""
    if config.pattern is not None:
        return [(op, 0) for op in pattern_ops(config)]
    chain: list[tuple[Any, int]] = []

    def walk(node: Any, position: int) -> None:
        if not isinstance(node, tuple):
            chain.append((node, position))
            return
        args = node[1:]
        inner = [i for i, arg in enumerate(args) if arg is not MatchAllNode]
        if len(inner) > 1:
            raise SkipPattern("complex-format pattern with more than one nested branch")
        if inner:
            walk(args[inner[0]], 0)
        chain.append((node[0], inner[0] if inner else 0))

    walk(config._pattern_complex_format, 0)
    return chain


def spec_fusers(backend_config: Any) -> dict[type, tuple[tuple[type, ...], Any]]:
    """Fused module class -> (float module parts, fuser method), for the spec's module-only
    fusion patterns: bespec builds custom fused modules the way the spec itself does."""
    fusers: dict[type, tuple[tuple[type, ...], Any]] = {}
    for config in getattr(backend_config, "configs", ()):
        ops = pattern_ops(config) if config.pattern is not None else []
        if config.fused_module is None or config.fuser_method is None or len(ops) < 2:
            continue
        if all(isinstance(op, type) and issubclass(op, nn.Module) for op in ops):
            fusers.setdefault(config.fused_module, (tuple(ops), config.fuser_method))
    return fusers


def _add_op(builder: _Builder, op: Any, sample: Any, position: int = 0) -> Any:
    """Append ``op`` to the chain and return its output on ``sample``; ``position`` is where the
    running value goes among a binary op's operands."""
    if isinstance(op, str):
        step = _method_step(op, sample)
        builder.refs.append(OpRef("call_method", op))
    elif isinstance(op, type) and issubclass(op, nn.Module):
        module, select_first = _module_for(op, sample, builder)
        count = _extra_tensor_args(module)
        like = _extra_input_like(module, sample) if count else sample
        extra = tuple(_second_input(builder, like) for _ in range(count))
        name = builder.chain.add_module_step(module, select_first, extra)
        builder.refs.append(OpRef("call_module", name))
        return _run_last(builder, sample)
    else:
        step = _function_step(op, sample, builder, position)
        builder.refs.append(OpRef("call_function", op))
    builder.chain._steps.append(step)
    return _run_last(builder, sample)


def _run_last(builder: _Builder, sample: Any) -> Any:
    """Run the newest step on the sample so the next op sees the real shape."""
    step = builder.chain._steps[-1]
    try:
        with torch.no_grad():
            out = step(builder.chain, sample.clone(), tuple(builder.inputs))
    except Exception as exc:  # an op that rejects the synthesized arguments
        raise SkipPattern(f"synthesized call failed in float: {type(exc).__name__}: {exc}") from exc
    if isinstance(out, torch.Tensor) and not out.is_floating_point() and out.dtype != torch.long:
        raise SkipPattern(f"op produced a {out.dtype} tensor")
    return out


# --- module classes -------------------------------------------------------------------------


def _extra_input_like(module: nn.Module, sample: torch.Tensor) -> torch.Tensor:
    """What a module's further inputs look like: its first part's output for fused modules
    (``ConvAdd2d`` adds the conv's output to its second input), else its first input."""
    if isinstance(module, nn.Sequential) and len(module) and isinstance(module[0], nn.Module):
        with torch.no_grad():
            return module[0](sample)
    return sample


def _extra_tensor_args(module: nn.Module) -> int:
    """How many inputs beyond the first a module's ``forward`` requires (custom 2-input ops,
    ``nni.ConvAdd2d``)."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return 0
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.kind in positional and p.default is p.empty]
    return max(0, len(required) - 1)


def _module_for(cls: type, sample: Any, builder: _Builder) -> tuple[nn.Module, bool]:
    """An eval-mode instance of ``cls`` that takes ``sample``; also whether its output is a tuple
    whose first element carries on (RNNs, LSTMCell)."""
    float_cls = _float_counterpart(cls)
    if float_cls is not None:
        return _qat_module(cls, float_cls, sample, builder), False
    if cls in builder.fusers or issubclass(cls, nni._FusedModule):
        return _fused_module(cls, sample, builder), False
    module = float_module(cls, sample)
    select_first = isinstance(module, (nn.RNNBase, nn.LSTMCell))
    return module.eval(), select_first


def _float_counterpart(cls: type) -> type | None:
    """The float module a QAT module is made from (``nniqat.LinearBn1d`` -> ``nni.LinearBn1d``)."""
    if not hasattr(cls, "from_float"):
        return None
    counterpart = getattr(cls, "_FLOAT_MODULE", None)
    if isinstance(counterpart, type) and counterpart is not cls:
        return counterpart
    package = {"torch.ao.nn.intrinsic.qat": nni, "torch.ao.nn.qat": nn}
    for prefix, namespace in package.items():
        if cls.__module__.startswith(prefix):
            candidate = getattr(namespace, cls.__name__, None)
            return candidate if isinstance(candidate, type) and candidate is not cls else None
    return None


def _qat_module(cls: type, float_cls: type, sample: Any, builder: _Builder) -> nn.Module:
    """QAT modules are built the way prepare_qat builds them: ``from_float`` of a float module."""
    qconfig = builder.qconfig
    if qconfig is None:
        raise SkipPattern(f"QAT module {cls.__name__} needs a QConfig and none was chosen")
    float_instance, _ = _module_for(float_cls, sample, builder)
    for module in float_instance.modules():  # fused modules read their parts' qconfig too
        module.qconfig = qconfig
    try:
        return cls.from_float(float_instance).eval()
    except Exception as exc:
        raise SkipPattern(f"cannot build QAT module {cls.__name__}: {exc}") from exc


def _fused_module(cls: type, sample: Any, builder: _Builder) -> nn.Module:
    """torch's fused modules from their parts; others through the spec's own fuser method."""
    parts, fuser = FUSED_PARTS.get(cls), None
    if parts is None and cls in builder.fusers:
        parts, fuser = builder.fusers[cls]
    if parts is None:
        raise SkipPattern(f"no recipe for the parts of fused module {cls.__name__}")
    modules: list[Any] = []
    for part in parts:
        if not isinstance(part, type):  # a function part (ConvAdd2d's add) keeps the shape
            modules.append(part)
            continue
        module = float_module(part, sample).eval()
        with torch.no_grad():
            sample = module(sample)
        modules.append(module)
    if fuser is None:
        return cls(*modules).eval()
    try:
        fused = fuser(False, *modules)
    except Exception as exc:
        raise SkipPattern(f"the spec's fuser for {cls.__name__} failed: {exc}") from exc
    if type(fused) is not cls:
        raise SkipPattern(f"the spec's fuser builds {type(fused).__name__}, not {cls.__name__}")
    return fused.eval()


# --- methods --------------------------------------------------------------------------------


def _method_args(name: str, x: torch.Tensor) -> tuple | None:
    """Arguments for ``x.<name>(...)``; ``None`` when bespec has no recipe."""
    n = x.dim()
    table: dict[str, tuple] = {
        "view": (x.shape[0], -1),
        "reshape": (x.shape[0], -1),
        "flatten": (1,),
        "clamp": (-1.0, 1.0),
        "mean": (1,),
        "permute": tuple(reversed(range(n))),
        "repeat": (1, 2) + (1,) * (n - 2),
        "repeat_interleave": (2, 1),
        "resize_": tuple(x.shape),
        "transpose": (0, 1),
        "unsqueeze": (0,),
        "unsqueeze_": (0,),
        "size": (1,),
        "chunk": (2, 1),
        "split": (2, 1),
        "narrow": (1, 0, 2),
        "to": (torch.float32,),
        "type": (torch.float32,),
    }
    no_args = [
        "contiguous",
        "detach",
        "detach_",
        "relu",
        "relu_",
        "sigmoid",
        "sigmoid_",
        "tanh",
        "tanh_",
        "hardsigmoid",
        "hardsigmoid_",
        "squeeze",
        "squeeze_",
        "float",
        "dequantize",
        "sum",
        "abs",
        "neg",
        "exp",
    ]
    if name in table:
        return table[name]
    if name in no_args:
        return ()
    return None


def _method_step(name: str, sample: Any) -> Step:
    if name == "shape":
        raise SkipPattern("`x.shape` traces as getattr(x, 'shape'), never as a call_method node")
    if not isinstance(sample, torch.Tensor):
        raise SkipPattern(f"method {name!r} follows an op without a tensor output")
    args = _method_args(name, sample)
    if args is None:
        raise SkipPattern(f"no recipe for the arguments of Tensor.{name}")

    def step(chain: nn.Module, x: Any, inputs: tuple) -> Any:
        return getattr(x, name)(*args)

    return step


# --- functions ------------------------------------------------------------------------------


def _function_step(fn: Any, sample: Any, builder: _Builder, position: int = 0) -> Step:
    """A step calling ``fn``; weighted functionals get their weights as chain parameters."""
    if not isinstance(sample, torch.Tensor):
        raise SkipPattern(f"{_fn_name(fn)} follows an op without a tensor output")
    maker = _FUNCTION_RECIPES.get(fn) or _FUNCTION_RECIPES_BY_NAME.get(_fn_name(fn))
    if maker is None:
        raise SkipPattern(f"no recipe for calling {_fn_name(fn)}")
    if position == 1 and maker in (_binary, _operator_binary):
        index = _second_input(builder, sample)
        return lambda chain, x, inputs: fn(inputs[index], x)
    return maker(fn, sample, builder)


def _fn_name(fn: Any) -> str:
    """A function's name; torch's boolean_dispatch wrappers (``F.max_pool2d``) are all named
    ``fn``, so they are looked up by identity."""
    return _DISPATCH_NAMES.get(fn) or getattr(fn, "__name__", repr(fn))


_DISPATCH_NAMES: dict[Any, str] = {
    F.max_pool1d: "max_pool1d",
    F.max_pool2d: "max_pool2d",
    F.max_pool3d: "max_pool3d",
    F.adaptive_max_pool1d: "adaptive_max_pool1d",
    F.adaptive_max_pool2d: "adaptive_max_pool2d",
    F.adaptive_max_pool3d: "adaptive_max_pool3d",
}


def _second_input(builder: _Builder, like: torch.Tensor) -> int:
    """Add a model input shaped like ``like``; returns its index in ``inputs``."""
    other = torch.randn(like.shape, generator=torch.Generator().manual_seed(7))
    builder.inputs.append(other)
    return len(builder.inputs) - 1


def _unary(*args: Any, **kwargs: Any):
    def maker(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
        return lambda chain, x, inputs: fn(x, *args, **kwargs)

    return maker


def _binary(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
    index = _second_input(builder, sample)
    return lambda chain, x, inputs: fn(x, inputs[index])


def _operator_binary(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
    # ``operator.add`` must appear as ``x + y`` in the traced graph, which it does when called.
    return _binary(fn, sample, builder)


def _listed(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
    index = _second_input(builder, sample)
    return lambda chain, x, inputs: fn([x, inputs[index]], 1)


def _matmul(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
    other = torch.randn(sample.shape[-1], 8, generator=torch.Generator().manual_seed(7))
    builder.inputs.append(other)
    index = len(builder.inputs) - 1
    return lambda chain, x, inputs: fn(x, inputs[index])


def _conv(transpose: bool):
    def maker(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
        dims = sample.dim() - 2
        channels = sample.shape[1]
        kernel = (3,) * dims
        shape = (channels, 8, *kernel) if transpose else (8, channels, *kernel)
        weight = builder.chain.add_param(torch.randn(shape) * 0.2)
        bias = builder.chain.add_param(torch.zeros(8))
        ones, pads = [1] * dims, [1] * dims
        # Lists, not ints: torch's lowering passes them straight to the prepack op. Transposed:
        # (stride, padding, output_padding, groups, dilation); else (stride, padding, dilation,
        # groups).
        extra = (ones, pads, [0] * dims, 1, ones) if transpose else (ones, pads, ones, 1)
        return lambda chain, x, inputs: fn(x, getattr(chain, weight), getattr(chain, bias), *extra)

    return maker


def _linear(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
    weight = builder.chain.add_param(torch.randn(16, sample.shape[-1]) * 0.2)
    bias = builder.chain.add_param(torch.zeros(16))
    return lambda chain, x, inputs: fn(x, getattr(chain, weight), getattr(chain, bias))


def _norm(kind: str):
    def maker(fn: Any, sample: torch.Tensor, builder: _Builder) -> Step:
        size = sample.shape[-1] if kind == "layer" else sample.shape[1]
        weight = builder.chain.add_param(torch.rand(size) + 0.5)
        bias = builder.chain.add_param(torch.randn(size) * 0.1)
        if kind == "layer":
            return lambda chain, x, inputs: fn(
                x, (size,), getattr(chain, weight), getattr(chain, bias)
            )
        if kind == "group":
            return lambda chain, x, inputs: fn(x, 2, getattr(chain, weight), getattr(chain, bias))
        return lambda chain, x, inputs: fn(
            x, None, None, getattr(chain, weight), getattr(chain, bias)
        )

    return maker


_FUNCTION_RECIPES: dict[Any, Callable[[Any, torch.Tensor, _Builder], Step]] = {
    operator.add: _operator_binary,
    operator.mul: _operator_binary,
    operator.floordiv: _unary(2),
    torch.add: _binary,
    torch.mul: _binary,
    torch.matmul: _matmul,
    torch.bmm: _matmul,
    torch.cat: _listed,
    torch.stack: _listed,
    F.linear: _linear,
    F.layer_norm: _norm("layer"),
    F.group_norm: _norm("group"),
    F.instance_norm: _norm("instance"),
    F.interpolate: _unary(scale_factor=2.0, mode="nearest"),
    F.dropout: _unary(training=False),
    torch.clamp: _unary(-1.0, 1.0),
    torch.flatten: _unary(1),
    torch.mean: _unary(1),
    torch.narrow: _unary(1, 0, 2),
    torch.repeat_interleave: _unary(2, 1),
    torch.transpose: _unary(0, 1),
    torch.unsqueeze: _unary(0),
    torch.pixel_shuffle: _unary(2),
    torch.pixel_unshuffle: _unary(2),
    F.softmax: _unary(-1),
}

#: Recipes by function name, for families that share a calling convention.
_FUNCTION_RECIPES_BY_NAME: dict[str, Callable[[Any, torch.Tensor, _Builder], Step]] = {
    **{f"conv{d}d": _conv(transpose=False) for d in (1, 2, 3)},
    **{f"conv_transpose{d}d": _conv(transpose=True) for d in (1, 2, 3)},
    **{f"{kind}_pool{d}d": _unary(2) for kind in ("max", "avg") for d in (1, 2, 3)},
    **{f"adaptive_avg_pool{d}d": _unary(2) for d in (1, 2, 3)},
    **{f"adaptive_max_pool{d}d": _unary(2) for d in (1, 2, 3)},
    **{
        name: _unary()
        for name in [
            "relu",
            "relu_",
            "relu6",
            "elu",
            "hardswish",
            "leaky_relu",
            "hardsigmoid",
            "sigmoid",
            "tanh",
            "hardtanh",
            "hardtanh_",
            "silu",
            "gelu",
            "mish",
            "squeeze",
            "detach",
            "abs",
            "neg",
            "exp",
        ]
    },
}
