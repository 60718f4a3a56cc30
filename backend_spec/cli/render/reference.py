"""Reference pages generated from the code registry and the lint rules' docstrings.

``docs/codes.md`` (every code) and ``docs/rules.md`` (the lint rules at length) are written by
``make docs`` (``python -m backend_spec.cli.render.reference``); a test keeps them current, so
a code's text lives only in :mod:`backend_spec.codes` and a rule's explanation only in its
module's docstring.
"""

from __future__ import annotations

import sys
from pathlib import Path

from backend_spec.codes import REGISTRY

_STAGES = {
    "1": "reading the file",
    "2": "the schema",
    "3": "names",
    "4": "references between entries and files",
    "5": "lint rules (see [rules.md](rules.md))",
    "6": "the regression check",
    "7": "pt2e",
    "9": "export and internal errors",
}

RULES_INTRO = """\
# bespec lint rules

`bespec lint SPEC...` reports two kinds of problems:

* **Loader errors** (`BS1xx` parse, `BS2xx` schema, `BS3xx` names, `BS4xx` dtype config
  references and `extends`/`remove`, `BS900` internal): the spec does not load. They are always
  errors and are always reported; `--select`/`--ignore` do not apply to them.
* **Semantic rules** (`BS5xx`, below): the spec loads, but torch will not do what it seems to
  say. Each rule has a stable code and a slug; either (or a prefix of either) works in
  `--select`, `--ignore` and in `pyproject.toml`:

```toml
[tool.bespec.lint]
select = ["BS5"]          # default: every rule
ignore = ["unmatchable-pattern"]
strict = true             # warnings fail the run too (same as --strict)
```

On the command line `--select` replaces the project's list, `--ignore` adds to it. Exit status:
0 when there are no errors (warnings alone pass unless strict), 1 when there are, 2 on misuse
(no such file, bad option, a rule code that does not exist). Output formats: `text`
(`path:line:col: CODE message`), `json`, `github` (workflow annotations) and `sarif` (2.1.0,
for code scanning). `BS599` means a rule itself crashed on the file: please report it.

**torch's own backends.** The seven built-in backends (`specs/*.yaml`, exported from torch
2.13) lint without errors. They have warnings only for `BS512`: native, fbgemm, qnnpack, x86
and onednn list `method:hardsigmoid` and `method:hardsigmoid_`, and executorch lists
`method:leaky_relu`, none of which is a `torch.Tensor` method, so those entries never match.
"""


def codes_markdown() -> str:
    """Every registered code: id, slug, severity, summary and hint, grouped by stage."""
    out = [
        "# bespec diagnostic codes",
        "",
        "Generated from `backend_spec/codes.py` by `make docs`; do not edit by hand.",
        "Every diagnostic bespec prints carries one of these codes, with the file, line and column",
        "it is about.",
    ]
    stage = None
    for code in REGISTRY.values():
        if code.id[2] != stage:
            stage = code.id[2]
            out += ["", f"## {stage}xx: {_STAGES.get(stage, 'other')}", ""]
            out += ["| code | name | severity | meaning | fix |", "|---|---|---|---|---|"]
        out.append(
            f"| {code.id} | {code.slug} | {code.severity.value} | {_cell(code.summary)} "
            f"| {_cell(code.hint)} |"
        )
    return "\n".join(out) + "\n"


def rules_markdown() -> str:
    """The lint rules page: the intro, a table of rules and one section per rule."""
    from backend_spec.lint.registry import all_rules

    rules = all_rules()
    out = [RULES_INTRO.rstrip(), "", "| code | name | severity |", "|---|---|---|"]
    out += [f"| {r.id} | {r.name} | {r.severity.value} |" for r in rules]
    for rule in rules:
        out += ["", f"## {rule.id} {rule.name}", "", f"Severity: {rule.severity.value}", ""]
        out += [f"*{rule.summary}*", "", rule.doc]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


PAGES = {"codes.md": codes_markdown, "rules.md": rules_markdown}


def main(argv: list[str] | None = None) -> int:
    """Write the generated pages into the given folder (default ``docs``)."""
    folder = Path((argv if argv is not None else sys.argv[1:] or ["docs"])[0])
    from backend_spec.files import write_atomic

    for name, render in PAGES.items():
        write_atomic(folder / name, render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
