"""Op name -> the ATen chain it becomes under ``torch.export``, found by tracing.

A spec names ops the way Python code calls them (``nn.Conv2d``, ``F.relu``, ``method:view``);
a pt2e quantizer sees ATen nodes (``aten.conv2d.default``). Rather than keep a hand-written
translation, bespec exports the one-op model that ``bespec check`` synthesizes for the op and
reads off the chain of ATen calls, together with how each node was written (module, function,
method) as export's ``nn_module_stack`` / ``torch_fn`` metadata records it.

Tracing every op of a big backend takes seconds, so the results for the ops of the built-in
backends ship as data, one table per supported torch minor version
(``aten_tables/torch-2.13.json``: a build tag such as ``+cpu`` or ``+cu130``, or a patch
release, does not change what export traces; ``make aten-table`` regenerates the running
version's table and a test checks it is current). Any other named op is traced once and kept in
a cache file in the user's cache folder (:func:`cache_path`), so no command traces it again.
An allow-listed module's op is kept under its name and a hash of its code (:func:`disk_key`),
and every entry read back is validated (:func:`_is_description`); anything else is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from backend_spec._torch import BackendPatternConfig, quiet, torch
from backend_spec.names.naming import op_name
from backend_spec.versions import minor_text

TABLES = Path(__file__).with_name("aten_tables")
#: The running torch's key of version-dependent data: ``"2.14"`` for ``2.14.1+cu130``.
TORCH_MINOR = minor_text(torch.__version__)

#: Ops whose module form is a container of other torch modules (fused modules).
_NNI = "torch.ao.nn.intrinsic"


def describe_op(op: Any) -> dict[str, Any]:
    """``{"chain": [...], "where": [...]}`` for ``op``, or ``{"skip": reason}``."""
    if type(op).__name__ == "OpOverload":  # an ATen overload is its own chain, however written
        return {"chain": [[str(op)]], "where": [None]}
    name = op_name(op)
    if name is None:
        return _traced(op)
    key = disk_key(op, name)
    if key == name and (packaged := _cached_table().get(name)) is not None:
        return packaged  # the table holds torch's own ops only
    if key is None:  # code that cannot be fingerprinted: traced once per process
        return _traced(op)
    cached = _disk_cache().get(key)
    if cached is None:
        cached = _traced(op)
        _remember(key, cached)
    return cached


def disk_key(op: Any, name: str) -> str | None:
    """The trace cache's key of ``op`` (spelled ``name``): the name alone for torch's own
    objects (torch's version is in the cache file's name); for an allow-listed module's
    object, the name plus a hash of its code (:func:`code_digest`), so an edited ``forward``
    or a same-named module of another project is a miss. None when the code cannot be told."""
    if _is_torch(op) or name.startswith("method:"):
        return name
    try:
        digest = code_digest(op)
    except TypeError:  # an unhashable op: nothing to remember it by
        return None
    return None if digest is None else f"{name}@{digest}"


def _is_torch(obj: Any) -> bool:
    """Whether ``obj`` is torch's or ``operator``'s (a C method: its owner class decides)."""
    owner = getattr(obj, "__objclass__", None)
    module = getattr(owner if owner is not None else obj, "__module__", None) or ""
    return module in ("operator", "_operator", "torch") or module.startswith("torch.")


@functools.lru_cache(maxsize=256)
def code_digest(op: Any) -> str | None:
    """A hash of the code ``op`` runs when traced: for a class, each class of its MRO outside
    torch; for a function, itself. Each contributes its module, qualified name, the path of its
    module's file (realpath) and that file's bytes, so editing the file (``relu`` to
    ``sigmoid`` in ``forward``) changes it, and a module of the same name elsewhere differs.
    Code a ``forward`` calls in other modules is not part of it (docs/security.md). None when a
    part has no file to read (a class made by ``exec``)."""
    parts = op.__mro__ if isinstance(op, type) else (op,)
    digest = hashlib.sha256()
    for part in parts:
        if part is object or _is_torch(part):
            continue
        source = getattr(sys.modules.get(getattr(part, "__module__", None) or ""), "__file__", "")
        if not source:
            return None
        try:
            real = os.path.realpath(source)
            code = Path(real).read_bytes()
        except (OSError, ValueError):
            return None
        digest.update(f"{part.__module__}\0{part.__qualname__}\0{real}\0".encode())
        digest.update(hashlib.sha256(code).digest())
    return digest.hexdigest()[:32]


def fusion_key(fuser_name: str, op_names: list[str | None]) -> str:
    """The table key of what ``fuser_name`` makes of these ops: ``fuse_conv_bn(nn.Conv2d, ...)``."""
    return f"{fuser_name}({', '.join(str(name) for name in op_names)})"


@functools.lru_cache(maxsize=256)
def called_fuser(fuser: Any, ops: tuple) -> type | None:
    """The class ``fuser`` builds from float modules of ``ops`` (None if it cannot run)."""
    from backend_spec.check.synthesize import synthesize

    try:
        with quiet():
            made = synthesize(BackendPatternConfig(ops))
            modules = [getattr(made.model, ref.target) for ref in made.ops]
            return type(fuser(False, *modules))
    except Exception:  # a fuser that cannot run on synthesized modules: fall back to the entry
        return None


def cached_fusion(key: str) -> Any:
    """The module class a named fuser returns in eval mode, from the packaged table."""
    from backend_spec.names.naming import resolve_name

    name = _packaged().get("fusions", {}).get(key)
    return None if name is None else resolve_name(name)


def _cached_table() -> dict[str, dict[str, Any]]:
    return _packaged().get("ops", {})


def table_path(minor: str = TORCH_MINOR) -> Path:
    """The packaged table of torch ``minor`` (it exists for every supported version)."""
    return TABLES / f"torch-{minor}.json"


@functools.cache
def _packaged() -> dict[str, Any]:
    """The packaged table of the running torch's minor version (empty if there is none)."""
    data = _read_json(table_path())
    return data if data.get("torch") == TORCH_MINOR else {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # missing, unreadable or torn: as if empty
        return {}
    return data if isinstance(data, dict) else {}


# -- the trace cache on disk ------------------------------------------------------------------


def cache_path() -> Path:
    """Where traces outside the packaged table are kept: ``$BESPEC_CACHE_DIR``, else the user's
    cache folder (``$XDG_CACHE_HOME/bespec``, ``~/.cache/bespec``). One file per bespec and
    torch minor version, since either may change what a trace records."""
    from backend_spec import __version__
    from backend_spec.files import cache_folder

    safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"aten-traces-bespec-{__version__}-torch-{TORCH_MINOR}")
    return cache_folder() / f"{safe}.json"


