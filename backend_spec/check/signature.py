"""Behaviour signatures: what prepare and convert really produced, as comparable text.

A golden that keeps only SQNR misses most spec edits: a narrowed activation range, a swapped
``input_type_to_index`` or a different observer-sharing rule moves SQNR by less than any useful
tolerance. A signature records the structure instead, exactly and without run-to-run noise
(no scales, no zero points computed from data, no timings):

- ``observers``: every observer or fake-quantize of the prepared model, numbered by *identity*
  (so two nodes sharing one observer show the same number: observer-sharing groups), with its
  dtype, qscheme, quant range, dynamic flag, eps and fixed qparams;
- ``prepared``: the prepared graph, one line per node (modules by class, with their parts and
  weight fake-quantizes; observers by number; arguments by position);
- ``reference``: the reference graph (quantize/dequantize structure with dtypes; which modules
  were swapped for which reference modules and their weight qparams);
- ``lowered``: the op kinds of the lowered model (quantized modules and kernels).

Each section is a list of strings, so a drift names the section (the field that moved) and the
first line that differs.
"""

from __future__ import annotations

from typing import Any

from backend_spec._torch import quiet, torch
from backend_spec.names.dtypes import dtype_name

with quiet():
    from torch.ao.quantization.fx.utils import _is_activation_post_process
    from torch.fx import GraphModule, Node

Signature = dict[str, list[str]]

#: Observer attributes that decide how a tensor is quantized, in report order.
_OBSERVER_FIELDS = ("dtype", "qscheme", "quant_min", "quant_max", "ch_axis", "is_dynamic", "eps")

#: Weight qparams a reference quantized module keeps.
_WEIGHT_FIELDS = ("weight_dtype", "weight_qscheme", "weight_quant_min", "weight_quant_max")

#: Module packages shortened in signatures (longest first); the class name stays exact.
_PACKAGES = (
    ("torch.ao.nn.quantized.reference.modules", "nnqr"),
    ("torch.ao.nn.quantized.dynamic.modules", "nnqd"),
    ("torch.ao.nn.quantized.modules", "nnq"),
    ("torch.ao.nn.intrinsic.quantized.dynamic.modules", "nniqd"),
    ("torch.ao.nn.intrinsic.quantized.modules", "nniq"),
    ("torch.ao.nn.intrinsic.qat.modules", "nniqat"),
    ("torch.ao.nn.intrinsic.modules", "nni"),
    ("torch.ao.nn.qat.modules", "nnqat"),
    ("torch.ao.quantization", "tq"),
    ("torch.nn.modules", "nn"),
)


def class_name(cls: type) -> str:
    """``nnqr.Conv2d``, ``nni.ConvReLU2d``, ``nn.Linear``; other classes fully qualified."""
    module = cls.__module__
    for package, short in _PACKAGES:
        if module.startswith(package):
            return f"{short}.{cls.__qualname__}"
    return f"{module}.{cls.__qualname__}"


def _value(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, torch.qscheme):
        return str(value).removeprefix("torch.")
    if isinstance(value, torch.Tensor):
        if value.numel() == 1:
            return _value(value.item())
        return repr(value.tolist()) if value.numel() <= 4 else f"tensor{tuple(value.shape)}"
    if isinstance(value, float):
        return f"{value:.9g}"
    return repr(value)


def describe_observer(module: torch.nn.Module) -> str:
    """Class and quantization parameters of an observer or fake-quantize (fixed qparams too)."""
    inner = getattr(module, "activation_post_process", None)
    fields = []
    for name in _OBSERVER_FIELDS:
        value = getattr(module, name, getattr(inner, name, None))
        if value is not None and not isinstance(value, torch.nn.Module):
            fields.append(f"{name}={_value(value)}")
    if "FixedQParams" in type(module).__name__ or "FixedQParams" in type(inner).__name__:
        holder = module if hasattr(module, "scale") else inner
        fields.append(f"scale={_value(holder.scale)}")
        fields.append(f"zero_point={_value(holder.zero_point)}")
    return f"{class_name(type(module))}({', '.join(fields)})"


