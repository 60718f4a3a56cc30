"""``bespec compile SPEC --target pt2e -o quantizer.py``: the runtime and the table in one file.

The module is the runtime's own source (torch and torchao only, with the table types of
:mod:`.table` inlined) followed by the table as a Python literal and
``get_quantizer()``. Everything that came from the spec (labels, names) is
data written with ``repr``/``pprint``; nothing of it becomes code.
"""

from __future__ import annotations

import ast
import pprint
from pathlib import Path
from typing import Any

_RUNTIME = Path(__file__).with_name("runtime.py")
_TABLE = Path(__file__).with_name("table.py")
#: The runtime's one bespec import; the module inlines table.py (stdlib only) in its place.
_TABLE_IMPORT = "from backend_spec.pt2e.table import"


def generate_module(
    table: dict[str, Any], *, source: str, qat_table: dict[str, Any] | None = None
) -> str:
    """The standalone quantizer module for ``table`` (and ``qat_table``, the same spec compiled
    for ``prepare_qat_pt2e``) compiled from ``source``."""
    runtime = _RUNTIME.read_text(encoding="utf-8")
    body = []
    for line in runtime.splitlines()[_docstring_end(runtime) :]:
        body += _table_types() if line.startswith(_TABLE_IMPORT) else [line]
    header = [
        '"""A torchao pt2e Quantizer compiled by bespec; needs only torch and torchao.',
        "",
        "    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e",
        "    prepared = prepare_pt2e(torch.export.export(model, args).module(), get_quantizer())",
        "",
        "For QAT: prepare_qat_pt2e(exported training-mode model, get_quantizer(qat=True)).",
        "",
        "Generated file: edit the spec and recompile instead of editing it.",
        '"""',
    ]
    footer = [
        "",
        "",
        "#: The spec this table was compiled from.",
        f"SOURCE = {source!r}",
        "",
        "#: The rule table (plain data) that TableQuantizer interprets.",
        f"TABLE = {pprint.pformat(table, width=100, sort_dicts=False)}",
        "",
        "",
        "#: The same spec compiled for prepare_qat_pt2e (fake-quantizes, conv-bn chains whole).",
        f"QAT_TABLE = {pprint.pformat(qat_table, width=100, sort_dicts=False)}",
        "",
        "",
        "def get_quantizer(qat: bool = False, passes: tuple = ()) -> TableQuantizer:",
        '    """A fresh Quantizer for one model (it records its matches); ``qat=True`` for',
        "    prepare_qat_pt2e. ``passes``: the functions the table's transform_for_annotation",
        '    names, in order (the table holds their names only; it imports nothing)."""',
        "    if qat and QAT_TABLE is None:",
        '        raise ValueError("this module was compiled without a QAT table")',
        "    return TableQuantizer(QAT_TABLE if qat else TABLE, passes=tuple(passes))",
        "",
    ]
    return "\n".join(header + body + footer)


def _table_types() -> list[str]:
    """table.py without its docstring and ``from __future__`` line (the runtime has both)."""
    text = _TABLE.read_text(encoding="utf-8")
    lines = text.splitlines()[_docstring_end(text) :]
    return [line for line in lines if line != "from __future__ import annotations"]


def _docstring_end(text: str) -> int:
    module = ast.parse(text)
    first = module.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return first.end_lineno or 0
    return 0
