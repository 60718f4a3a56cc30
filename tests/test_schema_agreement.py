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
from backend_spec.names import dtypes as torch_dtypes
from backend_spec.names.dtypes import dtype_names, dtype_range
from backend_spec.specfile import models
from backend_spec.specfile.dtypes import SPEC_DTYPE_RANGES, SPEC_DTYPES
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


def test_the_schema_does_not_change_with_the_installed_torch(monkeypatch) -> None:
    # A torch with other dtypes (one gone, one new, other ranges) gives the same schema: the
    # format version, not the machine, fixes what a file may say.
    shipped = json_schema()
    other_torch = (dtype_names() - {"quint8"}) | {"float2_new"}
    monkeypatch.setattr(torch_dtypes, "dtype_names", lambda: frozenset(other_torch))
    monkeypatch.setattr(torch_dtypes, "dtype_range", lambda name: (0, 1))
    monkeypatch.setattr(models, "dtype_range", lambda name: (0, 1))
    assert json_schema() == shipped


def test_the_format_dtype_list_covers_the_installed_torch() -> None:
    # A subset, not equality: the list may name dtypes of a newer torch (bcomplex32, 2.14).
    assert dtype_names() <= SPEC_DTYPES, "a new torch dtype needs a new format version"
    installed_ranges = {n: dtype_range(n) for n in dtype_names() if dtype_range(n) is not None}
    assert installed_ranges == {n: r for n, r in SPEC_DTYPE_RANGES.items() if n in dtype_names()}
