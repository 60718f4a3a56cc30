"""The naming vocabulary shared by the resolver (name -> object) and the exporter (object -> name).

Keeping both directions on one table is what makes export/compile round trips exact.
"""

from __future__ import annotations

#: Short aliases of the contract, in the order the exporter prefers them (most specific last
#: wins ties on length, so ``nniqat`` beats ``nni`` for ``torch.ao.nn.intrinsic.qat``).
ALIASES: dict[str, str] = {
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "nni": "torch.ao.nn.intrinsic",
    "nniqat": "torch.ao.nn.intrinsic.qat",
    "nnqat": "torch.ao.nn.qat",
    "nnq": "torch.ao.nn.quantized",
    "nnqr": "torch.ao.nn.quantized.reference",
    "nnqd": "torch.ao.nn.quantized.dynamic",
    "operator": "operator",
    "torch": "torch",
}

#: Names that stand alone (no module prefix) and the object path they mean.
SPECIAL_NAMES: dict[str, str] = {
    "MatchAllNode": "torch.ao.quantization.utils.MatchAllNode",
}

#: Modules searched, in order, for a bare function name such as ``fuse_conv_bn``.
BARE_FUNCTION_MODULES: tuple[str, ...] = (
    "torch.ao.quantization.fuser_method_mappings",
    "torch.ao.quantization.backend_config.onednn",
    "torch.ao.quantization.backend_config._common_operator_config_utils",
    "torch.ao.quantization.backend_config.executorch",
)

#: The prefix of a ``call_method`` pattern: ``method:view`` is torch's plain string ``"view"``.
METHOD_PREFIX = "method:"

#: The torch modules whose functions a spec's ``{call: ...}`` may call without an allow-list
#: entry: where torch keeps its fuser and config factories (``_sequential_wrapper2``, ...).
TORCH_FACTORY_MODULES: tuple[str, ...] = (
    "torch.ao.quantization.fuser_method_mappings",
    "torch.ao.quantization.backend_config",
)


def inside(module: str, roots: tuple[str, ...] | list[str]) -> bool:
    """``module`` is one of ``roots`` or a submodule of one."""
    return any(module == root or module.startswith(root + ".") for root in roots)


#: Roots every spec may name; the caller's allow-list adds to these.
DEFAULT_ROOTS: tuple[str, ...] = ("torch", "operator")

#: Modules (with their submodules) that a dotted name may walk through besides the allow-list.
#: Walking is confined to them so that what a name means never depends on what the process
#: happened to import before (``torch.utils.cpp_extension`` exists in ``vars(torch.utils)`` only
#: once someone imported it): a module of these trees that is not loaded yet is imported
#: explicitly, and any other module is refused. The rest of torch stays reachable through the
#: names the ``torch`` namespace itself exports (``torch.add``, ``torch.Tensor``).
WALKABLE_MODULES: tuple[str, ...] = (
    "torch.nn",
    "torch.ao.nn",
    "torch.ao.quantization.backend_config",
    "torch.ao.quantization.fuser_method_mappings",
    "torch.ao.quantization.utils",
    "operator",
)

#: The walkable modules that are only a package node on the way (their own names are walked,
#: their other submodules are not): ``torch.ao.quantization.observer`` stays out.
WALKABLE_PACKAGES: tuple[str, ...] = ("torch", "torch.ao", "torch.ao.quantization")

#: Where a function named by a callable field (``fuser_method``, ``root_node_getter``,
#: ``extra_inputs_getter``) may be defined, besides allow-listed modules: torch's own fusers and
#: getters. Anything else in torch (``register_module_forward_hook``,
#: ``serialization.register_package``) could change global state when prepare_fx calls it.
CALLABLE_MODULES: tuple[str, ...] = (
    "torch.ao.quantization.fuser_method_mappings",
    "torch.ao.quantization.backend_config",
)

#: Where a class named by a module field may be defined, besides allow-listed modules.
MODULE_CLASS_MODULES: tuple[str, ...] = ("torch.nn", "torch.ao.nn")

#: Where the fused class of ``{sequential: X}`` may be defined (a ``_FusedModule`` subclass).
SEQUENTIAL_MODULES: tuple[str, ...] = ("torch.ao.nn.intrinsic",)

#: Python's ``operator`` functions report ``_operator`` as their module.
ROOT_MODULE_ALIASES: dict[str, str] = {"_operator": "operator"}

#: The built-in torch backends ``extends`` and ``export`` accept, and their getters.
BUILTIN_BACKENDS: dict[str, str] = {
    "native": "get_native_backend_config",
    "fbgemm": "get_fbgemm_backend_config",
    "qnnpack": "get_qnnpack_backend_config",
    "x86": "get_x86_backend_config",
    "onednn": "get_onednn_backend_config",
    "executorch": "get_executorch_backend_config",
    "tensorrt": "get_tensorrt_backend_config",
}


def builtin_backend_config(name: str):
    """A fresh BackendConfig of a built-in torch backend (``KeyError`` if unknown)."""
    from backend_spec._torch import backend_config_module, quiet

    getter_name = BUILTIN_BACKENDS[name]
    with quiet():
        if name == "x86":
            from torch.ao.quantization.backend_config.x86 import get_x86_backend_config

            return get_x86_backend_config()
        return getattr(backend_config_module, getter_name)()


def export_base(ref: str, base: str | None) -> str | None:
    """The base ``bespec export --base`` asks for: a built-in, ``"auto"``, or None. By default
    ``auto`` for a ``module:attr`` reference, none for a built-in or a spec file (exported as
    they are). ValueError for anything else (checked before any import or work)."""
    from pathlib import Path

    from backend_spec.names.importer import split_ref

    if base is None:
        is_ref = ref not in BUILTIN_BACKENDS and not Path(ref).is_file() and split_ref(ref)
        return "auto" if is_ref else None
    if base == "none":
        return None
    if base != "auto" and base not in BUILTIN_BACKENDS:
        raise ValueError(f"--base must be a built-in backend, auto or none, not {base!r}")
    return base
