"""Why a quantized model failed: the node, and the spec entries that made it so.

``check`` quantizes whole models; when one fails in ``convert_fx`` or at run time, torch's
message names neither the node nor the spec. This module reads the graphs instead:

* the failing node is found by running the converted model node by node (or, for a failure
  inside ``convert_fx``, by the graph node torch was converting when it raised);
* the prepared model says which nodes the spec claims (their QConfig quantizes them, as
  ``target_dtype_info`` records) and which it leaves float, and each claimed op is traced to
  its entry (pattern and spec line);
* the values at the failing node say which inputs arrived quantized and which float.

A failure is the spec's when the failing node is one the spec claims, or when the quantized
tensor that reached an op the spec leaves float was quantized for an entry that joins several
tensors under one shared observer (``torch.cat`` with ``output_share_observer_with_input``:
the spec chose to quantize whatever feeds it with one set of qparams; lint's BS530 warns of
it). It is torch's when the failing node is one the spec leaves float and the quantized
tensor reached it only through other ops the spec leaves float, quantized for an op that
reads it with an observer of its own (a conv must quantize its input to run in int8):
``convert_fx``'s lowering rewrote an unclaimed op to run on quantized tensors (it
matches ``dequantize -> op -> quantize`` without looking at the op's other users), which no
entry asked for. Nothing here depends on the model's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from backend_spec._torch import BackendConfig, quiet, torch
from backend_spec.check import graphs
from backend_spec.ir import Entry
from backend_spec.ir.lower import backend_of
from backend_spec.names.dtypes import dtype_name
from backend_spec.names.labels import object_label

with quiet():
    from torch.fx import GraphModule, Interpreter, Node

#: How far back the origin of a quantized tensor is traced (nodes); bounds the walk.
_MAX_TRACE = 1000


@dataclass(frozen=True)
class Blame:
    """The cause of a failure: ``text`` names the node and the entries; ``torch_limit`` says
    the failure is torch's lowering of ops the spec does not claim, not the spec's."""

    text: str
    torch_limit: bool


class _Claims:
    """Which nodes of a prepared model the spec quantizes, and by which entry."""

    def __init__(self, prepared: GraphModule, backend_config: BackendConfig) -> None:
        self.modules = dict(prepared.named_modules(remove_duplicate=False))
        self.nodes = {node.name: node for node in prepared.graph.nodes}
        self.entries = [e for e in backend_of(backend_config) if e.ops is not None]

    def op(self, name: str) -> Any:
        """The op a prepared node calls (a module class, a function or a method name)."""
        node = self.nodes.get(name)
        if node is None:
            return None
        if node.op == "call_module":
            return type(self.modules.get(str(node.target)))
        return node.target if node.op in ("call_function", "call_method") else None

    def label(self, name: str) -> str:
        op = self.op(name)
        return object_label(op) if op is not None else name

    def dtypes(self, name: str) -> dict[str, torch.dtype]:
        """The non-float dtypes the node's QConfig gave it (``input``, ``weight``,
        ``output``); empty for a node the spec leaves float."""
        node = self.nodes.get(name)
        info = node.meta.get("target_dtype_info", {}) if node is not None else {}
        found = {}
        for role in ("input", "weight", "output"):
            key = f"{role}_act_obs_or_fq_ctr" if role != "weight" else "weight_obs_or_fq_ctr"
            dtype = _ctr_dtype(info.get(key))
            if dtype is not None and dtype != torch.float32:
                found[role] = dtype
        return found

    def claimed(self, name: str) -> bool:
        return bool(self.dtypes(name))

    def entry(self, name: str) -> Entry | None:
        """The entry that quantizes the node's op: its own single-op entry first, else the
        first multi-op entry containing it."""
        op = self.op(name)
        if op is None:
            return None
        with_op = [e for e in self.entries if any(o is op or o == op for o in e.ops or ())]
        with_op.sort(key=lambda e: (len(e.ops or ()) != 1, not e.dtype_configs))
        return with_op[0] if with_op else None

    def shares_across(self, name: str) -> bool:
        """Whether the spec has the node join several tensors under one shared observer
        (``torch.cat`` with ``output_share_observer_with_input``): the spec's choice to
        quantize whatever feeds it with one set of qparams, float ops included."""
        entry = self.entry(name) if self.claimed(name) else None
        observation = entry.get("observation_type") if entry is not None else None
        if getattr(observation, "name", "") != "OUTPUT_SHARE_OBSERVER_WITH_INPUT":
            return False
        inputs = [a for a in graphs.tensor_args(self.nodes[name]) if a.op != "get_attr"]
        return len(inputs) >= 2

    def describe(self, name: str) -> str:
        """``dw (nn.Conv2d, spec line 25)`` or ``mul (operator.mul, no spec entry)``."""
        entry = self.entry(name) if self.claimed(name) else None
        if entry is None:
            return f"{name} ({self.label(name)}, no spec entry quantizes it)"
        return f"{name} ({self.label(name)}, {where(entry)})"


def where(entry: Entry) -> str:
    """``spec line 25`` (``x86 entry`` for an entry of a built-in backend)."""
    origin = entry.origin
    if origin.line:
        return f"spec line {origin.line}"
    return f"{origin.source.removeprefix('torch:')} entry"


def _ctr_dtype(ctr: Any) -> torch.dtype | None:
    """The dtype an observer (or fake-quantize) constructor builds, without calibrating."""
    if ctr is None:
        return None
    keywords = getattr(ctr, "keywords", None) or {}
    if "dtype" in keywords:
        return keywords["dtype"]
    try:
        return getattr(ctr(), "dtype", None)
    except Exception:
        return None


# --- finding the failing node ---------------------------------------------------------------


class _Recorder(Interpreter):
    """Runs a GraphModule node by node, keeping every value and the node that raised."""

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module, garbage_collect_values=False)
        self.failed: Node | None = None

    def run_node(self, n: Node) -> Any:
        try:
            return super().run_node(n)
        except Exception:
            self.failed = n
            raise


def failing_node(model: GraphModule, inputs: tuple) -> tuple[Node | None, dict[Node, Any]]:
    """The node of ``model`` that raises on ``inputs`` (None if it runs), and the values
    computed before it."""
    recorder = _Recorder(model)
    try:
        with torch.no_grad():
            recorder.run(*(t.clone() if isinstance(t, torch.Tensor) else t for t in inputs))
    except Exception:
        pass
    return recorder.failed, recorder.env


def node_in_traceback(tb: TracebackType | None, claims: _Claims) -> Node | None:
    """The node torch was converting when it raised: in the innermost frame that holds a
    graph node of the prepared model (by name: convert works on a copy), a claimed one
    first."""
    frames = []
    while tb is not None and len(frames) < _MAX_TRACE:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        found = [
            value
            for value in frame.f_locals.values()
            if isinstance(value, Node)
            and value.name in claims.nodes
            and value.op.startswith("call_")
        ]
        if found:
            return next((n for n in found if claims.claimed(n.name)), found[0])
    return None


# --- the cause ------------------------------------------------------------------------------


def _is_quantized(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_quantized


def _inputs(node: Node, values: dict[Node, Any]) -> Iterator[tuple[Node, Any]]:
    for arg in graphs.tensor_args(node):
        if arg.op != "get_attr" and arg in values:
            yield arg, values[arg]


def _source(node: Node) -> Node:
    """A value's producer, past the ``dequantize``/``quantize`` plumbing convert inserts."""
    seen = 0
    while seen < _MAX_TRACE and (graphs.is_dequantize(node) or graphs.quantize_kind(node)):
        first = node.args[0] if node.args else None
        if not isinstance(first, Node):
            break
        node, seen = first, seen + 1
    return node