#: The trace cache file is not read past this size, and keeps at most this many traces (each
#: edit of an allow-listed module adds one: the oldest go).
MAX_CACHE_BYTES = 16 * 2**20
MAX_CACHE_ENTRIES = 5000
#: What a cached trace may hold: a chain of at most this many ATen ops, each with at most
#: this many alternatives (the overload and its in-place twin), each named as torch names them.
_MAX_CHAIN, _MAX_ALTERNATIVES, _MAX_TEXT = 64, 4, 1000
_ATEN_NAME = re.compile(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+")
_DISK_LOCK = threading.Lock()


def _trusted_cache_path(*, create: bool = False) -> Path | None:
    """:func:`cache_path` when its folder is the user's own (files.trusted_cache), else None."""
    from backend_spec.files import trusted_cache

    return None if trusted_cache(create=create) is None else cache_path()


@functools.cache
def _disk_cache() -> dict[str, dict[str, Any]]:
    """The traces cached on disk by earlier runs; the file is read only from a cache folder of
    the user's own, and an entry that fails :func:`_is_description` is dropped (a miss)."""
    path = _trusted_cache_path()
    return {} if path is None else _valid_entries(path)


def _valid_entries(path: Path) -> dict[str, dict[str, Any]]:
    from backend_spec.files import read_cache_file

    data = read_cache_file(path, MAX_CACHE_BYTES)
    try:
        ops = json.loads(data, parse_constant=_not_json).get("ops") if data else None
    except (ValueError, AttributeError, RecursionError):  # torn, NaN, deep, not an object
        return {}
    if not isinstance(ops, dict):
        return {}
    return {k: v for k, v in ops.items() if _text(k) and _is_description(v)}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= _MAX_TEXT


def _is_description(value: Any) -> bool:
    """Whether ``value`` is what :func:`trace_op` returns, field by field."""
    if not isinstance(value, dict):
        return False
    if set(value) == {"skip"}:
        return _text(value["skip"])
    if set(value) != {"chain", "where"}:
        return False
    chain, where = value["chain"], value["where"]
    if not (isinstance(chain, list) and isinstance(where, list)):
        return False
    if not 0 < len(chain) <= _MAX_CHAIN or len(where) != len(chain):
        return False
    return all(map(_is_alternatives, chain)) and all(map(_is_where, where))


def _is_alternatives(value: Any) -> bool:
    return (
        isinstance(value, list)
        and 0 < len(value) <= _MAX_ALTERNATIVES
        and all(isinstance(name, str) and _ATEN_NAME.fullmatch(name) for name in value)
    )


def _is_where(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    if set(value) == {"calls"}:
        calls = value["calls"]
        return (
            isinstance(calls, list) and len(calls) <= _MAX_ALTERNATIVES and all(map(_text, calls))
        )
    if set(value) in ({"module"}, {"module", "container"}):
        return _text(value["module"]) and value.get("container", True) is True
    return False


def _remember(key: str, description: dict[str, Any]) -> None:
    """Add a fresh trace to the disk cache: merged with what other processes wrote meanwhile
    (valid entries only), written atomically (a reader never sees half a file). A cache that
    cannot be written (a read-only home, a folder that is not the user's own) only costs the
    next run a trace."""
    from backend_spec.files import WriteError, write_atomic

    with _DISK_LOCK:
        cached = _disk_cache()
        cached[key] = description
        path = _trusted_cache_path(create=True)
        if path is None:
            return
        merged = {**_valid_entries(path), **cached}
        kept = dict(list(merged.items())[-MAX_CACHE_ENTRIES:])  # this run's last
        with contextlib.suppress(OSError, WriteError):
            write_atomic(path, json.dumps({"ops": kept}, sort_keys=True))


@functools.lru_cache(maxsize=1024)
def _traced(op: Any) -> dict[str, Any]:
    try:
        return trace_op(op)
    except Exception as exc:  # an op that export cannot trace is reported, never raised
        return {"skip": f"torch.export cannot trace it: {type(exc).__name__}: {exc}"[:300]}


def trace_op(op: Any) -> dict[str, Any]:
    """Export the synthesized one-op model of ``op`` and describe its ATen chain."""
    from backend_spec.check.synthesize import SkipPattern, synthesize

    if _is_qat_module(op):
        return {"skip": "QAT module: pt2e QAT fake-quantizes the float graph instead"}
    try:
        with quiet():
            made = synthesize(BackendPatternConfig(op))
    except SkipPattern as exc:
        return {"skip": f"no one-op model to trace: {exc}"}
    with quiet(), torch.no_grad():
        exported = torch.export.export(made.model, made.example_inputs)
    nodes = [node for node in exported.module().graph.nodes if node.op == "call_function"]
    if not nodes:
        return {"skip": "torch.export removes it (no ATen op is left)"}
    for previous, node in zip(nodes, nodes[1:], strict=False):
        if not node.args or node.args[0] is not previous:
            return {"skip": "it does not trace to a linear chain of ATen ops"}
    return {
        "chain": [_alternatives(node.target) for node in nodes],
        "where": [_where(op, node) for node in nodes],
    }


def _is_qat_module(op: Any) -> bool:
    module = getattr(op, "__module__", "") or ""
    return isinstance(op, type) and (".qat" in module)


def _alternatives(target: Any) -> list[str]:
    """The traced overload, plus its in-place twin (``relu`` -> ``relu_``) when one exists."""
    names = [str(target)]
    packet = getattr(target, "_overloadpacket", None)
    overload = getattr(target, "_overloadname", None)
    if packet is not None and overload is not None and not packet.__name__.endswith("_"):
        twin = getattr(torch.ops.aten, packet.__name__ + "_", None)
        if twin is not None and overload in twin.overloads():
            names.append(str(getattr(twin, overload)))
    return names


def _where(op: Any, node: Any) -> dict[str, Any]:
    """How the op was written: a module class (by qualified name) or the callable kinds that
    export records in ``torch_fn`` (``function.relu``, ``builtin_function_or_method.relu``)."""
    if isinstance(op, type):
        where: dict[str, Any] = {"module": f"{op.__module__}.{op.__qualname__}"}
        if op.__module__.startswith(_NNI):
            where["container"] = True
        return where
    torch_fn = node.meta.get("torch_fn")
    if not torch_fn:
        return {"calls": []}
    calls = [torch_fn[1]]
    if len(_alternatives(node.target)) > 1 and not torch_fn[1].startswith("function."):
        # ``x += y`` and ``x.relu_()`` record the in-place method (FX sees ``operator.add``).
        calls.append(torch_fn[1] + "_")
    return {"calls": calls}


def _builtin_configs() -> Iterator[Any]:
    from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config

    for backend in BUILTIN_BACKENDS:
        yield from builtin_backend_config(backend).configs


def build_table() -> dict[str, Any]:
    """The cache file's content for this torch version: the ATen chain of every op of the
    built-in backends, and what each named (non-sequential) fuser of theirs returns."""
    from backend_spec.analysis.qconfigs import pattern_ops
    from backend_spec.names.fusers import sequential_class
    from backend_spec.names.naming import object_name

    ops: dict[str, Any] = {}
    fusions: dict[str, str] = {}
    for config in _builtin_configs():
        for op in pattern_ops(config):
            name = op_name(op)
            if name is not None and name not in ops:
                ops[name] = _traced(op)
        fuser = config.fuser_method
        if fuser is None or sequential_class(fuser) is not None or object_name(fuser) is None:
            continue
        pattern = tuple(pattern_ops(config))
        fused = called_fuser(fuser, pattern)
        if fused is not None:
            key = fusion_key(object_name(fuser), [op_name(op) for op in pattern])
            fusions[key] = object_name(fused)
    return {"torch": TORCH_MINOR, "ops": ops, "fusions": fusions}


def table_text() -> str:
    """The cache file's text (what ``make aten-table`` writes and the currency test compares)."""
    return json.dumps(build_table(), indent=1, sort_keys=True) + "\n"


def write_table(path: Path | None = None) -> None:
    """Write the running torch's table (``make aten-table``; ``make aten-table TORCH=2.14.1``)."""
    from backend_spec.files import write_atomic

    path = table_path() if path is None else path
    write_atomic(path, table_text())
    path.chmod(0o644)


if __name__ == "__main__":
    write_table()
