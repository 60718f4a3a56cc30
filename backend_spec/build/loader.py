"""The load pipeline: bytes -> text -> data with positions -> model -> BackendConfig.

Also where ``extends`` and ``remove`` are applied, since a base may itself be a spec file.
Every problem, at any stage, ends in :class:`SpecError`; nothing else escapes.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend_spec import _torch, codes
from backend_spec.build.compiler import Compiled, Compiler, Origin, pattern_key
from backend_spec.diagnostics import Diagnostic, SpecError
from backend_spec.names.resolver import Resolver
from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config
from backend_spec.spec.models import SpecModel
from backend_spec.spec.source import SourceDoc, format_for, parse, read_text
from backend_spec.spec.validate import validate

MAX_EXTENDS_DEPTH = 16


def load(path: str | os.PathLike[str], allow_imports: Iterable[str] | None = None) -> Any:
    """Load a spec file (``.yaml``/``.yml``/``.toml``) and return a torch ``BackendConfig``."""
    return compile_file(path, allow_imports).backend_config


def loads(
    text: str,
    format: str = "yaml",
    allow_imports: Iterable[str] | None = None,
    *,
    file: str = "<string>",
    base_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """Load spec text of the given format (``"yaml"`` or ``"toml"``) into a BackendConfig.

    ``base_dir`` anchors a relative ``extends`` path (default: the current directory).
    """
    resolver = Resolver(tuple(allow_imports or ()))
    fmt = format_for(file, format)
    with _torch.quiet():
        return guarded(
            lambda: _compile_text(text, file, fmt, resolver, Path(base_dir or "."), ())
        ).backend_config


def compile_file(
    path: str | os.PathLike[str], allow_imports: Iterable[str] | None = None
) -> Compiled:
    """Compile a spec file, keeping where each pattern came from (for ``bespec show``)."""
    resolver = Resolver(tuple(allow_imports or ()))
    with _torch.quiet():
        return guarded(lambda: _compile_path(Path(path), resolver, ()))


def builtin_compiled(name: str) -> Compiled:
    """A torch built-in backend, each pattern's origin ``torch:NAME``."""
    config = builtin_backend_config(name)
    origin = Origin(f"torch:{name}")
    return Compiled(config, {pattern_key(c): origin for c in config.configs})


def guarded(build: Any) -> Any:
    """Run a build; any failure that is not already a SpecError becomes one, never a traceback.

    The cyclic garbage collector is paused meanwhile: a load allocates many small objects that
    all stay alive, so collections would only rescan them, making large specs superlinear.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    except SpecError:
        raise
    except RecursionError:
        raise SpecError([Diagnostic("<spec>", 0, 0, codes.TOO_DEEP, "nesting too deep")]) from None
    except Exception as exc:  # a bug or a torch error on strange input: still a SpecError
        raise SpecError(
            [
                Diagnostic(
                    "<spec>",
                    0,
                    0,
                    codes.INTERNAL,
                    f"internal error while loading: {type(exc).__name__}: {exc}",
                    "please report this with the spec that caused it",
                )
            ]
        ) from exc
    finally:
        if gc_was_enabled:
            gc.enable()


def read_source(path: Path, fmt: str | None = None) -> SourceDoc:
    """Read and parse a spec file (SpecError on unreadable, undecodable or malformed text)."""
    file = str(path)
    try:
        fmt = format_for(path, fmt)
    except ValueError as exc:
        raise SpecError(
            [Diagnostic(file, 0, 0, codes.UNREADABLE, str(exc), "use .yaml, .yml or .toml")]
        ) from None
    return parse(read_text(path), file, fmt, recover=True)


def _compile_path(path: Path, resolver: Resolver, chain: tuple[Path, ...]) -> Compiled:
    doc = read_source(path)
    return _compile_doc(doc, resolver, path.parent, (*chain, path.resolve()))


def _compile_text(
    text: str, file: str, fmt: str, resolver: Resolver, base_dir: Path, chain: tuple[Path, ...]
) -> Compiled:
    return _compile_doc(parse(text, file, fmt, recover=True), resolver, base_dir, chain)


def _compile_doc(
    doc: SourceDoc, resolver: Resolver, base_dir: Path, chain: tuple[Path, ...]
) -> Compiled:
    built = build(doc, resolver, base_dir, chain)
    problems = built.diagnostics
    if built.spec is not None:
        problems = [*problems, *meaning_errors(built, resolver)]
    if problems:
        raise SpecError(problems)
    assert built.compiled is not None
    return built.compiled


@dataclass
class Built:
    """One pass over a spec: what validated, the config when nothing failed, every error."""

    doc: SourceDoc
    spec: SpecModel | None
    compiled: Compiled | None
    diagnostics: list[Diagnostic] = field(default_factory=list)


def build(
    doc: SourceDoc, resolver: Resolver, base_dir: Path, chain: tuple[Path, ...] = ()
) -> Built:
    """Validate (with recovery) and compile a parsed spec, collecting schema, name, reference
    and ``extends`` errors of the whole file; ``compiled`` is None when there is any."""
    spec, problems = validate(doc)
    problems[:0] = doc.diagnostics  # duplicate keys, found while parsing
    if spec is None:
        return Built(doc, None, None, problems)
    compiler = Compiler(doc, spec, resolver)
    entries = compiler.compile_patterns()
    removals = compiler.removal_keys()
    base = _base(doc, spec, resolver, base_dir, chain, compiler.diagnostics)
    if "remove" in spec.model_fields_set and not spec.extends and not spec.set_aside(("extends",)):
        compiler.problem(
            ("remove",),
            codes.REMOVE_WITHOUT_EXTENDS,
            "'remove' needs 'extends'",
            "name a base to remove patterns from",
        )
    problems.extend(compiler.diagnostics)
    if problems:
        return Built(doc, spec, None, problems)
    result = Compiled(_torch.BackendConfig(spec.name), doc=doc, spec=spec)
    if base is not None:
        _inherit(result, base)
    result.dtype_config_names.update(compiler.dtype_config_names())
    _remove(result, removals, doc, spec, problems)
    for index, config in entries:
        key = pattern_key(config)
        result.backend_config.set_backend_pattern_config(config)
        result.origins[key] = Origin(doc.file, doc.where(("patterns", index))[0])
    return Built(doc, spec, None if problems else result, problems)


def meaning_errors(built: Built, resolver: Resolver) -> list[Diagnostic]:
    """Errors of a file that does not mean what it says: an entry that another silently
    replaces, a fuser that cannot take its chain (lint rules that load enforces). Checked on
    every entry that validated, so they are reported with the file's other errors."""
    from backend_spec.lint.runner import enforced_problems

    assert built.spec is not None
    config = built.compiled.backend_config if built.compiled is not None else None
    return enforced_problems(built.doc, built.spec, resolver, config)