def _value_text(arg: Node, value: Any, claims: _Claims) -> str:
    source = _source(arg)
    state = f"quantized {dtype_name(value.dtype)}" if _is_quantized(value) else "float"
    if source.name in claims.nodes and not claims.claimed(source.name):
        return f"{source.name} ({state}; {claims.label(source.name)} has no spec entry)"
    return f"{source.name} ({state})"


def _origin(start: Node, values: dict[Node, Any], claims: _Claims) -> Node | None:
    """Walking back from a quantized value through nodes the spec leaves float: the first one
    that was fed a quantized tensor it should not have been (None when a claimed node or a
    quantize of the spec's own is on the way)."""
    node, steps = _source(start), 0
    while steps < _MAX_TRACE:
        steps += 1
        if node.name not in claims.nodes or claims.claimed(node.name):
            return None
        quantized = [arg for arg, value in _inputs(node, values) if _is_quantized(value)]
        if not quantized:
            return None
        upstream = _source(quantized[0])
        if upstream.name in claims.nodes and not claims.claimed(upstream.name):
            node = upstream
            continue
        return node
    return None


def _quantizing_users(name: str, claims: _Claims) -> list[str]:
    """Claimed nodes that read the prepared node ``name`` through an observer: the reason a
    ``quantize`` follows it in the reference model."""
    node = claims.nodes[name]
    found = []
    for user in node.users:
        if graphs.is_observer(user, claims.modules):
            found += [u.name for u in user.users if claims.claimed(u.name)]
        elif claims.claimed(user.name):
            found.append(user.name)
    return found


