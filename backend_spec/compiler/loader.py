"""The load pipeline: bytes -> text -> data with positions -> model -> BackendConfig.

Also where ``extends`` and ``remove`` are applied, since a base may itself be a spec file.
Every problem in a spec, at any stage, ends in :class:`SpecError`; nothing else escapes.
Misuse of the API (``loads(None)``, ``loads(b"...")``, ``load(None)``, a string as
``allow_imports``) raises ``TypeError``.

``extends`` is confined (docs/security.md): a base file must lie inside the directory tree of
the top spec (for ``loads``, of ``base_dir``), symlinks resolved, unless
``allow_extends_outside`` is set; a base's problems are summarised by code and place, never
quoted, so a spec cannot make bespec print another file's contents.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from backend_spec import _torch, codes
from backend_spec.compiler.compiler import Compiled, Compiler, Resolved
from backend_spec.compiler.meaning import meaning_errors
from backend_spec.compiler.view import SpecView
from backend_spec.diagnostics import Diagnostic, SpecError
from backend_spec.files import fingerprint
from backend_spec.ir import Backend, Entry, Origin
from backend_spec.ir.lift import lift
from backend_spec.ir.lower import LoweredBackendConfig, lower
from backend_spec.names.resolver import Resolver
from backend_spec.names.vocabulary import BUILTIN_BACKENDS, builtin_backend_config
from backend_spec.specfile.models import SpecModel
from backend_spec.specfile.source import KeyPath, SourceDoc, format_for, parse, read_text
from backend_spec.specfile.validate import validate

MAX_EXTENDS_DEPTH = 16
_View = TypeVar("_View", bound=SpecView)
#: Longest ``extends`` path accepted (PATH_MAX); longer ones are refused before any lookup.
MAX_EXTENDS_CHARS = 4096


#: The base files looked up by ``extends`` while :func:`recording_reads` is active.
_READS: ContextVar[list[tuple[str, str]] | None] = ContextVar("bespec_reads", default=None)


@contextmanager
def recording_reads() -> Iterator[list[tuple[str, str]]]:
    """Collect ``(path, fingerprint)`` of every base file an ``extends`` chain looks up
    meanwhile (found or not), taken before it is read: what a cached result depends on
    besides the spec's own bytes (:mod:`backend_spec.lint.cache`). The parsed document
    decides, so every spelling of ``extends`` the loader accepts is seen."""
    reads: list[tuple[str, str]] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


@dataclass(frozen=True)
class _Scope:
    """What one load may read: ``root`` confines base files (None: anywhere)."""

    resolver: Resolver
    root: Path | None


def load(
    path: str | os.PathLike[str],
    allow_imports: Iterable[str] | None = None,
    *,
    allow_extends_outside: bool = False,
) -> LoweredBackendConfig:
    """Load a spec file (``.yaml``/``.yml``/``.toml``) and return a torch ``BackendConfig``
    (one that keeps the spec's intermediate form, version 2 facts included).

    A base named by ``extends`` must lie inside the spec's folder tree unless
    ``allow_extends_outside`` is true.
    """
    compiled = compile_file(path, allow_imports, allow_extends_outside=allow_extends_outside)
    return lower(compiled.backend)


def loads(
    text: str,
    format: str = "yaml",
    allow_imports: Iterable[str] | None = None,
    *,
    file: str = "<string>",
    base_dir: str | os.PathLike[str] | None = None,
    allow_extends_outside: bool = False,
) -> LoweredBackendConfig:
    """Load spec text of the given format (``"yaml"`` or ``"toml"``) into a BackendConfig.

    ``base_dir`` anchors a relative ``extends`` path and confines base files (default: the
    current directory), unless ``allow_extends_outside``.
    """
    if not isinstance(text, str):
        hint = " (decode bytes first, or use load() for a file)" if isinstance(text, bytes) else ""
        raise TypeError(f"loads() needs the spec text as str, not {type(text).__name__}{hint}")
    fmt = format_for(file, format)
    anchor = Path(base_dir if base_dir is not None else ".")
    scope = _scope(allow_imports, anchor, allow_extends_outside)
    with _torch.quiet():
        run = lambda: _compile_text(text, file, fmt, scope, anchor, ())  # noqa: E731
        return lower(guarded(run, file).backend)


def compile_file(
    path: str | os.PathLike[str],
    allow_imports: Iterable[str] | None = None,
    *,
    allow_extends_outside: bool = False,
) -> Compiled:
    """Compile a spec file, keeping where each pattern came from (for ``bespec show``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load() needs a file path (str or Path), not {type(path).__name__}")
    scope = _scope(allow_imports, Path(path).parent, allow_extends_outside)
    with _torch.quiet():
        return guarded(lambda: _compile_path(Path(path), scope, ()), os.fspath(path))


def builtin_compiled(name: str) -> Compiled:
    """A torch built-in backend (a fresh config), each pattern's origin ``torch:NAME``."""
    return Compiled(builtin_backend(name), lifted_from=builtin_backend_config(name))


@cache
def builtin_backend(name: str) -> Backend:
    """The intermediate form of a torch built-in backend (lifted once: it is frozen)."""
    config = builtin_backend_config(name)
    origin = Origin(f"torch:{name}")
    return lift(config, dict.fromkeys(config._pattern_complex_format_to_config, origin))


def _scope(allow_imports: Iterable[str] | None, anchor: Path, outside: bool) -> _Scope:
    if isinstance(allow_imports, (str, bytes)):
        raise TypeError("allow_imports needs a list of module names, not a single string")
    root = None if outside else Path(os.path.realpath(anchor))
    return _Scope(Resolver(tuple(allow_imports or ())), root)


def guarded(build: Any, file: str = "<spec>") -> Any:
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
        raise SpecError([Diagnostic(file, 1, 1, codes.TOO_DEEP, "nesting too deep")]) from None
    except Exception as exc:  # a bug or a torch error on strange input: still a SpecError
        raise SpecError(
            [
                Diagnostic(
                    file,
                    1,
                    1,
                    codes.INTERNAL,
                    f"internal error while loading: {type(exc).__name__}: {exc}",
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
            [Diagnostic(file, 1, 1, codes.UNREADABLE, str(exc), "use .yaml, .yml or .toml")]
        ) from None
    return parse(read_text(path), file, fmt, recover=True)


def _compile_path(path: Path, scope: _Scope, chain: tuple[Path, ...]) -> Compiled:
    doc = read_source(path)
    return _compile_doc(doc, scope, path.parent, (*chain, Path(os.path.realpath(path))))


def _compile_text(
    text: str, file: str, fmt: str, scope: _Scope, base_dir: Path, chain: tuple[Path, ...]
) -> Compiled:
    return _compile_doc(parse(text, file, fmt, recover=True), scope, base_dir, chain)


def _compile_doc(
    doc: SourceDoc, scope: _Scope, base_dir: Path, chain: tuple[Path, ...]
) -> Compiled:
    built = build(doc, scope.resolver, base_dir, chain, root=scope.root)
    problems = built.diagnostics
    if built.spec is not None:
        # Checked on every entry that validated: reported with the file's other errors.
        problems = [*problems, *meaning_errors(view_of(built))]
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
    #: Each pattern entry's resolution (by index), made once: the checks' view reads it.
    resolved: dict[int, Resolved] = field(default_factory=dict)
    #: The names resolved outside pattern entries (``remove``): key path -> object or problem.
    names: dict[KeyPath, Any] = field(default_factory=dict)


def build(
    doc: SourceDoc,
    resolver: Resolver,
    base_dir: Path,
    chain: tuple[Path, ...] = (),
    *,
    root: Path | None | str = "base_dir",
) -> Built:
    """Validate (with recovery) and compile a parsed spec, collecting schema, name, reference
    and ``extends`` errors of the whole file; ``compiled`` is None when there is any.

    ``root`` confines ``extends`` files: by default ``base_dir``'s tree; None lifts it."""
    if isinstance(root, str):
        root = Path(os.path.realpath(base_dir))
    spec, problems = validate(doc)
    problems[:0] = doc.diagnostics  # duplicate keys, found while parsing
    if spec is None:
        return Built(doc, None, None, problems)
    compiler = Compiler(doc, spec, resolver)
    entries = compiler.compile_patterns()
    graph_inputs = compiler.graph_inputs()
    passes = compiler.passes()
    removals = compiler.removal_keys()
    base = _base(doc, spec, _Scope(resolver, root), base_dir, chain, compiler.diagnostics)
    if "remove" in spec.model_fields_set and not spec.extends and not spec.set_aside(("extends",)):
        compiler.problem(
            ("remove",),
            codes.REMOVE_WITHOUT_EXTENDS,
            "'remove' needs 'extends'",
        )
    problems.extend(compiler.diagnostics)
    if problems:
        return Built(doc, spec, None, problems, compiler.resolved, compiler.names)
    # A dict keeps torch's order: a key set again keeps its place, as in a BackendConfig.
    table = {entry.key: entry for entry in base} if base is not None else {}
    _remove(table, removals, doc, spec, problems)
    table.update((entry.key, entry) for entry in entries)
    sharing = spec.input_sharing
    if base is not None:  # inherited, unless the spec sets its own
        graph_inputs = base.graph_inputs if graph_inputs is None else graph_inputs
        sharing = base.input_sharing if sharing is None else sharing
        passes = (
            passes if spec.transform_for_annotation is not None else base.transform_for_annotation
        )
    backend = Backend(
        spec.name,
        tuple(table.values()),
        graph_inputs,
        sharing,
        version=spec.spec_version,
        transform_for_annotation=passes,
    )
    result = Compiled(backend, doc=doc, spec=spec)
    return Built(
        doc, spec, None if problems else result, problems, compiler.resolved, compiler.names
    )


def view_of(built: Built, kind: type[_View] = SpecView) -> _View:  # type: ignore[assignment]
    """The checks' view of a spec that validated (``built.spec`` is set); ``kind`` is the
    view's class (the linter's adds what only rules ask)."""
    assert built.spec is not None
    return kind(built.doc, built.spec, built.resolved, built.names, built.compiled)


def _remove(
    table: dict[Any, Entry],
    removals: list[tuple[Any, Any]],
    doc: SourceDoc,
    spec: SpecModel,
    out: list[Diagnostic],
) -> None:
    for path, key in removals:
        if key in table:
            del table[key]
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
    scope: _Scope,
    base_dir: Path,
    chain: tuple[Path, ...],
    out: list[Diagnostic],
) -> Backend | None:
    """The base named by ``extends`` (None, with a diagnostic, when unusable)."""
    if spec.extends is None:
        return None
    where = ("extends",)
    if spec.extends in BUILTIN_BACKENDS:
        return builtin_backend(spec.extends)
    reads = _READS.get()
    if reads is not None and "\0" not in spec.extends and len(spec.extends) <= MAX_EXTENDS_CHARS:
        # Before reading: a base edited meanwhile can only cause a miss.
        looked_up = os.path.join(base_dir, spec.extends)
        reads.append((looked_up, fingerprint(looked_up)))
    path, problem = _base_path(spec.extends, base_dir, scope.root)
    if path is None:
        out.append(doc.diagnostic(where, codes.BAD_EXTENDS, problem, _EXTENDS_HINT))
        return None
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
    try:
        return _compile_path(path, scope, chain).backend
    except SpecError as exc:
        out.append(doc.diagnostic(where, codes.BAD_EXTENDS, _base_errors(exc.diagnostics)))
        return None


_EXTENDS_HINT = (
    f"name a built-in ({', '.join(BUILTIN_BACKENDS)}) or a spec file inside this spec's folder "
    "(relative to it); --allow-extends-outside / allow_extends_outside lifts the confinement"
)


def _base_path(extends: str, base_dir: Path, root: Path | None) -> tuple[Path | None, str]:
    """The resolved base file, or None and why it cannot be used. Messages quote only the
    ``extends`` value of this spec, never anything read from elsewhere."""
    shown = repr(extends) if len(extends) <= 200 else f"{extends[:200]!r}..."
    if "\0" in extends:
        return None, f"base {shown} contains a NUL character"
    if len(extends) > MAX_EXTENDS_CHARS:
        return (
            None,
            f"base path is {len(extends)} characters long; the limit is {MAX_EXTENDS_CHARS}",
        )
    try:
        path = Path(os.path.realpath(base_dir / extends, strict=True))
    except FileNotFoundError:
        return None, f"base {shown} is neither a built-in backend nor an existing file"
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "cannot be resolved"
        return None, f"base {shown}: {reason}"
    if root is not None and root not in (path, *path.parents):
        return None, f"base {shown} lies outside this spec's folder ({root})"
    if not path.is_file():
        return None, f"base {shown} is not a regular file"
    return path, ""


def _base_errors(diagnostics: list[Diagnostic]) -> str:
    """A base's problems by place and code only: their messages may quote the other file."""
    places = ", ".join(f"{d.file}:{d.line}:{d.column} {d.code}" for d in diagnostics[:3])
    more = f" and {len(diagnostics) - 3} more" if len(diagnostics) > 3 else ""
    return f"the base has {len(diagnostics)} problem(s) ({places}{more}); run bespec on it"
