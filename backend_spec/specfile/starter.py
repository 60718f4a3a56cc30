"""``bespec init``: the starter spec of a new backend, in YAML or TOML.

The starter is a small, valid spec (an int8 backend with a linear, a convolution and a fused
conv + relu) whose comments say where to go next; it compiles, lints clean and is already in
``bespec fmt``'s layout, so a project created from it passes its CI from the first commit.
"""

from __future__ import annotations

import re

from backend_spec.specfile.schema import schema_comment

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")

_YAML = """\
{schema}
# A bespec backend spec. The format: docs/format.md of bespec. Next steps:
#   bespec compile {name}.yaml     validate, compile, summarize
#   bespec show {name}.yaml        every pattern, where it came from
#   bespec lint {name}.yaml        semantic problems torch would not report
spec_version: 1
name: "{name}"
# extends: x86            # start from a built-in backend instead (native, fbgemm, qnnpack,
#                         # x86, onednn, executorch, tensorrt); `remove:` drops its patterns

dtype_configs:
  int8:                   # quint8 activations, qint8 weights, float bias
    input_dtype: quint8
    output_dtype: quint8
    weight_dtype: qint8
    bias_dtype: float

patterns:
  - pattern: nn.Linear
    dtype_configs: [int8]
    root_module: nn.Linear
    qat_module: nnqat.Linear
    reference_quantized_module: nnqr.Linear
  - pattern: nn.Conv2d
    dtype_configs: [int8]
    root_module: nn.Conv2d
    qat_module: nnqat.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: [nn.Conv2d, nn.ReLU]   # forward order: fuse conv + relu ...
    fused_module: nni.ConvReLU2d
    fuser_method: {{sequential: nni.ConvReLU2d}}
  - pattern: nni.ConvReLU2d         # ... then quantize the fused module
    dtype_configs: [int8]
    root_module: nn.Conv2d
    qat_module: nniqat.ConvReLU2d
    reference_quantized_module: nnqr.Conv2d
  # The QAT modules prepare_qat_fx swaps in (the qat_module keys above), quantized too.
  - pattern: nnqat.Linear
    dtype_configs: [int8]
    root_module: nn.Linear
    reference_quantized_module: nnqr.Linear
  - pattern: nnqat.Conv2d
    dtype_configs: [int8]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
  - pattern: nniqat.ConvReLU2d
    dtype_configs: [int8]
    root_module: nn.Conv2d
    reference_quantized_module: nnqr.Conv2d
"""

_TOML = """\
{schema}
# A bespec backend spec. The format: docs/format.md of bespec. Next steps:
#   bespec compile {name}.toml     validate, compile, summarize
#   bespec show {name}.toml        every pattern, where it came from
#   bespec lint {name}.toml        semantic problems torch would not report
spec_version = 1
name = "{name}"
# extends = "x86"         # start from a built-in backend instead (native, fbgemm, qnnpack,
#                         # x86, onednn, executorch, tensorrt); `remove` drops its patterns

[dtype_configs.int8]      # quint8 activations, qint8 weights, float bias
input_dtype = "quint8"
output_dtype = "quint8"
weight_dtype = "qint8"
bias_dtype = "float"

[[patterns]]
pattern = "nn.Linear"
dtype_configs = ["int8"]
root_module = "nn.Linear"
qat_module = "nnqat.Linear"
reference_quantized_module = "nnqr.Linear"

[[patterns]]
pattern = "nn.Conv2d"
dtype_configs = ["int8"]
root_module = "nn.Conv2d"
qat_module = "nnqat.Conv2d"
reference_quantized_module = "nnqr.Conv2d"

[[patterns]]
pattern = ["nn.Conv2d", "nn.ReLU"]   # forward order: fuse conv + relu ...
fused_module = "nni.ConvReLU2d"
fuser_method = {{ sequential = "nni.ConvReLU2d" }}

[[patterns]]
pattern = "nni.ConvReLU2d"           # ... then quantize the fused module
dtype_configs = ["int8"]
root_module = "nn.Conv2d"
qat_module = "nniqat.ConvReLU2d"
reference_quantized_module = "nnqr.Conv2d"

# The QAT modules prepare_qat_fx swaps in (the qat_module keys above), quantized too.
[[patterns]]
pattern = "nnqat.Linear"
dtype_configs = ["int8"]
root_module = "nn.Linear"
reference_quantized_module = "nnqr.Linear"

[[patterns]]
pattern = "nnqat.Conv2d"
dtype_configs = ["int8"]
root_module = "nn.Conv2d"
reference_quantized_module = "nnqr.Conv2d"

[[patterns]]
pattern = "nniqat.ConvReLU2d"
dtype_configs = ["int8"]
root_module = "nn.Conv2d"
reference_quantized_module = "nnqr.Conv2d"
"""


def valid_name(name: str) -> bool:
    """A backend name that is also a safe file name and needs no quoting in YAML or TOML."""
    return _NAME.fullmatch(name) is not None


def starter_text(name: str, fmt: str, schema_ref: str) -> str:
    """The starter spec for backend ``name`` (a :func:`valid_name`) in ``fmt``."""
    template = _TOML if fmt == "toml" else _YAML
    return template.format(name=name, schema=schema_comment(fmt, schema_ref))
