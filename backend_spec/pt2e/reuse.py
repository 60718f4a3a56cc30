"""Work torchao's prepare and convert redo on every call, done once per process.

These costs dominate bespec's runs of ``prepare_pt2e``, ``prepare_qat_pt2e`` and ``convert_pt2e``
on its large probe suite, and none depends on the model or the quantizer:

* **Pattern graphs.** Every ``prepare_qat_pt2e`` (conv-bn fusion) and every ``convert_pt2e`` of
  a graph with a BatchNorm (conv-bn folding) ``torch.export``-s the same ~60 small conv-bn
  patterns (``_get_aten_graph_module_for_pattern``), about half a second each: most of the
  time of an export verified in the QAT flow, which prepares and converts twice. The graph
  depends only on the pattern's code (a function, or a stateless module's methods) with
  what its closures hold, and on the example inputs' shapes and dtypes, so
  :func:`reused_patterns` keeps each one, keyed by all of them, and hands out a deep copy
  (what the caller does to its copy never reaches the next caller). Quantizers that build
  pattern graphs to annotate (XNNPACK's conv-bn, LiteRT's) call the same function, imported
  by name: every loaded module's binding of it is rebound.
* **Patterns that cannot match.** A pattern is built for each of four conv functions
  (conv1d, conv2d, their transposes) whatever the graph holds. Inside a conv-bn helper
  whose graph has no node of that conv (nor a generic ``convolution``), no pattern of it can
  match, so :func:`reused_patterns` hands it a one-node stand-in of that absent conv op
  instead of exporting it, and the rewrite returns at once for a stand-in: the helper does
  what it would have done with no match.
* **Observer names.** ``_insert_obs_or_fq`` names each new observer
  ``activation_post_process_N`` with the lowest free ``N``, found by ``hasattr`` from 0 up:
  quadratic in the number of observers, seconds on the suite. :func:`reused_patterns` swaps
  in a search that gives the same name but looks in the module's submodules (where observers
  live) before falling back to ``hasattr``, and starts after the name it handed out last
  when the module has changed only by that name since.
* **Sequential partitions.** torchao's ``find_sequential_partitions`` (X86's conv-bn-add-relu,
  LiteRT's fusions) tries every combination of one partition per op type, the product of
  their counts: on the suite's hundreds of convs, batch norms, adds and relus, minutes.
  :func:`reused_patterns` rebinds it, wherever a loaded module holds it, to
  :func:`sequential_partitions`, which extends only chains whose neighbours connect: the
  same candidates in the same order.

All are in effect only inside :func:`reused_patterns` and give what torchao would have
computed, so results are unchanged (an export's spec is byte-identical with and without).
The cache is in memory only (never pickled to disk) and bounded (:data:`MAX_PATTERNS`).
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import importlib
import itertools
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from backend_spec._torch import torch

#: Pattern graphs kept per process at most (torchao 0.18 builds 120 distinct ones); past it,
#: new ones are built and not kept.
MAX_PATTERNS = 512

_patterns: dict[tuple, Any] = {}
_lock = threading.Lock()
_depth = 0
#: What :func:`_install` replaced, put back when the last :func:`reused_patterns` ends.
_saved: list[tuple[types.ModuleType, str, Any]] = []

#: The conv-bn helpers of torchao's ``qat_utils``, called with ``(m, conv_fn, ...)``.
_HELPER_SITES = ("_fuse_conv_bn_qat_helper", "_fold_conv_bn_qat_helper")
_QAT_UTILS = "torchao.quantization.pt2e.qat_utils"
#: The conv function the running helper's graph has no node of (its patterns cannot match).
_absent_conv: contextvars.ContextVar[Any] = contextvars.ContextVar("absent_conv", default=None)
_NAMING_SITE = ("torch.ao.quantization.fx.prepare", "get_new_attr_name_with_prefix")


@contextlib.contextmanager
def reused_patterns() -> Iterator[None]:
    """Within: torchao's pattern graphs come from the process's cache, and observer names are
    found without a quadratic search (see the module docstring). Re-entrant, and across
    threads: the originals come back when the last one leaves."""
    global _depth
    with _lock:
        if _depth == 0:
            _saved[:] = _install()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for module, name, original in _saved:
                    setattr(module, name, original)
                _saved.clear()


def _install() -> list[tuple[types.ModuleType, str, Any]]:
    """Rebind each site that exists (an older or newer torchao may lack one); the originals."""
    saved = [
        pair for definitions, name, make in _REBOUND for pair in _rebind(definitions, name, make)
    ]
    module = _module(_QAT_UTILS)
    for name in _HELPER_SITES:
        original = getattr(module, name, None) if module is not None else None
        if original is not None:
            saved.append((module, name, original))
            setattr(module, name, _noting_absent_conv(original))
    module = _module(_NAMING_SITE[0])
    original = getattr(module, _NAMING_SITE[1], None) if module is not None else None
    if original is not None:
        saved.append((module, _NAMING_SITE[1], original))
        setattr(module, _NAMING_SITE[1], attr_name_finder)
    return saved


def _rebind(
    definitions: tuple[str, ...], name: str, make: Callable[[Any], Any]
) -> list[tuple[types.ModuleType, str, Any]]:
    """Every loaded module's binding of a function ``name`` that one of ``definitions`` (those
    loaded: a definition not yet imported is bound nowhere) defines, rebound to
    ``make(function)``; the originals."""
    replacements = {}
    for module_name in definitions:
        module = sys.modules.get(module_name)
        original = vars(module).get(name) if module is not None else None
        if isinstance(original, types.FunctionType):
            replacements[id(original)] = (original, make(original))
    saved = []
    for module in list(sys.modules.values()):
        bound = vars(module).get(name) if isinstance(module, types.ModuleType) else None
        found = replacements.get(id(bound)) if bound is not None else None
        if found is not None and bound is found[0]:
            saved.append((module, name, bound))
            setattr(module, name, found[1])
    return saved


def sequential_partitions(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (torchao's ``find_sequential_partitions``), the same result found in time
    linear in the chains that connect: its candidates are the product of the partition lists
    filtered by "each partition feeds the next", so a depth-first walk that extends a prefix
    only by partitions its last one feeds yields exactly those, in the product's order. It
    calls the original's own helpers (type checks, partition lookup, connectivity)."""
    helpers = original.__globals__
    valid, matching = helpers["_valid_type_sequence"], helpers["_get_matching_types"]
    partitions_of, connected = (
        helpers["get_source_partitions"],
        helpers["check_subgraphs_connected"],
    )

    def find_sequential_partitions(
        gm: Any,
        partition_types: list[Any],
        include_functional_equivalent: bool = True,
        filter_fn: Callable[[Any], bool] | None = None,
    ) -> list[tuple]:
        if not valid(partition_types):
            raise ValueError(
                f"Invalid partition types: {partition_types}. "
                "Each type in the sequence must be unique"
            )
        typed = [
            list(
                itertools.chain.from_iterable(
                    partitions_of(gm.graph, matching(kind), filter_fn).values()
                )
            )
            for kind in partition_types
        ]
        found: list[tuple] = []

        def extend(prefix: tuple) -> None:
            if len(prefix) == len(typed):
                found.append(prefix)
                return
            for partition in typed[len(prefix)]:
                if not prefix or connected(prefix[-1], partition):
                    extend((*prefix, partition))

        extend(())
        return found

    return find_sequential_partitions


