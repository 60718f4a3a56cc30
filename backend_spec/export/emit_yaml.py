"""Export stage 4 (YAML): lay a :class:`SpecDocument` out as a readable YAML spec.

Short lists and mappings (``pattern: [nn.Conv2d, nn.ReLU]``, dtype mappings) go in flow
style, long ones in block style; patterns are grouped by family under comments. Floats are
written with ``repr`` precision and always with a dot (``1.0e-05``) so that YAML 1.1 parsers
read them as floats too.
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import SingleQuotedScalarString

from backend_spec.export.document import SpecDocument
from backend_spec.specfile.schema import SCHEMA_NAME, schema_comment

#: Longest flow-style list (as rendered) before it switches to block style.
_FLOW_LIMIT = 72

#: Pattern keys that stay in flow style at any length: a pattern reads as one expression.
_ALWAYS_FLOW = frozenset({"pattern", "pattern_complex_format", "fuser_method"})


def float_text(value: float) -> str:
    """The shortest text that reads back as exactly ``value`` in YAML 1.1 and 1.2."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}{e}{exponent}"


class _Representer(RoundTripRepresenter):
    """ruamel's round-trip representer with exact, portable floats (a private subclass, so
    other users of ruamel in the process are unaffected)."""

    def represent_float(self, data: float) -> Any:
        return self.represent_scalar("tag:yaml.org,2002:float", float_text(data))


_Representer.add_representer(float, _Representer.represent_float)


def _flow_scalar(value: Any) -> Any:
    """Quote strings that libyaml misreads inside ``[...]``/``{...}``, such as
    ``method:view`` (plain in block context, where every parser reads it right)."""
    if isinstance(value, str) and any(ch in value for ch in ":#,[]{}"):
        return SingleQuotedScalarString(value)
    return value


def _flow_length(value: Any) -> int:
    if isinstance(value, dict):
        return sum(len(str(k)) + _flow_length(v) + 4 for k, v in value.items()) + 2
    if isinstance(value, list):
        return sum(_flow_length(v) + 2 for v in value) + 2
    return len(str(value))


def _node(value: Any, force_flow: bool = False, in_flow: bool = False) -> Any:
    """ruamel nodes for plain data: flow style when short (or forced), block otherwise."""
    if not isinstance(value, (dict, list)):
        return _flow_scalar(value) if in_flow else value
    flow = in_flow or force_flow or _flow_length(value) <= _FLOW_LIMIT
    if isinstance(value, dict):
        node: Any = CommentedMap((k, _node(v, force_flow, flow)) for k, v in value.items())
    else:
        node = CommentedSeq(_node(v, force_flow, flow) for v in value)
    if flow:
        node.fa.set_flow_style()
    return node


def _always_flow(key: str, value: Any) -> bool:
    """Patterns and short fuser forms stay on one line; a factory call may need several."""
    return key in _ALWAYS_FLOW and not _has_call(value)


def _has_call(value: Any) -> bool:
    if isinstance(value, dict):
        return "call" in value or any(_has_call(v) for v in value.values())
    return isinstance(value, list) and any(_has_call(v) for v in value)


def _dtype_configs_node(dtype_configs: dict[str, dict[str, Any]]) -> CommentedMap:
    return CommentedMap(
        (name, CommentedMap((k, _node(v, force_flow=True)) for k, v in doc.items()))
        for name, doc in dtype_configs.items()
    )


def _patterns_node(doc: SpecDocument) -> CommentedSeq:
    patterns = CommentedSeq(
        CommentedMap((k, _node(v, force_flow=_always_flow(k, v))) for k, v in entry.items())
        for entry in doc.patterns
    )
    previous = None
    for index, family in enumerate(doc.families):
        if family != previous:
            before = family if index == 0 else f"\n{family}"
            patterns.yaml_set_comment_before_after_key(index, before=before, indent=2)
            previous = family
    return patterns


def emit_yaml(doc: SpecDocument, schema_ref: str = SCHEMA_NAME) -> str:
    """The YAML text of a spec document; its first line points editors at ``schema_ref``."""
    root = CommentedMap()
    root["spec_version"] = doc.spec_version
    root["name"] = doc.name
    if doc.extends is not None:
        root["extends"] = doc.extends
    if doc.remove:
        root["remove"] = CommentedSeq(_node(item, force_flow=True) for item in doc.remove)
    if doc.dtype_configs:
        root["dtype_configs"] = _dtype_configs_node(doc.dtype_configs)
        root.yaml_set_comment_before_after_key("dtype_configs", before="\n")
    if doc.graph_inputs is not None:
        root["graph_inputs"] = doc.graph_inputs
    if doc.input_sharing is not None:
        root["input_sharing"] = doc.input_sharing
    if doc.transform_for_annotation:
        root["transform_for_annotation"] = CommentedSeq(
            _node(item, force_flow=True) for item in doc.transform_for_annotation
        )
    root["patterns"] = _patterns_node(doc)
    root.yaml_set_comment_before_after_key("patterns", before="\n")

    yaml = YAML(typ="rt")
    yaml.Representer = _Representer
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 100
    stream = io.StringIO()
    yaml.dump(root, stream)
    # ruamel leaves a space where it wraps a long flow mapping; no value here spans lines,
    # so trailing whitespace is never significant.
    lines = [line.rstrip() for line in stream.getvalue().splitlines()]
    return "\n".join([schema_comment("yaml", schema_ref), *lines]) + "\n"
