"""The registry of every diagnostic code bespec can emit: one place, one meaning per code.

A code is a ``str`` (``"BS300"``) that also carries its slug, severity, one-line summary and a
default hint, so call sites write ``codes.UNKNOWN_NAME`` and reporters, SARIF metadata and
``docs/codes.md`` all read the same entry. Lint rules (``BS5xx``) are registered here too; the
rule module's docstring adds the long explanation (see :mod:`backend_spec.lint.registry`).

Numbering: 1xx source text, 2xx schema, 3xx names, 4xx references between entries and files,
5xx lint rules, 6xx check, 7xx pt2e (lint rules included), 9xx export and internal errors.

Adding a code is one edit: a ``_register(...)`` line below. ``tests/test_codes.py`` fails when
the package uses a code that is not registered, or when ``docs/codes.md`` is stale.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["REGISTRY", "Code", "Severity", "lookup"]


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    #: A fact worth knowing that is not a problem (never fails a run, even with --strict).
    INFO = "info"

    @property
    def github_level(self) -> str:
        """The workflow-command level: error, warning or notice."""
        return "notice" if self is Severity.INFO else self.value

    @property
    def sarif_level(self) -> str:
        """The SARIF result level: error, warning or note."""
        return "note" if self is Severity.INFO else self.value


class Code(str):
    """A diagnostic code: compares and serialises as its id, and knows what it means."""

    slug: str
    severity: Severity
    summary: str
    hint: str

    def __new__(cls, id: str, slug: str, severity: Severity, summary: str, hint: str = "") -> Code:
        self = super().__new__(cls, id)
        self.slug = slug
        self.severity = severity
        self.summary = summary
        self.hint = hint
        return self

    @property
    def id(self) -> str:
        return str.__str__(self)


#: Every code, by id, in numeric order.
REGISTRY: dict[str, Code] = {}

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


def _register(id: str, slug: str, severity: Severity, summary: str, hint: str = "") -> Code:
    if id in REGISTRY:  # pragma: no cover - a programming error caught at import
        raise ValueError(f"code {id} registered twice")
    code = REGISTRY[id] = Code(id, slug, severity, summary, hint)
    return code


def lookup(id: str) -> Code | None:
    """The registered code for ``id`` (``"BS300"``), or ``None``."""
    return REGISTRY.get(str(id))


# -- 1xx: reading the file ------------------------------------------------------------------------
UNREADABLE = _register(
    "BS100",
    "unreadable-file",
    E,
    "the file cannot be read, or its suffix is not a spec format",
    "give a .yaml, .yml or .toml file that exists and is readable",
)
SYNTAX = _register(
    "BS101", "syntax-error", E, "YAML or TOML syntax error", "fix the text at the position shown"
)
BAD_ENCODING = _register(
    "BS102",
    "bad-encoding",
    E,
    "the bytes are not UTF-8 text, or hold a control character",
    "save the file as UTF-8 without control characters",
)
BAD_KEY = _register(
    "BS103",
    "bad-mapping-key",
    E,
    "a mapping key is not a plain string scalar",
    "write keys as plain names",
)
TOO_DEEP = _register(
    "BS104",
    "nesting-too-deep",
    E,
    "the data nests deeper than the limit",
    "specs are shallow; flatten the structure",
)
TOO_LARGE = _register(
    "BS105",
    "resource-limit",
    E,
    "the file exceeds a size limit (bytes, nodes, scalar length, number size, diagnostics)",
    "split the file or write the data out plainly",
)
YAML_TAG = _register(
    "BS106",
    "yaml-tag",
    E,
    "a YAML tag (!!python/..., !custom) is not allowed",
    "specs are plain data; remove the tag",
)
DUPLICATE_KEY = _register(
    "BS107",
    "duplicate-key",
    E,
    "the same key appears twice in one mapping",
    "remove one of them; YAML and TOML keep only one",
)
TOO_MANY_PROBLEMS = _register(
    "BS108",
    "too-many-problems",
    E,
    "more problems than bespec reports at once; the rest are counted, not listed",
    "fix the ones shown and run again",
)
INVISIBLE_CHARACTER = _register(
    "BS110",
    "invisible-character",
    E,
    "an invisible line break (NEL, U+2028, U+2029) or bidi control in the text: an editor "
    "shows the file otherwise than the parser reads it",
    "delete it (in a quoted string, write it as an escape such as \\u2028)",
)

# -- 2xx: the schema --------------------------------------------------------------------------
NOT_A_MAPPING = _register(
    "BS200",
    "not-a-mapping",
    E,
    "the document is not a mapping of keys to values",
    "start from `bespec init NAME` or the example in docs/format.md",
)
UNKNOWN_KEY = _register(
    "BS201", "unknown-key", E, "a key the format does not define", "check the spelling"
)
MISSING_KEY = _register("BS202", "missing-key", E, "a required key is missing", "add it")
WRONG_TYPE = _register(
    "BS203", "wrong-type", E, "a value has the wrong type (a list where a name belongs, ...)"
)
SPEC_VERSION = _register(
    "BS204",
    "unsupported-spec-version",
    E,
    "spec_version is not one this bespec reads",
    "write spec_version: 1, 2, 3 or 4",
)
VERSION_2_KEY = _register(
    "BS206",
    "version-2-key",
    E,
    "a key or value of a newer format version (2, 3 or 4) than the file's spec_version (default 1)",
    "set spec_version to the version the message names",
)
BAD_PATTERN = _register(
    "BS205",
    "bad-pattern",
    E,
    "a pattern is not an op name or a list of op names",
    "write an op name, or a list of 2-3 op names in forward order",
)
INVALID_VALUE = _register("BS209", "invalid-value", E, "a value is not allowed here")
INVERTED_BOUNDS = _register(
    "BS210", "inverted-bounds", E, "a lower bound is above its upper bound", "swap the two"
)
NONPOSITIVE_SCALE = _register(
    "BS211",
    "nonpositive-scale",
    E,
    "a scale bound is zero, negative or not finite",
    "scales are positive finite numbers",
)
OUT_OF_RANGE = _register(
    "BS212",
    "bound-outside-dtype",
    E,
    "a bound or zero point is outside the dtype's range",
    "keep bounds inside the dtype's representable range",
)
UNKNOWN_DTYPE = _register("BS213", "unknown-dtype", E, "a dtype name torch does not have")
BIAS_CONSTRAINTS = _register(
    "BS214",
    "bias-constraints",
    E,
    "bias_dtype takes a dtype only; torch has no bias constraints",
    "write bias_dtype: float",
)
UNKNOWN_OBSERVATION_TYPE = _register(
    "BS215", "unknown-observation-type", E, "an observation type torch does not define"
)
UNKNOWN_INPUT_TYPE = _register(
    "BS216",
    "unknown-input-type",
    E,
    "an input_type_to_index key torch does not read (it knows input, weight and bias)",
)
NULL_VALUE = _register(
    "BS217",
    "null-value",
    E,
    "a pt2e key (aten, quantize, a version 3 to 5 policy key) is set to null",
    "write a value, or leave the key out for its default",
)
DYNAMIC_AVERAGING_CONSTANT = _register(
    "BS218",
    "dynamic-averaging-constant",
    E,
    "a dynamic activation's moving-average observer takes averaging_constant 1 (version 9): "
    "torch's MovingAverageMinMaxObserver refuses dynamic quantization with any other",
    "write averaging_constant: 1, or leave it out (1 is a dynamic moving average's default)",
)
ONE_PATTERN_FORM = _register(
    "BS220",
    "one-pattern-form",
    E,
    "an entry needs exactly one of 'pattern' and 'pattern_complex_format'",
    "keep 'pattern' (forward order) unless you need the legacy nested format",
)
PATTERN_LENGTH = _register(
    "BS221",
    "pattern-length",
    E,
    "a forward pattern list holds 2 or 3 ops",
    "write a single op as a plain name; longer chains need pattern_complex_format",
)

# -- 3xx: names -------------------------------------------------------------------------------
UNKNOWN_NAME = _register("BS300", "unknown-name", E, "a name that resolves to nothing")
INVALID_NAME = _register(
    "BS301",
    "invalid-name",
    E,
    "a name that is not a valid dotted name or method name",
    "name a module, class or function",
)
OUTSIDE_ROOTS = _register(
    "BS302",
    "outside-allowed-roots",
    E,
    "a name outside torch, operator and the allow-list, or reached through a foreign module",
    "add the module to allow_imports (CLI --allow-import, or pyproject [tool.bespec])",
)
WRONG_KIND = _register(
    "BS303", "wrong-kind", E, "a name resolves to the wrong kind of object for its field"
)
IMPORT_FAILED = _register(
    "BS304",
    "allowed-import-failed",
    E,
    "an allowed module cannot be imported",
    "check that the module is installed and importable",
)
FACTORY_REFUSED = _register(
    "BS305",
    "factory-refused",
    E,
    "a {call: ...} fuser or getter names a factory bespec will not call, or the call failed",
    "factories must be functions of torch's fuser_method_mappings or backend_config, or of an "
    "allowed module",
)
UNTRUSTED = _register(
    "BS306",
    "untrusted-object",
    E,
    "a callable or module field names an object outside what the trust model lets torch run",
    "use torch's fusers and getters, {sequential: X}, torch.nn / torch.ao.nn classes, or add "
    "the module to allow_imports (docs/security.md)",
)
FUSER_BUILDS_WRONG_MODULE = _register(
    "BS307",
    "fuser-builds-wrong-module",
    E,
    "a fuser, called on float modules of its pattern, fails or builds another class than "
    "fused_module (or nn.Identity, which drops the matched layers)",
    "use a fuser that builds the entry's fused_module, e.g. {sequential: FusedModuleClass}",
)

# -- 4xx: references between entries and files ------------------------------------------------
UNKNOWN_DTYPE_CONFIG = _register(
    "BS401", "unknown-dtype-config", E, "a pattern names a dtype config that is not defined"
)
BAD_EXTENDS = _register(
    "BS402",
    "bad-extends",
    E,
    "'extends' names a missing base, a cycle, or a base with errors",
    "name a built-in backend or a spec file next to this one",
)
REMOVE_WITHOUT_EXTENDS = _register(
    "BS403",
    "remove-without-extends",
    E,
    "'remove' needs 'extends'",
    "name a base to remove patterns from",
)
REMOVE_UNKNOWN = _register(
    "BS404",
    "remove-unknown-pattern",
    E,
    "'remove' names a pattern the base does not have",
    "check the spelling; `bespec show BASE` lists what the base has",
)

# -- 5xx: lint rules (the long docs are the rule modules' docstrings) --------------------------
DUPLICATE_PATTERN = _register(
    "BS501",
    "duplicate-pattern",
    E,
    "A pattern is given more than once, so all but its last entry are silently dropped.",
)
DEAD_FUSION = _register(
    "BS502",
    "dead-fusion",
    W,
    "A fusion produces a fused module that no pattern quantizes, so it stays in float.",
)
FUSED_MODULE_WITHOUT_FUSER = _register(
    "BS503",
    "fused-module-without-fuser",
    E,
    "``fused_module`` is set but ``fuser_method`` is not, so the pattern never fuses.",
)
FUSER_FUSED_MODULE_MISMATCH = _register(
    "BS504",
    "fuser-fused-module-mismatch",
    W,
    "A ``{sequential: X}`` fuser builds a class that ``fused_module`` does not name.",
)
MISSING_REFERENCE_MODULE = _register(
    "BS505",
    "missing-reference-module",
    W,
    "A weighted root module has no ``reference_quantized_module`` anywhere in the backend.",
)
QAT_MODULE_MISMATCH = _register(
    "BS506",
    "qat-module-mismatch",
    E,
    "``qat_module`` is not a QAT form of the entry's module.",
)
UNUSED_DTYPE_CONFIG = _register(
    "BS507",
    "unused-dtype-config",
    W,
    "A named dtype config is defined but no pattern uses it.",
)
INEFFECTIVE_CONSTRAINT = _register(
    "BS508",
    "ineffective-constraint",
    W,
    "A dtype constraint that torch never checks, or that no observer can ever meet.",
)
MISPLACED_EXACT_MATCH = _register(
    "BS509",
    "misplaced-exact-match",
    W,
    "Fixed qparams (``scale_exact_match``/``zero_point_exact_match``) where they cannot apply.",
)
WEIGHTED_OP_SHARES_OBSERVER = _register(
    "BS510",
    "weighted-op-shares-observer",
    E,
    "A weighted op (linear, conv, embedding...) shares its input's observer with its output.",
)
FUSER_ARITY = _register(
    "BS511",
    "fuser-arity",
    E,
    "The fuser function does not take one module per op of the pattern.",
)
UNMATCHABLE_PATTERN = _register(
    "BS512",
    "unmatchable-pattern",
    W,
    "A pattern op that no model prepare_fx sees can contain, so the entry never matches.",
)
NON_FLOAT_BIAS = _register(
    "BS513",
    "non-float-bias",
    E,
    "A weighted pattern's dtype config has a non-float ``bias_dtype``, so torch never converts it.",
)
REVERSED_CHAIN = _register(
    "BS514",
    "reversed-chain",
    E,
    "A chain lists its ops in an order no model runs them (``[nn.ReLU, nn.Conv2d]``).",
)
REMOVE_LEAVES_SIBLINGS = _register(
    "BS515",
    "remove-leaves-siblings",
    W,
    "``remove`` takes out an op but leaves its functional form or its fusions in the backend.",
)
UNSATISFIABLE_DTYPE_CONFIG = _register(
    "BS516",
    "unsatisfiable-dtype-config",
    W,
    "A dtype config no QConfig can satisfy (a static entry with float output and quantized "
    "input), so torch always skips it.",
)
INVALID_NOQA = _register(
    "BS520",
    "invalid-noqa",
    W,
    "A ``# noqa`` comment that is not honoured: it names no codes, or is misplaced.",
)
UNUSED_NOQA = _register(
    "BS521",
    "unused-noqa",
    W,
    "A code in a ``# noqa`` comment silences nothing: no such finding, or it cannot be silenced.",
)
FX_PLAIN_INTEGER_DTYPE = _register(
    "BS522",
    "fx-plain-integer-dtype",
    W,
    "A dtype config quantizes with a plain integer dtype (``uint8``, ``int8``): FX quantizes "
    "only with ``quint8``/``qint8``, so ``convert_fx`` leaves the op float (or fails on the "
    "weight); pt2e reads either spelling.",
)
CONTRADICTORY_POLICY = _register(
    "BS523",
    "contradictory-policy",
    W,
    "An entry's pt2e policy keys contradict each other or its observation type: one of them "
    "can never take effect.",
)
SHARED_OBSERVER_FLOAT_INPUT = _register(
    "BS530",
    "shared-observer-float-input",
    W,
    "An op sharing one observer across its inputs (cat, add) can read an op the spec leaves "
    "float, which convert_fx's lowering may then run on quantized tensors.",
)
FLOAT_MODULE_WEIGHT = _register(
    "BS542",
    "float-module-weight",
    W,
    "A weighted module pattern (`nn.Conv2d`, `nn.Linear`...) quantizes its weight "
    "(`weight_dtype`), but no entry maps that module to a `reference_quantized_module`: convert "
    "keeps the module with its float weight, in FX and in pt2e.",
)
INERT_ANNOTATION_STAGE = _register(
    "BS541",
    "inert-annotation-stage",
    W,
    "An `annotation_stage` (version 8) that cannot change what is annotated: no entry of the "
    "spec has a condition on its producer, or every entry is in one stage.",
)
UNMEETABLE_CONDITION = _register(
    "BS545",
    "unmeetable-condition",
    W,
    "A `when` condition (version 7) names an argument no ATen op of the entry's pattern has, "
    "or a value of another type than that argument's: the entry never matches in pt2e.",
)
NARROWED_UNCUSTOMIZED_QRANGE = _register(
    "BS547",
    "narrowed-uncustomized-qrange",
    W,
    "A dtype mapping says `customized_qrange: false` (version 8: the observer keeps its dtype's "
    "own range) and also narrows that range (`quant_min_lower_bound`, `quant_max_upper_bound`, "
    "`reduce_range: true`): the observer is built with the narrowed range, so the key has no "
    "effect.",
)
UNUSED_AVERAGING_CONSTANT = _register(
    "BS548",
    "unused-averaging-constant",
    W,
    "A dtype mapping sets `averaging_constant` (version 9) but observes with no moving average: "
    "its `observer` is not `moving_average_minmax` and its `fake_quant` is not "
    "`fused_moving_avg` (or it is a dynamic mapping with a placeholder), so the key has no "
    "effect.",
)
INERT_CLAIM_STAGE = _register(
    "BS549",
    "inert-claim-stage",
    W,
    "A `claim_stage` (version 10) that cannot change which entry claims which nodes: every "
    "entry of the spec is in one claim stage.",
)
PTQ_FAKE_QUANT_WITHOUT_ONE = _register(
    "BS550",
    "ptq-fake-quant-without-fake-quantize",
    W,
    "A dtype mapping says `ptq_fake_quant: true` (PTQ observes with its fake-quantize) and "
    "`fake_quant: observer` (version 10: it has none, QAT observes with the observer itself): "
    "PTQ observes with the observer either way, so `ptq_fake_quant` has no effect.",
)
INERT_OWN_QCONFIG = _register(
    "BS551",
    "inert-own-qconfig",
    W,
    "`qconfig: own` (version 11) on a one-op pattern: the QConfig of its op is its own "
    "already (an op's own entry decides it), so the key has no effect.",
)
INERT_INPUT_SHARING = _register(
    "BS552",
    "inert-input-sharing",
    W,
    "A pattern entry's `input_sharing` (version 12) that changes nothing: it repeats the "
    "spec-wide rule (`spec`, or the value the spec sets, `dtype` by default), or the entry's "
    "`input_observer: upstream_only` gives its first input no observer of its own to share.",
)
RULE_CRASHED = _register(
    "BS599",
    "rule-crashed",
    E,
    "a lint rule raised an exception",
    "please report this with the spec that caused it",
)

# -- 7xx: pt2e (lint rules about the spec's torchao quantizer) -------------------------------
NO_PT2E_EQUIVALENT = _register(
    "BS701",
    "no-pt2e-equivalent",
    INFO,
    "An entry has no pt2e equivalent, so the spec's torchao quantizer skips it.",
)
ATEN_CHAIN_CONFLICT = _register(
    "BS702",
    "aten-chain-conflict",
    W,
    "Two entries collapse onto one ATen chain with different configs; pt2e keeps the first.",
)

OUTPUT_OBSERVER_BY_FLOW = _register(
    "BS703",
    "output-observer-by-flow",
    INFO,
    "A static dtype config sets observer options on its input and its output, different ones "
    "(another qscheme, observer, fake-quantize...): from version 9 pt2e observes each edge "
    "with its own, while FX's QConfig has one activation observer for both (and before "
    "version 9 pt2e does as FX).",
)


# -- 9xx: export and internal errors ----------------------------------------------------------
INTERNAL = _register(
    "BS900",
    "internal-error",
    E,
    "bespec itself failed",
    "please report this with the spec that caused it",
)
UNNAMEABLE = _register(
    "BS910",
    "unnameable-object",
    E,
    "export met an object that has no name a spec can use",
    "use a module-level function or class (not a lambda or local function)",
)
UNWRITABLE = _register(
    "BS911", "unwritable-config", E, "export met a config it cannot write as a spec"
)
MALFORMED_CONFIG = _register(
    "BS912",
    "malformed-config",
    W,
    "export met a value torch accepted but cannot use as is (a bare DTypeConfig for a list)",
    "pass a list, as the setter's signature says",
)
FACTORY_MISMATCH = _register(
    "BS913",
    "factory-mismatch",
    E,
    "a closure's factory, called again with the same arguments, builds something else",
    "make the factory deterministic, or define the function at module level",
)
FX_MODULE_LEAVES_OUT = _register(
    "BS920",
    "fx-module-leaves-out",
    W,
    "`compile -o` writes a BackendConfig module, which has no field for an option of the spec "
    "(version 2 observer options, pt2e keys)",
    "observer options: use the module's get_qconfig_mapping(); pt2e keys: compile --target pt2e",
)
