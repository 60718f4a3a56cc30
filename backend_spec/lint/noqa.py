"""Inline suppressions: the ``# noqa`` comments of a spec file, and the findings they silence.

Two forms, in YAML and TOML alike, as in ruff and flake8:

* ``# noqa: BS507`` (one or more codes, separated by commas or blanks) at the end of a line
  silences those codes' findings reported on that line;
* ``# bespec: noqa: BS507`` on a line of its own silences those codes in the whole file.

Only lint rules can be silenced, and not the ones ``compile`` enforces (the runner says which
codes may be silenced): a file that does not load, or does not mean what it says, is an error
whatever its comments say. A bare ``# noqa`` (no codes) is not honoured: it would hide
findings nobody has read. The comments' own problems are two rules, ``invalid-noqa`` (a
comment that is not honoured) and ``unused-noqa`` (a code that silenced nothing), which run
after the others, on what the others found.

The comments come from the loader's parse (:meth:`SourceDoc.comments`): no second parse, and a
``#`` inside a string is text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from backend_spec import codes
from backend_spec.diagnostics import Diagnostic
from backend_spec.specfile.source import Comment, Position, SourceDoc

#: The rules about the comments themselves: they run after the others, and cannot be silenced.
RULES = (codes.INVALID_NOQA, codes.UNUSED_NOQA)

#: At most this many suppression comments are read per file (a spec has a handful); the
#: rest are reported once and not honoured.
MAX_DIRECTIVES = 1000
#: At most this many codes are read per comment (a real one names a few); the rest of a longer
#: list is reported once and not honoured, so a comment of millions of codes costs no more
#: than one of this many (docs/security.md, Resources).
MAX_CODES = 64

#: A directive starts the comment, or follows another hash in it (a reason, then the directive).
_DIRECTIVE = re.compile(r"(?:^|#)[ \t]*(?:(bespec)[ \t]*:[ \t]*)?noqa\b", re.IGNORECASE)
_COLON = re.compile(r"[ \t]*:[ \t]*")
#: One code of the list and the separator after it; the list is read one code at a time, so
#: that reading stops at :data:`MAX_CODES` whatever the comment's length.
_CODE = re.compile(r"([A-Za-z]+[0-9]+)(?:[ \t]*,[ \t]*|[ \t]+)?")


def _codes(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(offset, code) of the codes listed after ``: `` at ``start``: at most
    :data:`MAX_CODES` + 1 of them (one past the cap, to report it), never the whole list."""
    colon = _COLON.match(text, start)
    if colon is None:
        return
    at = colon.end()
    for _ in range(MAX_CODES + 1):
        code = _CODE.match(text, at)
        if code is None:
            return
        yield code.start(), code.group(1)
        at = code.end()


_BARE_HINT = "name the codes it silences: `# noqa: BS507` (or `# noqa: BS507, BS508`)"


@dataclass
class Mention:
    """One code named by one suppression comment."""

    code: str
    #: Where the code is written.
    position: Position
    file_wide: bool
    #: The comment is alone on its line (a line-level one there silences nothing).
    alone: bool = False
    used: bool = False


