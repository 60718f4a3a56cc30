"""The one way bespec writes a file: complete or untouched, never partial, never elsewhere.

Every writer of the package (``compile -o``, ``export -o``, ``docs -o``, ``fmt``,
``--update-golden``, ``--emit-test``, the reference docs) goes through :func:`write_atomic`:

- the text goes to a temporary file created *exclusively* (``O_EXCL | O_NOFOLLOW``, random
  name) in the target's folder, then is renamed over the target: a planted ``<target>.tmp``
  symlink cannot redirect the write, and a crash leaves the old file whole;
- an existing target keeps its mode; a new file gets ``0666 & ~umask`` (0644 under umask 022),
  as any editor would create it;
- a symlinked target is followed: the file it points to is replaced and the link stays a link;
- a target with several hard links is rewritten in place (after the new text is complete in
  memory), so every name keeps seeing the same file; that one case is not atomic;
- only a regular file (or a new name) is written: a directory, device node, FIFO or socket is
  refused, as is a missing folder. Those raise :class:`WriteError`, which the CLI reports as
  misuse (exit 2).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

_TEMP_ATTEMPTS = 8


def cache_folder() -> Path:
    """bespec's cache folder: ``$BESPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/bespec``, else
    ``~/.cache/bespec``. Everything kept there can be deleted at any time."""
    folder = os.environ.get("BESPEC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "bespec",
    )
    return Path(folder)


def suffix_of(path: str | os.PathLike[str]) -> str:
    """A file's suffix in lower case, the one way every reader and writer tells a spec's
    format from its name: ``x.TOML`` is read and written as TOML, ``x.Yml`` as YAML."""
    return Path(path).suffix.lower()


class WriteError(Exception):
    """An output path bespec refuses or fails to write; the message names the path and why."""


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` newlines) to ``path`` safely; WriteError when it cannot."""
    shown = os.fspath(path)
    data = text.encode("utf-8")
    target, existing = _checked_target(shown)
    try:
        if existing is not None and existing.st_nlink > 1:
            _write_in_place(target, data, existing)
        else:
            _replace(target, data, existing)
    except OSError as exc:
        raise WriteError(f"{shown}: cannot write: {exc.strerror or exc}") from None


def ensure_writable(path: str | os.PathLike[str]) -> None:
    """Raise WriteError now if ``path`` could not be written, before a long run produces text."""
    _checked_target(os.fspath(path))


def _checked_target(shown: str) -> tuple[Path, os.stat_result | None]:
    """The file to write (symlinks followed) and its stat if it exists; WriteError if unusable."""
    if "\0" in shown:
        raise WriteError(f"{shown!r}: a path cannot contain a NUL character")
    try:
        target = Path(os.path.realpath(shown))
    except (OSError, ValueError) as exc:
        raise WriteError(f"{shown}: cannot write: {exc}") from None
    existing = _existing_regular(target, shown)
    if not target.parent.is_dir():
        raise WriteError(f"{shown}: folder {target.parent} does not exist; create it first")
    return target, existing


def _existing_regular(target: Path, shown: str) -> os.stat_result | None:
    """The target's stat when it exists (it must be a regular file), else None."""
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink loop, a too-long name, a component that is a file
        raise WriteError(f"{shown}: cannot write: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise WriteError(f"{shown}: is a directory; give a file name")
    if not stat.S_ISREG(info.st_mode):
        raise WriteError(f"{shown}: not a regular file (a device, FIFO or socket); refusing")
    return info


def _replace(target: Path, data: bytes, existing: os.stat_result | None) -> None:
    fd, tmp = _exclusive_temp(target)
    try:
        try:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _exclusive_temp(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target``; mode 0666 & ~umask (the kernel applies it)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_TEMP_ATTEMPTS):
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise WriteError(f"{target}: cannot create a temporary file beside it")


def _write_in_place(target: Path, data: bytes, existing: os.stat_result) -> None:
    """Rewrite a hard-linked file's content, keeping its inode (and so its other names)."""
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (existing.st_dev, existing.st_ino):
            raise WriteError(f"{target}: changed while being written; nothing written")
        os.ftruncate(fd, 0)
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
