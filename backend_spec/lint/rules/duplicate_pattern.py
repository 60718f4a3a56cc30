"""**Why.** `BackendConfig` stores entries by pattern; a later entry with the same pattern
replaces the earlier one without a word, so the earlier entry has no effect. Names are compared
after resolution: `nn.Conv2d` and `torch.nn.modules.conv.Conv2d` are the same op, and a
`pattern_complex_format` equal to a forward `pattern` is the same pattern. Overriding a pattern
of the `extends` base is how `extends` works and is not reported.

```yaml
patterns:
  - pattern: nn.ReLU                              # BS501: given again at line 4
    dtype_configs: [act_int8]
  - pattern: torch.nn.modules.activation.ReLU
```

**Fix.** Merge the entries into one (usually the first was meant to be edited, not copied).
"""

from __future__ import annotations

from backend_spec import codes
from backend_spec.compiler import meaning

CODE = codes.DUPLICATE_PATTERN

#: Enforced by ``load`` and ``compile`` too, so the check lives with the compiler.
check = meaning.duplicate_patterns
