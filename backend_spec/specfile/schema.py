"""The JSON Schema of the format, as shipped inside the package.

The schema is generated from the models (:func:`backend_spec.specfile.models.json_schema`) by
``make schema`` into two identical files: ``backend_spec/schema/backend-spec.schema.json``, which
the wheel ships, and ``schemas/backend-spec.schema.json`` at the top of the repository, where
editors, ``check-jsonschema`` and the repository's own specs find it (:data:`COPIES`). A test
keeps both equal to the models. Commands read the shipped file, so ``bespec schema`` and
``bespec init`` need neither torch nor pydantic. Spec files point editors at it with a
first-line comment (yaml-language-server for YAML, taplo for TOML); :func:`schema_comment`
writes that line.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

#: File name of the schema, in the package and wherever bespec writes a copy beside a spec.
SCHEMA_NAME = "backend-spec.schema.json"

#: Where ``make schema`` writes the schema, relative to the repository's root: the packaged copy
#: and the top-level one (the package's files must live inside it, so there are two).
COPIES = (Path("backend_spec") / "schema" / SCHEMA_NAME, Path("schemas") / SCHEMA_NAME)

_COMMENTS = {
    "yaml": "# yaml-language-server: $schema={ref}",
    "toml": "#:schema {ref}",
}


def schema_text() -> str:
    """The shipped schema, as JSON text ending in a newline."""
    return resources.files("backend_spec").joinpath("schema", SCHEMA_NAME).read_text("utf-8")


def generated_text() -> str:
    """The schema generated from the models now (what the shipped file must equal)."""
    from backend_spec.specfile.models import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"


def schema_comment(fmt: str, ref: str = SCHEMA_NAME) -> str:
    """The first line of a spec file that points editors at the schema at ``ref`` (a path
    relative to the spec file, or a URL)."""
    return _COMMENTS["toml" if fmt == "toml" else "yaml"].format(ref=ref)


def write_beside(spec_path: Path) -> Path | None:
    """Write the schema next to ``spec_path`` (where the default comment points), unless an
    identical copy is already there. Returns the path written, or None."""
    from backend_spec.files import write_atomic

    target = spec_path.parent / SCHEMA_NAME
    text = schema_text()
    try:
        if target.read_text(encoding="utf-8") == text:
            return None
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(target, text)
    return target


def main() -> int:
    """Regenerate both copies of the schema from the models (``make schema``, run in a checkout)."""
    from backend_spec.files import write_atomic

    root = Path(__file__).resolve().parents[2]
    text = generated_text()
    for copy in COPIES:
        write_atomic(root / copy, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
