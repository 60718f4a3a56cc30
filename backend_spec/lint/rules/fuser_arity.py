"""**Why.** torch calls a fuser as `fuser(is_qat, m1, m2[, m3])`, one module per op of the pattern
in forward order. A fuser with another signature fails with a `TypeError` in the middle of
`prepare_fx`. `{sequential: X}` fusers always fit; `pattern_complex_format` entries are not
checked.

```yaml
  - pattern: [nn.Conv2d, nn.BatchNorm2d, nn.ReLU]
    fused_module: nni.ConvBnReLU2d
    fuser_method: fuse_conv_bn                    # BS511: takes (is_qat, conv, bn)
```

**Fix.** Use the fuser for that many ops (`fuse_conv_bn_relu`) or `{sequential: X}`.
"""

from __future__ import annotations

from backend_spec import codes
from backend_spec.compiler import meaning

CODE = codes.FUSER_ARITY

#: Enforced by ``load`` and ``compile`` too, so the check lives with the compiler.
check = meaning.fuser_arity
