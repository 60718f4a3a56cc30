"""Reference pages generated from the code registry, the lint rules' docstrings and the models.

``docs/codes.md`` (every code) and ``docs/rules.md`` (the lint rules at length) are written by
``make docs`` (``python -m backend_spec.cli.render.reference``); a test keeps them current, so
a code's text lives only in :mod:`backend_spec.codes` and a rule's explanation only in its
module's docstring. ``docs/format.md`` is written by hand except its key tables: each sits
between ``<!-- keys: MODEL -->`` and ``<!-- /keys -->`` and is regenerated from the JSON Schema
of the models (:data:`KEY_TABLES`), so a key's description lives only in ``specfile/models.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from backend_spec.codes import REGISTRY
from backend_spec.specfile.fields import PT2E_PATTERN_FIELDS

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
  `--select`, `--ignore` and in the project's `pyproject.toml` (the working directory's; one
  beside a spec is never read):

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

## Suppressing a finding

A comment silences a rule's finding where it stands, in YAML and TOML alike (as ruff's and
flake8's `# noqa` do):

```yaml
# bespec: noqa: BS508
dtype_configs:
  spare: {input_dtype: qint8, output_dtype: qint8}  # noqa: BS507
```

* `# noqa: BS507` at the end of a line silences the `BS507` findings reported on that line
  (the `file:LINE:col` of the finding). Several codes: `# noqa: BS507, BS508`. A reason may
  come first: `# kept for the int4 path  # noqa: BS507`.
* `# bespec: noqa: BS507` on a line of its own silences `BS507` in the whole file.
* A bare `# noqa` or `# bespec: noqa`, without codes, is not honoured (it would hide findings
  nobody has read) and is reported as `BS520`; so is a file-wide comment that is not alone on
  its line.
* Loader errors (`BS1xx`–`BS4xx`, `BS9xx`) and the errors `compile` enforces (`BS501`,
  `BS511`) cannot be silenced: they stay reported, and the comment's code is reported as
  `BS521`. So is a code that silenced nothing (no such finding there, or no such code), like
  ruff's `RUF100`. Codes of rules that did not run (`--select`, `--ignore`) are not reported.
* A `#` inside a quoted or block string is text, not a comment. `bespec fmt` keeps the
  comments on the lines they are about.

`compile` applies the same comments to the warnings it prints. `--ignore` and
`[tool.bespec.lint]` still turn a rule off for a whole run.
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
    out = [RULES_INTRO.rstrip(), "", "## Rules", "", "| code | name | severity |", "|---|---|---|"]
    out += [f"| {r.id} | {r.name} | {r.severity.value} |" for r in rules]
    for rule in rules:
        out += ["", f"## {rule.id} {rule.name}", "", f"Severity: {rule.severity.value}", ""]
        out += [f"*{rule.summary}*", "", rule.doc]
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


PAGES = {"codes.md": codes_markdown, "rules.md": rules_markdown}

# -- key tables of docs/format.md -------------------------------------------------------------

#: Table name in docs/format.md -> where its keys are in the JSON Schema.
KEY_TABLES = {
    "spec": (),
    "pattern": ("$defs", "PatternModel"),
    "dtype_config": ("$defs", "DTypeConfigModel"),
    "constrained_dtype": ("$defs", "DTypeWithConstraintsModel"),
}

#: Keys of the pt2e flow only (FX ignores them): left out of their model's table, each has a
#: section of its own with a one-row table (``<!-- keys: pattern.aten -->``).
PT2E_KEYS = {
    "spec": ("graph_inputs", "input_sharing", "transform_for_annotation"),
    "pattern": PT2E_PATTERN_FIELDS,
}

_KEY_BLOCK = re.compile(r"(<!-- keys: ([\w.]+) -->\n)(.*?)(<!-- /keys -->)", re.DOTALL)

_REF_WORDS = {
    "DTypeConfigModel": "dtype config",
    "DTypeWithConstraintsModel": "dtype with constraints",
    "PatternModel": "pattern entry",
    "SequentialFuser": "`{sequential: CLASS}`",
    "FunctionForm": "function form (mapping)",
    "ComplexPattern": "nested list of names",
}


def key_table(name: str) -> str:
    """The Markdown table of one model's keys: key, value, meaning, format version. ``name``
    is a model of :data:`KEY_TABLES` (its keys but the pt2e ones) or ``MODEL.KEY`` (one key's
    row)."""
    from backend_spec.specfile.models import json_schema

    model, _, only = name.partition(".")
    node: Any = json_schema()
    for part in KEY_TABLES[model]:
        node = node[part]
    required = set(node.get("required", ()))
    setters = _setters() if model == "pattern" and not only else None
    head = "| key | value | meaning | since |" + (" torch setter |" if setters else "")
    out = [head, "|---" * head.count(" |") + "|"]
    skipped = PT2E_KEYS.get(model, ())
    for key, prop in node["properties"].items():
        if (only and key != only) or (not only and key in skipped):
            continue
        meaning = prop.get("description") or _inner_description(prop)
        if key in required:
            meaning = f"**Required.** {meaning}"
        since = prop.get("x-since", 1)
        row = f"| `{key}` | {_cell(type_text(prop))} | {_cell(meaning)} | {since} |"
        if setters is not None:
            row += f" {f'`{setters[key]}`' if key in setters else '—'} |"
        out.append(row)
    return "\n".join(out) + "\n"


def _setters() -> dict[str, str]:
    """The ``BackendPatternConfig`` setter of each pattern key (the field table's)."""
    from backend_spec.specfile.fields import PATTERN_FIELDS

    return {field.key: field.setter for field in PATTERN_FIELDS}


def type_text(node: dict[str, Any]) -> str:
    """A few words for the values a JSON Schema node accepts (``name``, ``list of names``)."""
    if "$ref" in node:
        return _REF_WORDS.get(node["$ref"].rsplit("/", 1)[-1], "mapping")
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives:
        words = list(dict.fromkeys(type_text(n) for n in alternatives if n.get("type") != "null"))
        if "number" in words and "integer" in words:
            words.remove("integer")
        return " or ".join(words)
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node and len(node["enum"]) <= _LONGEST_ENUM:
        return " or ".join(f"`{value}`" for value in node["enum"])
    kind = node.get("type")
    if kind == "string":
        return _string_text(node)
    if kind == "array":
        items = type_text(node.get("items", {}))
        count = _count(node.get("minItems"), node.get("maxItems"))
        return f"list, each a {items}" if " or " in items else f"list of {count}{_plural(items)}"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"mapping to {type_text(values)}" if isinstance(values, dict) else "mapping"
    return {"integer": "integer", "number": "number", "boolean": "`true` / `false`"}.get(
        str(kind), "any"
    )


#: An enum with more values than this is named by its kind (``dtype``), not listed.
_LONGEST_ENUM = 6


def _string_text(node: dict[str, Any]) -> str:
    description = node.get("description", "")
    if description.startswith("How observers are inserted"):
        return "observation type"
    if node.get("maxLength") == 512:
        return "name"
    if description.startswith("A torch.dtype"):
        return "dtype"
    if "dtype config" in description:
        return "dtype config name"
    return "string"


def _count(low: int | None, high: int | None) -> str:
    if high is None:
        return "" if low is None or low <= 1 else f"{low} or more "
    return f"{low}–{high} " if low != high else f"{low} "


def _plural(noun: str) -> str:
    """``name`` -> ``names``, ``pattern entry`` -> ``pattern entries``; a phrase such as
    ``nested list of names`` is plural enough as it is."""
    if " of " in noun or noun.endswith("s") or noun.startswith("`"):
        return noun
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


def _inner_description(node: dict[str, Any]) -> str:
    for child in node.get("anyOf", ()) or node.get("oneOf", ()):
        if child.get("description"):
            return child["description"]
    return ""


def fill_key_tables(text: str) -> str:
    """``text`` (docs/format.md) with every key table regenerated."""
    return _KEY_BLOCK.sub(lambda m: m[1] + key_table(m[2]) + m[4], text)


#: Hand-written pages whose marked parts are generated: name -> text -> text.
FILLED = {"format.md": fill_key_tables}


def main(argv: list[str] | None = None) -> int:
    """Write the generated pages into the given folder (default ``docs``)."""
    folder = Path((argv if argv is not None else sys.argv[1:] or ["docs"])[0])
    from backend_spec.files import write_atomic

    for name, render in PAGES.items():
        write_atomic(folder / name, render())
    for name, fill in FILLED.items():
        path = folder / name
        write_atomic(path, fill(path.read_text(encoding="utf-8")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