def _noting_absent_conv(helper: Callable[..., Any]) -> Callable[..., Any]:
    def noting(m: Any, conv_fn: Any, *args: Any, **kwargs: Any) -> Any:
        absent = None if has_conv(m.graph, conv_fn) else conv_fn
        token = _absent_conv.set(absent)
        try:
            return helper(m, conv_fn, *args, **kwargs)
        finally:
            _absent_conv.reset(token)

    return noting


#: ATen ops any conv function may trace to besides its own name (``aten.conv2d``).
_GENERIC_CONVS = ("convolution", "_convolution")


def has_conv(graph: Any, conv_fn: Any) -> bool:
    """Whether ``graph`` may hold a node a pattern of ``conv_fn`` matches: one of the ATen op
    named like it (``F.conv1d``: ``aten.conv1d``, any overload) or of the generic
    convolution; True when the function has no name to tell."""
    name = getattr(conv_fn, "__name__", None)
    if not isinstance(name, str):
        return True
    names = {name, *_GENERIC_CONVS}
    for node in graph.nodes:
        parts = str(node.target).split(".")
        if node.op == "call_function" and len(parts) > 1 and parts[1] in names:
            return True
    return False


def _stand_in(conv_fn: Any) -> Any:
    """A graph that matches nothing where ``conv_fn``'s op is absent: that op (an overload of
    it: ``aten.conv_transpose2d`` has no ``default``) on one input."""
    packet = getattr(torch.ops.aten, conv_fn.__name__)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(getattr(packet, packet.overloads()[0]), (x,)))
    made = torch.fx.GraphModule(torch.nn.Module(), graph)
    setattr(made, _STAND_IN, True)
    return made


