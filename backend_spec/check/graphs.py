"""Reading torch.fx graphs of prepared and reference-quantized models.

Reference models (``convert_to_reference_fx``) make quantization explicit: a quantized op sits
between ``dequantize`` of its quantized inputs and ``quantize_per_tensor`` of its output, and
weighted modules become reference quantized modules. These helpers locate a pattern's nodes and
read those dtypes, for both the per-pattern verification and the model report.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend_spec._torch import quiet, torch
from backend_spec.names.dtypes import dtype_name

with quiet():
    from torch.ao.quantization.fx.utils import _is_activation_post_process
    from torch.fx import GraphModule, Node

_REFERENCE_PACKAGE = "torch.ao.nn.quantized.reference"


def matches(node: Node, op: Any, modules: dict[str, torch.nn.Module]) -> bool:
    """Whether ``node`` calls ``op`` (a module class, a function or a method name)."""
    if node.op == "call_module":
        return isinstance(op, type) and type(modules.get(str(node.target))) is op
    if node.op == "call_method":
        return isinstance(op, str) and node.target == op
    if node.op == "call_function":
        return node.target is op
    return False


def find(gm: GraphModule, op: Any) -> list[Node]:
    """Nodes of ``gm`` calling ``op``, in graph order."""
    modules = dict(gm.named_modules(remove_duplicate=False))
    return [node for node in gm.graph.nodes if matches(node, op, modules)]


def find_ref(gm: GraphModule, kind: str, target: Any) -> list[Node]:
    """Nodes of ``gm`` with op ``kind`` and ``target`` (a submodule name, function or method
    name), in graph order."""
    if kind == "call_function":
        return [n for n in gm.graph.nodes if n.op == kind and n.target is target]
    return [n for n in gm.graph.nodes if n.op == kind and n.target == target]


def is_observer(node: Any, modules: dict[str, torch.nn.Module]) -> bool:
    return (
        isinstance(node, Node)
        and node.op == "call_module"
        and _is_activation_post_process(modules.get(str(node.target)))
    )


def tensor_args(node: Node) -> Iterator[Node]:
    """The Node arguments of ``node``, lists flattened (``cat([x, y])``)."""
    for arg in (*node.args, *node.kwargs.values()):
        if isinstance(arg, (list, tuple)):
            yield from (a for a in arg if isinstance(a, Node))
        elif isinstance(arg, Node):
            yield arg


def is_dequantize(node: Node) -> bool:
    return (node.op == "call_method" and node.target == "dequantize") or (
        node.op == "call_function" and node.target is torch.dequantize
    )


def quantize_kind(node: Node) -> tuple[str, torch.dtype] | None:
    """``("static"|"dynamic"|"cast", dtype)`` for a quantize (or fp16 cast) node, else ``None``."""
    if node.op == "call_function":
        if node.target is torch.quantize_per_tensor:
            return "static", _arg(node, 3, "dtype")
        if node.target is torch.quantize_per_channel:
            return "static", _arg(node, 4, "dtype")
        if node.target is torch.quantize_per_tensor_dynamic:
            return "dynamic", _arg(node, 1, "dtype")
    if node.op == "call_method" and node.target == "to":
        dtype = _arg(node, 1, "dtype")
        if isinstance(dtype, torch.dtype) and dtype != torch.float32:
            return "cast", dtype
    return None


def _arg(node: Node, index: int, name: str) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name)


def input_quantization(node: Node) -> tuple[str, torch.dtype] | None:
    """How the activation inputs of ``node`` were quantized in a reference graph, if at all."""
    for arg in tensor_args(node):
        if arg.op == "get_attr":
            continue  # a weight or bias
        source = arg.args[0] if is_dequantize(arg) and arg.args else arg
        if isinstance(source, Node):
            kind = quantize_kind(source)
            if kind is not None:
                return kind
    return None


def output_quantization(node: Node) -> tuple[str, torch.dtype] | None:
    """How the output of ``node`` is quantized in a reference graph, if at all."""
    for user in node.users:
        kind = quantize_kind(user)
        if kind is not None:
            return kind
        if user.op == "call_function" and user.target.__name__ == "getitem":
            kind = output_quantization(user)
            if kind is not None:
                return kind
    return None


def reference_module(gm: GraphModule, node: Node) -> torch.nn.Module | None:
    """The reference quantized module called by ``node`` (inside a fused module too)."""
    if node.op != "call_module":
        return None
    module = gm.get_submodule(str(node.target))
    for candidate in (module, *module.children()):
        if type(candidate).__module__.startswith(_REFERENCE_PACKAGE):
            return candidate
    return None


def node_kind(gm: GraphModule, node: Node) -> str:
    """A node's quantized kind in a reference graph: ``static quint8``, ``dynamic quint8``,
    ``fp16``, ``weight-only quint8`` or ``fp32``."""
    incoming = input_quantization(node)
    ref = reference_module(gm, node)
    if incoming is not None:
        mode, dtype = incoming
        if mode == "cast" or dtype in (torch.float16, torch.bfloat16):
            return dtype_name(dtype) if dtype != torch.float16 else "fp16"
        return f"{mode} {dtype_name(dtype)}"
    if ref is not None:
        weight = getattr(ref, "weight_dtype", None)
        return f"weight-only {dtype_name(weight) if weight is not None else '?'}"
    return "fp32"