def _inherit(result: Compiled, base: Compiled) -> None:
    result.dtype_config_names.update(base.dtype_config_names)
    for config in base.backend_config.configs:
        key = pattern_key(config)
        result.backend_config.set_backend_pattern_config(config)
        result.origins[key] = base.origins.get(key, Origin("?"))


def _remove(
    result: Compiled,
    removals: list[tuple[Any, Any]],
    doc: SourceDoc,
    spec: SpecModel,
    out: list[Diagnostic],
) -> None:
    table = result.backend_config._pattern_complex_format_to_config
    for path, key in removals:
        if key in table:
            del table[key]
            result.origins.pop(key, None)
        else:
            written = spec.remove[path[-1]]
            pattern = written if isinstance(written, str) else f"[{', '.join(written)}]"
            out.append(
                doc.diagnostic(
                    path,
                    codes.REMOVE_UNKNOWN,
                    f"pattern {pattern} is not among the patterns of base '{spec.extends}'",
                    f"check the spelling; `bespec show {spec.extends}` lists the base's patterns",
                )
            )


def _base(
    doc: SourceDoc,
    spec: SpecModel,
    resolver: Resolver,
    base_dir: Path,
    chain: tuple[Path, ...],
    out: list[Diagnostic],
) -> Compiled | None:
    """The compiled base named by ``extends`` (None, with a diagnostic, when unusable)."""
    if spec.extends is None:
        return None
    where = ("extends",)
    if spec.extends in BUILTIN_BACKENDS:
        return builtin_compiled(spec.extends)
    path = (base_dir / spec.extends).resolve()
    if path in chain:
        cycle = " -> ".join(p.name for p in (*chain, path))
        out.append(doc.diagnostic(where, codes.BAD_EXTENDS, f"'extends' makes a cycle: {cycle}"))
        return None
    if len(chain) >= MAX_EXTENDS_DEPTH:
        out.append(
            doc.diagnostic(
                where, codes.BAD_EXTENDS, f"'extends' chain deeper than {MAX_EXTENDS_DEPTH}"
            )
        )
        return None
    if not path.is_file():
        builtins = ", ".join(BUILTIN_BACKENDS)
        out.append(
            doc.diagnostic(
                where,
                codes.BAD_EXTENDS,
                f"base '{spec.extends}' is neither a built-in backend nor a file",
                f"built-ins: {builtins}; a path is relative to this spec file",
            )
        )
        return None
    try:
        return _compile_path(path, resolver, chain)
    except SpecError as exc:
        out.extend(exc.diagnostics)
        out.append(doc.diagnostic(where, codes.BAD_EXTENDS, f"base '{spec.extends}' has errors"))
        return None