#: The attribute that marks a :func:`_stand_in` graph.
_STAND_IN = "_bespec_stand_in"


def _skipping_stand_ins(replace: Callable[..., Any]) -> Callable[..., Any]:
    """torch's ``replace_pattern_with_filters``, returning at once for a :func:`_stand_in`
    pattern: it matches nothing, so torch would only regenerate the graph's code, which the
    conv-bn helpers do themselves after each call (a fraction of a second each on the
    suite, a hundred times an export)."""

    def replace_pattern_with_filters(gm: Any, pattern: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(pattern, _STAND_IN, False):
            return []
        return replace(gm, pattern, *args, **kwargs)

    return replace_pattern_with_filters


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _caching(build: Callable[..., Any]) -> Callable[..., Any]:
    def cached(pattern: Any, example_inputs: tuple, is_cuda: bool = False, **kwargs: Any) -> Any:
        absent = _absent_conv.get()
        if absent is not None and _calls(pattern, absent):
            return _stand_in(absent)
        key = pattern_key(pattern, example_inputs, is_cuda, kwargs)
        if key is None:
            return build(pattern, example_inputs, is_cuda, **kwargs)
        with _lock:
            kept = _patterns.get(key)
        if kept is None:
            kept = build(pattern, example_inputs, is_cuda, **kwargs)
            with _lock:
                if len(_patterns) < MAX_PATTERNS:
                    _patterns[key] = copy.deepcopy(kept)
            return kept
        return copy.deepcopy(kept)

    return cached


def _calls(pattern: Any, conv_fn: Any) -> bool:
    """Whether the pattern function holds ``conv_fn`` (the conv it calls) in its closure."""
    fn = getattr(pattern, "fn", pattern)
    return any(cell.cell_contents is conv_fn for cell in getattr(fn, "__closure__", None) or ())


def pattern_key(pattern: Any, example_inputs: tuple, is_cuda: bool, kwargs: dict) -> tuple | None:
    """Everything the exported pattern graph depends on: the code tracing runs (the function,
    or each method of a stateless module's class: coremltools' patterns are local
    ``nn.Module`` classes), the values their closures and defaults hold, and each example
    input's kind (shape, dtype, stride...; not its values, which tracing does not read).
    ``None`` (not cached) when the pattern holds a value that is not plainly comparable (a
    tensor, a module with state or attributes of its own)."""
    traced = _traced(pattern)
    if traced is None:
        return None
    functions, held = traced
    for fn in functions:
        held += [cell.cell_contents for cell in fn.__closure__ or ()]
        held += list(fn.__defaults__ or ()) + sorted((fn.__kwdefaults__ or {}).items())
    if not all(_plain(value) for value in held):
        return None
    inputs = tuple(_input_key(value) for value in example_inputs)
    named = tuple(sorted((name, _input_key(value)) for name, value in kwargs.items()))
    if any(part is None for part in inputs) or any(part is None for _, part in named):
        return None
    code = tuple((fn.__qualname__, fn.__code__, fn.__module__) for fn in functions)
    training = getattr(pattern, "training", None)
    return (code, training, tuple(map(_held_key, held)), inputs, named, is_cuda)


#: What every ``nn.Module`` instance holds (``training`` and its containers, empty when it has
#: no state); an instance with more attributes is not keyed (bar ``WrapperModule``'s ``fn``).
_MODULE_ATTRIBUTES = frozenset(vars(torch.nn.Module()))


def _traced(pattern: Any) -> tuple[list[types.FunctionType], list[Any]] | None:
    """The functions tracing ``pattern`` may run, and the class constants they may read:
    itself; a stateless ``WrapperModule``'s ``fn``; a stateless module's own methods and
    class attributes, its bases' included (a subclass may override a helper its inherited
    ``forward`` calls). ``None`` when there is anything else (a property, a staticmethod)."""
    if isinstance(pattern, types.FunctionType):
        return [pattern], []
    if not isinstance(pattern, torch.nn.Module):
        return None
    own = vars(pattern)
    if any(own[name] for name in _MODULE_ATTRIBUTES & own.keys() if name != "training"):
        return None  # parameters, buffers, submodules or hooks
    if type(pattern).__name__ == "WrapperModule":
        fn = own.get("fn")
        extra = own.keys() - _MODULE_ATTRIBUTES - {"fn"}
        return ([fn], []) if isinstance(fn, types.FunctionType) and not extra else None
    if own.keys() - _MODULE_ATTRIBUTES:
        return None
    base = set(torch.nn.Module.__mro__)
    functions, constants = [], []
    for cls in type(pattern).__mro__:
        for name, value in vars(cls).items() if cls not in base else ():
            if isinstance(value, types.FunctionType):
                functions.append(value)
            elif _plain(value) and not isinstance(value, types.BuiltinFunctionType):
                constants.append((name, value))
            elif not (name.startswith("__") and name.endswith("__")):
                return None
    return (functions, constants) if functions else None


def _plain(value: Any) -> bool:
    """A value a pattern's closure may hold and the key can compare: plain data, a function
    (``F.conv2d``: compared by identity) or a tuple of those; a cell of a pair in defaults."""
    if isinstance(value, (bool, int, float, str, type(None), torch.dtype)):
        return True
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return True
    if isinstance(value, tuple):
        return all(_plain(item) for item in value)
    return False


def _held_key(value: Any) -> Any:
    """Compared by type and value (``True`` and ``1`` differ); functions by identity."""
    if isinstance(value, tuple):
        return (tuple, tuple(map(_held_key, value)))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return (type(value), id(value), value)
    if isinstance(value, float):  # 0.0 and -0.0 are equal, NaN is not itself
        return (float, repr(value))
    return (type(value), value)


def _input_key(value: Any) -> tuple | None:
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            tuple(value.shape),
            value.stride(),
            value.dtype,
            str(value.device),
            value.layout,
            value.requires_grad,
        )
    if _plain(value):
        return ("value", _held_key(value))
    return None