def describe_module(module: torch.nn.Module) -> str:
    """Class, weight qparams (reference modules), weight fake-quantize (QAT) and parts (fused)."""
    text = class_name(type(module))
    extras = [
        f"{name}={_value(getattr(module, name))}"
        for name in _WEIGHT_FIELDS
        if getattr(module, name, None) is not None
    ]
    weight_fq = getattr(module, "weight_fake_quant", None)
    if weight_fq is not None:
        extras.append(f"weight_fake_quant={describe_observer(weight_fq)}")
    if isinstance(module, torch.nn.Sequential):
        extras.append("[" + ", ".join(describe_module(child) for child in module) + "]")
    return f"{text}({', '.join(extras)})" if extras else text


def _target(node: Node, modules: dict[str, torch.nn.Module], observers: dict[int, int]) -> str:
    if node.op == "call_module":
        module = modules.get(str(node.target))
        if module is None:
            return f"module {node.target}"
        if _is_activation_post_process(module):
            return f"observe obs{observers.setdefault(id(module), len(observers))}"
        return describe_module(module)
    if node.op == "call_method":
        return f"method {node.target}"
    if node.op == "call_function":
        return function_name(node.target)
    return node.op


def function_name(target: Any) -> str:
    """``torch.quantize_per_tensor``, ``operator.add``, ``torch.ops.quantized.add``..."""
    name = getattr(target, "__name__", None)
    if isinstance(name, str) and getattr(torch, name, None) is target:
        return f"torch.{name}"
    if name is None or isinstance(target, torch._ops.OpOverloadPacket):
        return str(target)
    module = (getattr(target, "__module__", None) or "").lstrip("_")
    return f"{module}.{name}" if module else name


def _arg(value: Any, names: dict[Node, str]) -> str:
    if isinstance(value, Node):
        return names.get(value, "?")
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_arg(v, names) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_arg(v, names)}" for k, v in value.items()) + "}"
    return _value(value)


def graph_lines(gm: GraphModule, observers: dict[int, int] | None = None) -> list[str]:
    """One line per node: ``%n3 = <target>(%n1, attr, 1)``. Attributes (weights, scales and
    zero points) are ``attr``: their values come from data, not from the spec."""
    modules = dict(gm.named_modules(remove_duplicate=False))
    observers = {} if observers is None else observers
    names: dict[Node, str] = {}
    lines: list[str] = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            names[node] = "attr"
            continue
        names[node] = f"%{len(lines)}"
        args = [_arg(a, names) for a in node.args]
        args += [f"{k}={_arg(v, names)}" for k, v in node.kwargs.items()]
        if node.op in ("placeholder", "output"):
            lines.append(f"{names[node]} = {node.op}({', '.join(args)})")
            continue
        lines.append(f"{names[node]} = {_target(node, modules, observers)}({', '.join(args)})")
    return lines


def observer_lines(gm: GraphModule, observers: dict[int, int]) -> list[str]:
    """``obsN: description`` for every observer numbered while rendering ``gm``."""
    by_id = {id(m): m for m in gm.modules()}
    return [f"obs{index}: {describe_observer(by_id[key])}" for key, index in observers.items()]


def lowered_kinds(gm: GraphModule) -> list[str]:
    """The op kinds of a lowered model, in graph order (no placeholders, attributes, output)."""
    modules = dict(gm.named_modules(remove_duplicate=False))
    kinds = []
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_function", "call_method"):
            kinds.append(_target(node, modules, {}))
    return kinds


def prepared_signature(prepared: GraphModule) -> Signature:
    """The ``observers`` and ``prepared`` sections (before convert_fx, which consumes it)."""
    observers: dict[int, int] = {}
    lines = graph_lines(prepared, observers)
    return {"observers": observer_lines(prepared, observers), "prepared": lines}


def converted_signature(reference: GraphModule, lowered: Any) -> Signature:
    """The ``reference`` and ``lowered`` sections (``lowered`` may be absent: no kernels)."""
    result: Signature = {"reference": graph_lines(reference)}
    if isinstance(lowered, GraphModule):
        result["lowered"] = lowered_kinds(lowered)
    return result


def first_difference(before: list[str], after: list[str]) -> str:
    """The first line that differs between two versions of a section, for a drift message."""
    for old, new in zip(before, after, strict=False):
        if old != new:
            return f"{old!r} -> {new!r}"
    if len(before) != len(after):
        longer, sign = (after, "+") if len(after) > len(before) else (before, "-")
        return f"{sign}{longer[min(len(before), len(after))]!r}"
    return "reordered"
