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

import hashlib
import os
import secrets
import stat
from pathlib import Path

_TEMP_ATTEMPTS = 8


def cache_folder() -> Path:
    """bespec's cache folder: ``$BESPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/bespec``, else
    ``~/.cache/bespec``. Everything kept there can be deleted at any time. Use it through
    :func:`trusted_cache`, which refuses a folder another user could write."""
    folder = os.environ.get("BESPEC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "bespec",
    )
    return Path(folder)


#: Cache folders refused in this process, with why (each said once: :func:`refused_caches`).
_REFUSED: dict[str, str] = {}
#: Permission bits that let another user write a folder.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def trusted_cache(sub: str = "", *, create: bool = False) -> Path | None:
    """The cache folder (or its subfolder ``sub``) when bespec may use it, else None.

    As pip does, a cache is used only when it is the user's own: a folder (the cache folder
    and ``sub``) owned by someone else, or that another user can write (group- or
    world-writable, a shared ``/tmp`` folder), is refused, since whoever writes it chooses what
    the next run reads. The refusal is recorded once, for the command line to note
    (:func:`refused_caches`). ``create`` makes missing folders, private (``0700``)."""
    folder = cache_folder()
    for where in (folder, folder / sub) if sub else (folder,):
        problem = _untrusted(where, create)
        if problem is not None:
            if problem:
                _REFUSED.setdefault(str(where), problem)
            return None
    return folder / sub if sub else folder


def refused_caches() -> list[str]:
    """One line per cache folder refused since the last call (each folder said once)."""
    lines = [
        f"cache folder {where} not used: {why}; bespec runs without it "
        "(fix: chmod go-w it, or set BESPEC_CACHE_DIR to a folder of your own)"
        for where, why in _REFUSED.items()
        if why
    ]
    for where in _REFUSED:
        _REFUSED[where] = ""
    return lines


def _untrusted(where: Path, create: bool) -> str | None:
    """Why ``where`` may not be used as a cache folder ("" when it only does not exist, or
    cannot be made), None when it may."""
    try:
        info = os.stat(where)
    except FileNotFoundError:
        if not create:
            return ""
        try:
            os.makedirs(where, mode=0o700, exist_ok=True)
            info = os.stat(where)
        except OSError:
            return ""
    except (OSError, ValueError):
        return ""
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and info.st_uid != uid:
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & _OTHERS_WRITE:
        return f"other users can write it (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


#: Flags of every read of a file in a cache folder: never block on a FIFO, never follow a
#: planted symlink (to ``/dev/zero``, or to a file of another user's choosing).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)


def read_cache_file(path: Path, limit: int) -> bytes | None:
    """A cache file's bytes, or None when it is missing, not a regular file (a directory, a
    FIFO, a symlink) or larger than ``limit``: a miss, never an error."""
    try:
        fd = os.open(path, _READ_FLAGS | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


#: Bytes of a file a fingerprint reads: the loader never reads more (8 MiB + 1, BS105).
_FINGERPRINT_BYTES = 8 * 2**20 + 1


def fingerprint(path: str) -> str:
    """What a cached result knows of a file it depended on: where the path resolves, and the
    hash and size of the bytes there (or that nothing readable is there). Equal fingerprints
    mean the loader would read the same bytes from the same place."""
    try:
        real = os.path.realpath(path)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return f"missing {path!r}"
    except (OSError, ValueError) as exc:
        return f"unreadable {path!r}: {type(exc).__name__} {getattr(exc, 'errno', '')}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return f"{real!r}: not a regular file ({stat.S_IFMT(info.st_mode):o})"
        digest = hashlib.sha256()
        left = _FINGERPRINT_BYTES
        while left > 0 and (chunk := os.read(fd, min(left, 2**20))):
            digest.update(chunk)
            left -= len(chunk)
        return f"{real!r}: {info.st_size} bytes, sha256 {digest.hexdigest()}"
    except OSError as exc:
        return f"unreadable {real!r}: {exc.errno}"
    finally:
        os.close(fd)


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
