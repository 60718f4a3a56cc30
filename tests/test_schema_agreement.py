"""The JSON Schema and the loader agree: every edge case of tests/schema_cases gets the same
verdict from ``backend_spec.loads`` and from ``jsonschema`` (as an editor would see the file),
and that verdict is the expected one. The only allowed differences are what JSON Schema cannot
express, marked in the table: names that do not resolve, references between entries or files,
and the order of two fields."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

import backend_spec
from backend_spec.specfile.models import json_schema
from backend_spec.specfile.source import parse

CASES = YAML(typ="safe").load(
    (Path(__file__).parent / "schema_cases" / "cases.yaml").read_text(encoding="utf-8")
)
ALLOWED_DIFFERENCES = {"names", "references", "order"}


@cache
def validator() -> jsonschema.Draft202012Validator:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def as_json(data: Any) -> Any:
    """The document as JSON, as an editor's YAML language server hands it to the schema."""
    return json.loads(json.dumps(data))


def loader_accepts(text: str) -> bool:
    try:
        backend_spec.loads(text)
    except backend_spec.SpecError:
        return False
    return True


def test_the_corpus_is_large_and_its_differences_are_marked() -> None:
    assert len(CASES) >= 54
    assert len({case["name"] for case in CASES}) == len(CASES)
    assert {case["differs"] for case in CASES if "differs" in case} <= ALLOWED_DIFFERENCES


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_schema_and_loader_agree(case: dict[str, Any]) -> None:
    text = case["spec"]
    loader = loader_accepts(text)
    errors = [e.message for e in validator().iter_errors(as_json(parse(text, "c", "yaml").data))]
    schema = not errors
    assert loader is case["ok"], f"loader says {loader}"
    if "differs" in case:
        assert not loader and schema, "a marked difference: the schema accepts, the loader not"
    else:
        assert schema is loader, f"schema says {schema}: {errors}"