@dataclass
class Suppressions:
    """The suppression comments of one file, and which of their codes silenced something."""

    mentions: list[Mention] = field(default_factory=list)
    #: Comments that are not honoured: (where, message, hint).
    invalid: list[tuple[Position, str, str]] = field(default_factory=list)
    #: Codes comments may silence at all, and those of them whose rules ran (see :meth:`apply`).
    silenceable: frozenset[str] = frozenset()
    ran: frozenset[str] = frozenset()

    @classmethod
    def of(cls, doc: SourceDoc) -> Suppressions:
        found = cls()
        comments = doc.comments("noqa", MAX_DIRECTIVES)
        for comment in comments[:MAX_DIRECTIVES]:
            found._read(comment)
        if len(comments) > MAX_DIRECTIVES:
            extra = comments[MAX_DIRECTIVES]
            found.invalid.append(
                (
                    (extra.line, extra.column),
                    f"more than {MAX_DIRECTIVES} noqa comments; this one and those after it "
                    "are not honoured",
                    "silence a code for the whole file with `# bespec: noqa: CODE`, or use "
                    "--ignore",
                )
            )
        return found

    def _read(self, comment: Comment) -> None:
        directive = _DIRECTIVE.search(comment.text)
        if directive is None:
            return  # a comment that only mentions noqa
        where = (comment.line, comment.column)
        file_wide = directive.group(1) is not None
        listed = list(_codes(comment.text, directive.end()))
        if not listed:
            form = "# bespec: noqa" if file_wide else "# noqa"
            self.invalid.append((where, f"`{form}` without codes is not honoured", _BARE_HINT))
            return
        if file_wide and not comment.alone:
            self.invalid.append(
                (
                    where,
                    "a file-wide `# bespec: noqa` must be on a line of its own; it is not "
                    "honoured here",
                    "move it to a line of its own, or write `# noqa: CODE` for this line",
                )
            )
            return
        for count, (start, code) in enumerate(listed):
            at = (comment.line, comment.column + 1 + start)  # the text follows the #
            if count == MAX_CODES:
                self.invalid.append(
                    (
                        at,
                        f"a noqa comment names at most {MAX_CODES} codes; this code and those "
                        "after it are not honoured",
                        "silence fewer codes per comment, or turn rules off with --ignore",
                    )
                )
                return
            self.mentions.append(Mention(code.upper(), at, file_wide, comment.alone))

    def apply(
        self, found: Iterable[Diagnostic], ran: Iterable[str], silenceable: Iterable[str]
    ) -> list[Diagnostic]:
        """The findings no comment silences; marks the codes that silenced something. Only
        codes in ``silenceable`` are silenced; ``ran`` are the rules that looked (the others'
        codes silence nothing here, but are not unused either)."""
        self.silenceable = frozenset(silenceable)
        self.ran = self.silenceable & frozenset(ran)
        if not self.mentions:
            return list(found)
        by_line: dict[tuple[int, str], Mention] = {}
        file_wide: dict[str, Mention] = {}
        for mention in self.mentions:
            if mention.file_wide:
                file_wide.setdefault(mention.code, mention)
            else:
                by_line.setdefault((mention.position[0], mention.code), mention)
        kept = []
        for diagnostic in found:
            code = str(diagnostic.code)
            hit = None
            if code in self.silenceable:
                hit = by_line.get((diagnostic.line, code)) or file_wide.get(code)
            if hit is None:
                kept.append(diagnostic)
            else:
                hit.used = True
        return kept

    def unused(self) -> Iterator[tuple[Mention, str, str]]:
        """Each named code that silenced nothing, with why and what to do (after
        :meth:`apply`). Codes of rules that did not run (deselected) are left alone."""
        for mention in self.mentions:
            if mention.used:
                continue
            registered = codes.lookup(mention.code)
            if registered is None:
                yield mention, f"{mention.code} is not a bespec code", "see docs/codes.md"
            elif mention.code not in self.silenceable:
                yield (
                    mention,
                    f"{mention.code} ({registered.slug}) cannot be suppressed by a comment",
                    "loader errors, the errors compile enforces and the noqa rules are always "
                    "reported: fix the problem (a rule can be turned off with --ignore)",
                )
            elif mention.code in self.ran:
                yield mention, *_nothing_silenced(mention)


def _nothing_silenced(mention: Mention) -> tuple[str, str]:
    if mention.file_wide:
        return f"no {mention.code} finding in this file to suppress", "remove the code"
    if mention.alone:
        return (
            f"`# noqa: {mention.code}` alone on its line silences nothing",
            "put it at the end of the line the finding is reported on, or write "
            f"`# bespec: noqa: {mention.code}` for the whole file",
        )
    return f"no {mention.code} finding on this line to suppress", "remove the code"