def blame(
    failed: Node,
    values: dict[Node, Any],
    prepared: GraphModule,
    backend_config: BackendConfig,
    engine: str | None,
) -> Blame:
    """The cause of ``failed`` (a node of the converted model; ``values``: what it computed
    before), from the prepared model's claims."""
    claims = _Claims(prepared, backend_config)
    inputs = list(_inputs(failed, values))
    seen = ", ".join(_value_text(arg, value, claims) for arg, value in inputs)
    takes = f" with inputs {seen}" if seen else ""
    name = failed.name
    if name in claims.nodes and claims.claimed(name):
        on = f" on {engine}" if engine else ""
        return Blame(f"{_claimed(claims, name)} fails{on}{takes}", torch_limit=False)
    # An op the spec leaves float, or a node convert_fx made (a quantize fed a tensor that is
    # already quantized): either way, where did the quantized input come from?
    subject = (
        claims.describe(name)
        if name in claims.nodes
        else f"{name} ({object_label(failed.target)}, made by convert_fx)"
    )
    quantized = [arg for arg, value in inputs if _is_quantized(value)]
    origin = _origin(quantized[0], values, claims) if quantized else None
    if origin is None:
        return Blame(f"{subject} fails{takes}", torch_limit=False)
    users = _quantizing_users(origin.name, claims)
    sharing = [user for user in users if claims.shares_across(user)]
    if sharing:
        return Blame(
            f"{claims.describe(sharing[0])} shares one observer across the tensors it joins, "
            f"so FX quantizes its input {origin.name}, which the spec leaves float "
            f"({claims.label(origin.name)} has no entry); convert_fx then runs "
            f"{origin.name} on quantized tensors, and {subject} fails{takes}",
            torch_limit=False,
        )
    because = ", ".join(claims.describe(user) for user in users)
    return Blame(
        f"torch limitation, not the spec: {subject} fails{takes}: convert_fx "
        f"lowered {claims.describe(origin.name)} to run on quantized tensors"
        + (f" because {because} read{'s' * (len(users) == 1)} it quantized" if because else "")
        + ", and the quantized tensor reached ops the spec leaves float",
        torch_limit=True,
    )


def blame_run(
    model: GraphModule,
    inputs: tuple,
    prepared: GraphModule,
    backend_config: BackendConfig,
    engine: str | None,
) -> Blame | None:
    """The cause of ``model`` (a converted model) failing on ``inputs``; None if it runs."""
    failed, values = failing_node(model, inputs)
    if failed is None:
        return None
    return blame(failed, values, prepared, backend_config, engine)


def blame_convert(
    exc: BaseException, prepared: GraphModule, backend_config: BackendConfig
) -> Blame | None:
    """The cause of ``convert_fx`` raising ``exc`` on (a copy of) ``prepared``: the node it
    was converting, with its entry; None when the traceback names no node."""
    claims = _Claims(prepared, backend_config)
    node = node_in_traceback(exc.__traceback__, claims)
    if node is None:
        return None
    if claims.claimed(node.name):
        return Blame(f"convert_fx cannot lower {_claimed(claims, node.name)}", torch_limit=False)
    return Blame(f"convert_fx fails at {claims.describe(node.name)}", torch_limit=False)


def _claimed(claims: _Claims, name: str) -> str:
    """A claimed node with the dtypes its entry gave it: ``dw (nn.Conv2d, spec line 25) with
    input quint8, weight qint8, output quint8``."""
    dtypes = ", ".join(f"{role} {dtype_name(d)}" for role, d in claims.dtypes(name).items())
    return f"{claims.describe(name)} with {dtypes}"
