"""Compile a backend's intermediate form into the pt2e rule table (plain data) and a report.

Each pattern entry becomes at most one rule: its ops' ATen chains (:mod:`.aten`) joined into one
chain, how each node must have been written, the observation type, and the QuantizationSpecs
the FX flow would use for it. To quantize exactly like ``prepare_fx`` with
``backend_spec.qconfig_mapping``, the specs are read off the very QConfig that mapping gives the
pattern's first op, and the same dtype-config check decides whether the pattern is quantized
at all. Module fusions are resolved the way ``fuse_fx`` resolves them: by calling the entry's
fuser in eval mode and quantizing the chain with the entry of the module it returns.

Everything is read off the intermediate form (:class:`~backend_spec.ir.Backend`); a public
function given a torch BackendConfig asks :func:`~backend_spec.ir.lower.backend_of` for it
once. Only the QConfigs come from torch's config, lowered from the form.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

from backend_spec._torch import BackendConfig, ObservationType, quiet, torch
from backend_spec.analysis import qconfigs
from backend_spec.ir import Backend, DTypeConfig, DTypeMapping, Entry
from backend_spec.ir.lower import backend_of, lower, lower_dtype_config
from backend_spec.names.labels import object_label
from backend_spec.pt2e.aten import describe_op
from backend_spec.pt2e.qat import qat_fused_type, qat_swap, spec_data
from backend_spec.pt2e.table import Policy, Rule, Table, rule_key
from backend_spec.specfile.fields import DEFAULT_AVERAGING_CONSTANT

with quiet():
    from torch.ao.quantization.observer import FixedQParamsObserver
    from torch.ao.quantization.utils import MatchAllNode

#: torch.ao dtypes -> the plain dtypes pt2e's quantize ops use.
_DTYPES = {
    torch.quint8: "uint8",
    torch.qint8: "int8",
    torch.qint32: "int32",
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.uint16: "uint16",
    torch.int32: "int32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}

_OBSERVATIONS = {
    ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT: "different",
    ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT: "share",
    ObservationType.INPUT_OUTPUT_NOT_OBSERVED: "none",
}

#: ATen ops that pt2e folds into a preceding conv / linear before annotating (PTQ).
_FOLDED = ("aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default")
_FOLD_INTO = ("aten.conv", "aten.linear")


#: Why a rule is float when its first op's QConfig, decided by another entry, meets none of
#: its dtype configs (``qconfig: own``, version 11, quantizes it with its own).
UNSATISFIED = "the QConfig of its first op satisfies none of its dtype configs"


@dataclass
class Report:
    """What the compiler made of a spec: rules, skipped entries with reasons, conflicts."""

    rules: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{len(self.rules)} rules, {len(self.duplicates)} duplicates, "
            f"{len(self.skipped)} skipped, {len(self.conflicts)} conflicts"
        )


@dataclass
class _Entry:
    """One pattern entry on its way to a rule."""

    label: str
    ops: list[Any]
    #: The entry in the intermediate form.
    facts: Entry


def compile_table(
    backend: Backend | BackendConfig,
    *,
    engine: str | None = None,
    qat: bool = False,
    runnable_first: bool = True,
) -> tuple[dict[str, Any], Report]:
    """The rule table of ``backend`` as plain data, and the report of how it was built;
    with ``qat``, for ``prepare_qat_pt2e`` (:mod:`.qat`); ``engine`` and ``runnable_first``
    choose the QConfigs as :func:`~backend_spec.analysis.qconfigs.qconfig_mapping` does."""
    table, report = compile_rules(backend, engine=engine, qat=qat, runnable_first=runnable_first)
    return table.to_data(), report


def compile_rules(
    backend: Backend | BackendConfig,
    *,
    engine: str | None = None,
    qat: bool = False,
    runnable_first: bool = True,
) -> tuple[Table, Report]:
    """The typed rule table of ``backend`` and the report of how it was built."""
    return _Compiler(_form(backend), engine, qat, runnable_first).run()


def chain_conflicts(backend: Backend | BackendConfig) -> list[tuple[str, str, str]]:
    """:attr:`Report.conflicts` of ``compile_rules(backend)``, at a fraction of its cost:
    only entries whose chain another entry also has are worked out in full (lint asks this
    of every file)."""
    return _Compiler(_form(backend), None, False).run(shared_chains_only=True)[1].conflicts


def _form(backend: Backend | BackendConfig) -> Backend:
    """The intermediate form of what a public function was given."""
    return backend if isinstance(backend, Backend) else backend_of(backend)


def dynamic_output(dtype_config: DTypeConfig) -> bool:
    """A dynamic dtype config whose output is the quantized dtype, not float (version 8):
    on an ``output_share_observer_with_input`` entry the output shares the input's dynamic
    observer (X86's dynamic config through pools, cat and flatten)."""
    output = dtype_config.mapping("output_dtype").dtype
    return bool(dtype_config.is_dynamic) and output is not None and not output.is_floating_point


def _when(entry: _Entry) -> Any:
    """The entry's ``when`` conditions (part of what makes two rules the same match)."""
    return dict(entry.facts.policy).get("when", ())


def _fx_view(backend: Backend) -> tuple[Backend, frozenset]:
    """The backend with each :func:`dynamic_output` dtype config's output made float (what
    FX and its QConfigs can say), and the keys of the entries that had one. Before version
    8 such a config means what it meant (no QConfig satisfies it: the entry stays float)."""
    if backend.version < 8:
        return backend, frozenset()
    keys, entries = set(), []
    for entry in backend:
        configs = entry.dtype_configs
        if any(dynamic_output(dc) for dc in configs):
            keys.add(entry.key)
            floats = tuple(_float_output(dc) if dynamic_output(dc) else dc for dc in configs)
            fields = Entry.ordered({**dict(entry.fields), "dtype_configs": floats})
            entry = dataclasses.replace(entry, fields=fields)
        entries.append(entry)
    return dataclasses.replace(backend, entries=tuple(entries)), frozenset(keys)


def _float_output(dtype_config: DTypeConfig) -> DTypeConfig:
    mappings = tuple(
        (key, DTypeMapping(torch.float) if key == "output_dtype" else mapping)
        for key, mapping in dtype_config.mappings
    )
    return dataclasses.replace(dtype_config, mappings=mappings)


class _Compiler:
    def __init__(
        self, backend: Backend, engine: str | None, qat: bool, runnable_first: bool = True
    ) -> None:
        #: Entries whose dynamic output shares the input's observer (:func:`dynamic_output`).
        backend, self.dynamic_shares = _fx_view(backend)
        self.backend = backend
        self.engine = engine
        self.runnable_first = runnable_first
        self.qat = qat
        self.by_pattern = {entry.pattern: entry for entry in backend if entry.pattern is not None}
        #: Float module classes convert_to_reference_fx swaps for reference modules (the only
        #: modules whose weights FX quantizes).
        self.reference_roots = self.backend.reference_roots
        self.specs: dict[str, dict[str, Any]] = {}
        self.report = Report()
        self._satisfied: dict[tuple[int, int], bool] = {}
        self._observers: dict[int, tuple[str | None, bool]] = {}
        self._dtype_configs: dict[int, Any] = {}  # each DTypeConfig lowered once

    @functools.cached_property
    def op_qconfigs(self) -> dict[Any, Any]:
        """The QConfig of each op, as ``qconfig_mapping`` gives it for the backend's torch
        config (asked only when needed)."""
        with quiet():
            return qconfigs.op_qconfigs(
                lower(self.backend), self.engine, self.runnable_first, qat=self.qat
            )

    def run(self, *, shared_chains_only: bool = False) -> tuple[Table, Report]:
        """The table and report; with ``shared_chains_only``, of the entries whose chain
        another entry also has (all a conflict can involve, without the others' quantization)."""
        entries = [_Entry(ops_label(ops), ops, facts) for facts, ops in _with_ops(self.backend)]
        if shared_chains_only:
            entries = self.sharing_chains(entries)
        rules: list[Rule] = []
        seen: dict[tuple, Rule] = {}
        for entry in entries:
            made, reason = self.rules_for(entry)
            if not made:
                self.report.skipped.append((entry.label, reason))
            for rule in made:
                first = seen.get(rule.key)
                if first is None:
                    seen[rule.key] = rule
                    rules.append(rule)
                    self.report.rules.append(entry.label)
                elif _body(first) == _body(rule):
                    self.report.duplicates.append((entry.label, first.label))
                else:
                    self.report.conflicts.append((entry.label, first.label, _chain_text(rule)))
        rules.sort(key=lambda rule: -len(rule.chain))
        table = Table(
            specs=self.specs,
            rules=tuple(rules),
            graph_inputs=self.graph_inputs_spec(),
            input_sharing=self.backend.input_sharing,
            passes=tuple(
                object_label(ref.function) for ref in self.backend.transform_for_annotation
            ),
        )
        return table, self.report

    def graph_inputs_spec(self) -> str | None:
        """The spec of ``graph_inputs`` (version 5): the activation observer of the QConfig its
        dtype config makes (what an entry with that config observes its input with)."""
        dtype_config = self.backend.graph_inputs
        if dtype_config is None:
            return None
        qconfig = qconfigs.qconfig_for(dtype_config)
        if qconfig is None:
            return None
        if self.qat:
            try:
                qconfig = qconfigs.qat_qconfig(qconfig, dtype_config)
            except ValueError:  # no fake-quantize of that kind: graph inputs stay float
                return None
        name, dynamic = self.observer_spec(qconfig.activation)
        return None if dynamic else name

    # --- chains -------------------------------------------------------------------------------

    def sharing_chains(self, entries: list[_Entry]) -> list[_Entry]:
        """The entries with a chain (and provenance) that another entry also has."""
        keys = [
            {rule_key(chain, where, _when(e)) for chain, where, _ in self.chains(e)[0]}
            for e in entries
        ]
        counts = collections.Counter(key for these in keys for key in these)
        return [
            e for e, these in zip(entries, keys, strict=True) if any(counts[k] > 1 for k in these)
        ]

    def chains(self, entry: _Entry) -> tuple[list[tuple[list, list, list]], str]:
        """(chain, where, groups) of the entry's traced rule and of each ``aten`` chain of the
        spec; when there are none, the reason."""
        traced, reason = self.traced_chain(entry)
        chains = [] if traced is None else [traced]
        for chain in entry.facts.aten:
            chains.append((chain, [None] * len(chain), list(range(len(chain)))))
        return chains, reason

    def rules_for(self, entry: _Entry) -> tuple[list[Rule], str]:
        """The entry's traced rule plus one per ``aten`` chain of the spec; else the reason."""
        chains, reason = self.chains(entry)
        if not chains:
            return [], reason
        quantization = self.quantization(entry)
        policy = Policy(**dict(entry.facts.policy))
        return [
            Rule(
                label=entry.label,
                chain=tuple(tuple(alts) for alts in chain),
                where=tuple(where),
                groups=tuple(groups),
                policy=policy,
                **quantization,
            )
            for chain, where, groups in chains
        ], ""

    def traced_chain(self, entry: _Entry) -> tuple[tuple[list, list, list] | None, str]:
        """(chain, where, groups) of the entry's ops as torch.export traces them."""
        facts = entry.facts
        if facts.pattern is None and not traceable_complex(
            facts.get("pattern_complex_format"), fused=facts.get("fuser_method") is not None
        ):
            return None, "complex-format pattern with MatchAllNode or branches: no chain matcher"
        chain, where, groups = [], [], []
        for index, op in enumerate(entry.ops):
            described = describe_op(op)
            if "skip" in described:
                return None, f"{_op_label(op)}: {described['skip']}"
            chain += described["chain"]
            where += described["where"]
            groups += [index] * len(described["chain"])
        if self.qat:  # prepare_qat_pt2e annotates before it folds: conv-bn stays one chain
            return (chain, where, groups), ""
        return _fold_batch_norm(chain, where, groups), ""

    # --- quantization -------------------------------------------------------------------------

    def quantization(self, entry: _Entry) -> dict[str, Any]:
        """Observation and specs, from the entry FX would quantize these nodes with."""
        effective, root_op = self.effective_entry(entry)
        if effective is None:
            return self.float_rule(
                f"FX fuses it into {_op_label(root_op)}, which no entry quantizes"
            )
        if self.qat and qat_swap(effective, self.by_pattern) is None:
            return self.float_rule(
                f"FX QAT swaps it for {_op_label(effective.get('qat_module'))}, "
                "which no entry quantizes"
            )
        effective = qat_swap(effective, self.by_pattern) if self.qat else effective
        qconfig = self.op_qconfigs.get(root_op)
        if dict(effective.policy).get("qconfig") == "own":  # version 11: the entry's own QConfig
            qconfig = qconfigs.own_qconfig(effective.dtype_configs, self.engine, qat=self.qat)
        if qconfig is None:
            return self.float_rule("no QConfig satisfies any of its dtype configs")
        chosen = next((dc for dc in effective.dtype_configs if self.satisfies(qconfig, dc)), None)
        if chosen is None:
            return self.float_rule(UNSATISFIED)
        act, dynamic = self.observer_spec(qconfig.activation)
        observation = _OBSERVATIONS[effective.get("observation_type")]
        # A dynamic config with a quantized output observes the output with the input's dynamic
        # observer: on a shared-observer entry from version 8, on any entry from version 9
        # (X86's QAT conv-bn + activation chains).
        shares_dynamic = effective.key in self.dynamic_shares and (
            observation == "share" or self.backend.version >= 9
        )
        output = None if dynamic and not shares_dynamic else act
        own = self.backend.version >= 9 and qconfigs.own_observers(
            chosen, self.engine, qat=self.qat
        )
        if own:  # version 9: each edge observed with its own mapping's options
            act, output = (self.observer_spec(observer)[0] for observer in own)
        counts = effective.get("num_tensor_args_to_observation_type") or ()
        weight = qconfig.weight is not None and self.weight_quantized(root_op)
        return {
            "observation": observation,
            "by_num_args": tuple((n, _OBSERVATIONS[t]) for n, t in counts),
            "input": act,
            "output": output,
            "weight": self.observer_spec(qconfig.weight)[0] if weight else None,
            "reason": "",
        }

    def satisfies(self, qconfig: Any, dtype_config: DTypeConfig) -> bool:
        key = (id(qconfig), id(dtype_config))
        if key not in self._satisfied:
            lowered = lower_dtype_config(dtype_config, self._dtype_configs)
            self._satisfied[key] = qconfigs.satisfies(qconfig, lowered)
        return self._satisfied[key]

    def observer_spec(self, constructor: Any) -> tuple[str | None, bool]:
        """(spec name, is dynamic) of an observer constructor, instantiated once."""
        if constructor is None:
            return None, False
        if id(constructor) not in self._observers:
            with quiet():
                observer = constructor()
            dynamic = bool(getattr(observer, "is_dynamic", False))
            self._observers[id(constructor)] = (self.spec_name(observer), dynamic)
        return self._observers[id(constructor)]

    def weight_quantized(self, op: Any) -> bool:
        """FX quantizes a module's weight only when it swaps the module for a reference one:
        its float class (a fused module's first part) is a root_module with a reference
        module somewhere in the config. Functional ops take their weight observer as is."""
        if not isinstance(op, type):
            return True
        from backend_spec.names.fused import FUSED_PARTS

        return FUSED_PARTS.get(op, (op,))[0] in self.reference_roots

    def float_rule(self, reason: str) -> dict[str, Any]:
        """A rule that claims its nodes (as FX's matcher does) but leaves them in float."""
        return {
            "observation": "none",
            "by_num_args": (),
            "input": None,
            "output": None,
            "weight": None,
            "reason": reason,
        }

    def effective_entry(self, entry: _Entry) -> tuple[Entry | None, Any]:
        """(the entry FX quantizes this pattern's nodes with, the op whose QConfig it uses)."""
        facts = entry.facts
        fuser = facts.get("fuser_method")
        modules = fuser_modules(entry.ops)
        if fuser is None or modules is None:
            return facts, entry.ops[0]
        fused = (qat_fused_type if self.qat else fused_type)(fuser.function, modules)
        if fused is None:
            fused = facts.get("fused_module") or entry.ops[0]
        return self.by_pattern.get(fused), fused

    def spec_name(self, observer: Any) -> str | None:
        """Register the spec dict of ``observer`` (deduplicated) and return its name."""
        data = spec_data(observer, _spec_data)  # a QAT fake-quantize: its observer and kind
        if data is None:
            return None
        for name, existing in self.specs.items():
            if existing == data:
                return name
        name = f"{data['dtype']}_{data.get('observer', 'fixed')}_{len(self.specs)}"
        self.specs[name] = data
        return name


def fused_type(fuser: Any, ops: tuple) -> type | None:
    """What ``fuser(False, *modules)`` returns: a sequential fuser's class, the packaged table's
    answer for a named fuser, else the result of calling it on synthesized modules."""
    from backend_spec.names.fusers import sequential_class
    from backend_spec.names.naming import object_name, op_name
    from backend_spec.pt2e.aten import cached_fusion, called_fuser, fusion_key

    sequential = sequential_class(fuser)
    if sequential is not None:
        return sequential
    name = object_name(fuser)
    if name is not None:
        cached = cached_fusion(fusion_key(name, [op_name(op) for op in ops]))
        if cached is not None:
            return cached
    return called_fuser(fuser, ops)


def fuser_modules(ops: list[Any]) -> tuple[type, ...] | None:
    """The module classes ``fuse_fx`` hands a fuser for these ops, or ``None`` if it cannot.

    FX's fuse handler passes the matched modules, with one substitution: an ``F.relu`` node
    becomes ``nn.ReLU()`` (so ``[nn.Linear, F.relu]`` fuses to ``nni.LinearReLU`` like
    ``[nn.Linear, nn.ReLU]``). Any other function reaches the fuser as is, which module fusers
    cannot take; and a pattern whose first op is not a module has nothing to fuse into.
    """
    classes = tuple(torch.nn.ReLU if op is torch.nn.functional.relu else op for op in ops)
    if not all(isinstance(op, type) for op in classes) or not isinstance(ops[0], type):
        return None
    return classes


def _spec_data(observer: Any) -> dict[str, Any] | None:
    """A table spec from an instantiated torch.ao observer; ``None`` for float32 (no spec)."""
    dtype = _DTYPES.get(observer.dtype)
    if dtype is None:
        return None
    qscheme = str(observer.qscheme).removeprefix("torch.") if hasattr(observer, "qscheme") else None
    if isinstance(observer, FixedQParamsObserver):
        return {
            "kind": "fixed",
            "dtype": dtype,
            "scale": float(observer.scale),
            "zero_point": int(observer.zero_point),
            "quant_min": int(observer.quant_min),
            "quant_max": int(observer.quant_max),
            "qscheme": qscheme,
        }
    data: dict[str, Any] = {"kind": "observed", "dtype": dtype, "observer": type(observer).__name__}
    if dtype in ("float16", "bfloat16"):
        data["observer"] = "PlaceholderObserver"
        data["qscheme"] = None
    else:
        # An observer built without a range (the float-qparams embedding one) keeps none:
        # torchao's observers compute qparams differently once given one.
        custom = getattr(observer, "has_customized_qrange", True)
        data.update(
            quant_min=int(observer.quant_min) if custom else None,
            quant_max=int(observer.quant_max) if custom else None,
            qscheme=qscheme,
        )
        eps = getattr(observer, "eps", None)
        if eps is not None:
            data["observer_kwargs"] = {"eps": float(eps)}
        constant = getattr(observer, "averaging_constant", DEFAULT_AVERAGING_CONSTANT)
        if constant != DEFAULT_AVERAGING_CONSTANT:  # version 9
            data.setdefault("observer_kwargs", {})["averaging_constant"] = float(constant)
        if "per_channel" in (qscheme or ""):
            data["ch_axis"] = int(observer.ch_axis)
    if getattr(observer, "is_dynamic", False):
        data["is_dynamic"] = True
    return data


def _fold_batch_norm(chain: list, where: list, groups: list) -> tuple[list, list, list]:
    """prepare_pt2e folds BatchNorm into the conv/linear before it, so PTQ chains omit it."""
    if not chain or not chain[0][0].startswith(_FOLD_INTO):
        return chain, where, groups
    keep = [i for i, alts in enumerate(chain) if i == 0 or alts[0] not in _FOLDED]
    keep = [i for i in keep if not (i > 0 and chain[i][0] == "<built-in function getitem>")]
    renumber = {
        group: number for number, group in enumerate(dict.fromkeys(groups[i] for i in keep))
    }
    return [chain[i] for i in keep], [where[i] for i in keep], [renumber[groups[i]] for i in keep]


def _body(rule: Rule) -> Rule:
    return dataclasses.replace(rule, label="", reason="")


def _chain_text(rule: Rule) -> str:
    return " -> ".join(alts[0] for alts in rule.chain)


def _linear_complex(pattern: Any) -> bool:
    """A reversed nested pattern that is a plain chain: ``(relu, (bn, conv))``."""
    while isinstance(pattern, tuple):
        if len(pattern) != 2 or isinstance(pattern[0], tuple):
            return False
        pattern = pattern[1]
    return pattern is not MatchAllNode


def traceable_complex(pattern: Any, fused: bool) -> bool:
    """Whether a complex-format pattern is traced as the chain of its ops: a plain chain, or
    (not ``fused``) a chain whose later ops read it as their first argument and anything
    else (``MatchAllNode``) after it: ``(relu, (add, (bn, conv), MatchAllNode))``, the
    conv-bn-add-relu that torch's forward ``pattern`` (2 or 3 ops) cannot state. A fused
    entry is left out: FX quantizes its fused module, which the chain does not trace."""
    if _linear_complex(pattern):
        return True
    if fused:
        return False
    while isinstance(pattern, tuple):
        if len(pattern) < 2 or isinstance(pattern[0], tuple):
            return False
        if any(extra is not MatchAllNode for extra in pattern[2:]):
            return False
        pattern = pattern[1]
    return pattern is not MatchAllNode


@functools.lru_cache(maxsize=2048)
def _op_label(op: Any) -> str:
    from backend_spec.names.labels import object_label

    return object_label(op)


def _with_ops(backend: Backend) -> list[tuple[Entry, list[Any]]]:
    """Each entry with its ops in forward order."""
    return [
        (entry, qconfigs.forward_ops(entry.pattern, entry.get("pattern_complex_format")))
        for entry in backend
    ]


def entry_labels(backend: Backend) -> list[tuple[Entry, str]]:
    """Each entry with the label its rules carry (what reports and lowering name it by)."""
    return [(entry, ops_label(ops)) for entry, ops in _with_ops(backend)]


def ops_label(ops: list[Any] | tuple[Any, ...]) -> str:
    """A pattern as the report writes it: ``nn.Linear`` or ``(nn.Conv2d, nn.ReLU)``."""
    return _op_label(ops[0]) if len(ops) == 1 else "(" + ", ".join(map(_op_label, ops)) + ")"


def skip_reason(
    ops: list[Any] | tuple[Any, ...] | None, complex_key: Any = None, fused: bool = True
) -> str | None:
    """Why an entry with these ops (or this complex pattern key, of a ``fused`` entry or
    not) has no traced pt2e chain."""
    if ops is None:
        if traceable_complex(complex_key, fused):
            return None
        return "complex-format pattern with MatchAllNode or branches: no chain matcher"
    for op in ops:
        described = describe_op(op)
        if "skip" in described:
            return f"{_op_label(op)}: {described['skip']}"
    return None