#: module -> prefix -> (the index after the last name handed out, the sizes of the module's
#: dicts with that name added as a submodule, that name): where the next search may start.
_NAMED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attr_name_finder(prefix: str) -> Callable[[torch.nn.Module], str]:
    """``torch.ao.quantization.fx.utils.get_new_attr_name_with_prefix``, the same name faster:
    the lowest ``prefix + str(i)`` that ``module`` lacks. A name among its submodules,
    parameters, buffers or instance attributes is one it has (checked in dicts, without the
    ``__getattr__`` call ``hasattr`` makes); any other is asked of ``hasattr`` as before.

    The search starts after the name last handed out for ``module`` when all that changed
    since is that name added as its newest submodule (``_insert_obs_or_fq`` sets it at once):
    then nothing was removed, every lower name is still taken, and the lowest free one lies
    above. Any other change (a removal, another addition) searches from 0 again."""
    prefix = prefix.replace(".", "_")

    def get_new_attr_name(module: torch.nn.Module) -> str:
        own = vars(module)
        modules, params = own.get("_modules") or {}, own.get("_parameters") or {}
        buffers = own.get("_buffers") or {}
        sizes = (len(modules), len(own), len(params), len(buffers))
        state = _NAMED.setdefault(module, {}).get(prefix)
        start = 0
        if state is not None and state[1] == sizes and next(reversed(modules), None) == state[2]:
            start = state[0]
        for i in itertools.count(start):
            name = f"{prefix}{i}"
            if name in modules or name in own or name in params or name in buffers:
                continue
            if not hasattr(module, name):
                _NAMED[module][prefix] = (i + 1, (sizes[0] + 1, *sizes[1:]), name)
                return name
        raise AssertionError("unreachable")

    return get_new_attr_name


#: Functions rebound inside :func:`reused_patterns`: (the modules that may define one, its
#: name, what wraps it). Each loaded module's binding of a loaded definition is rebound: the
#: definition and every module that imported it by name (torchao's ``qat_utils``, executorch's
#: XNNPACK and LiteRT's quantizer utilities, coremltools through torch's copy).
_REBOUND: tuple[tuple[tuple[str, ...], str, Callable[[Any], Any]], ...] = (
    (
        ("torchao.quantization.pt2e.utils", "torch.ao.quantization.pt2e.utils"),
        "_get_aten_graph_module_for_pattern",
        _caching,
    ),
    (
        ("torchao.quantization.pt2e.graph_utils", "torch.ao.quantization.pt2e.graph_utils"),
        "find_sequential_partitions",
        sequential_partitions,
    ),
    (("torch.fx.subgraph_rewriter",), "replace_pattern_with_filters", _skipping_stand_ins),
)
