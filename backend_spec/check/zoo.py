"""A small zoo of reference models that exercise the common quantization patterns.

Each model is tiny (it runs in milliseconds) yet covers one family of patterns end to end:
fusions, functional ops, method calls, fixed-qparams ops, weight-only and dynamic quantization.
The exporter's behavioural-equivalence tests and ``bespec check`` both quantize these models with
two BackendConfigs and compare what happened, so the factories must be deterministic: every call
seeds torch before building weights and inputs.

API::

    model, example_inputs = MODELS["conv2d_bn_relu"]()
    for kind, qmap in mappings_for("conv2d_bn_relu").items():   # "static", "dynamic", ...
        prepared = prepare_fx(model, qmap, example_inputs, backend_config=bc)
"""

from __future__ import annotations

from collections.abc import Callable

from backend_spec._torch import quiet, torch

nn = torch.nn
F = torch.nn.functional

#: Seed used by every factory so that two calls give bit-identical models and inputs.
SEED = 0

ModelFactory = Callable[[], tuple[nn.Module, tuple]]


def _seeded() -> torch.Generator:
    torch.manual_seed(SEED)
    return torch.Generator().manual_seed(SEED)


class ConvBnRelu(nn.Module):
    """Conv-BN-ReLU and Conv-ReLU / Conv-BN blocks in one spatial dimensionality."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dim]
        bn = {1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dim]
        self.conv1, self.bn1, self.relu1 = conv(3, 8, 3, padding=1), bn(8), nn.ReLU()
        self.conv2, self.relu2 = conv(8, 8, 3, padding=1), nn.ReLU()
        self.conv3, self.bn3 = conv(8, 4, 1), bn(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        return self.bn3(self.conv3(x))


class ConvTransposeBn(nn.Module):
    """ConvTranspose2d followed by BatchNorm2d (fused by fbgemm/x86), then ConvTranspose1d."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.deconv = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.deconv(self.conv(x))))


class DepthwiseHardswish(nn.Module):
    """A MobileNetV3-style block: depthwise conv, hardswish, cat, sigmoid and tanh."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 8, 1)
        self.hswish = nn.Hardswish()
        self.gate = nn.Sigmoid()
        self.head = nn.Conv2d(16, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.hswish(self.dw(x))
        y = self.pw(y) * self.gate(y)
        z = torch.cat([x, y], dim=1)
        return torch.tanh(self.head(z))


class Mlp(nn.Module):
    """Linear-BN1d, Linear-ReLU, LayerNorm, ``F.linear`` and ``torch.matmul``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(16, 32), nn.BatchNorm1d(32)
        self.fc2, self.relu2 = nn.Linear(32, 32), nn.ReLU()
        self.norm = nn.LayerNorm(32)
        self.w3 = nn.Parameter(torch.randn(16, 32) * 0.2)
        self.b3 = nn.Parameter(torch.zeros(16))
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn1(self.fc1(x))
        x = self.relu2(self.fc2(x))
        x = self.norm(x)
        x = F.linear(x, self.w3, self.b3)
        return torch.matmul(x, self.proj(x).t())


class FunctionalConv(nn.Module):
    """``F.conv2d`` + ``F.relu`` with ``F.interpolate`` and tensor method calls."""

    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(8, 3, 3, 3) * 0.2)
        self.b1 = nn.Parameter(torch.zeros(8))
        self.w2 = nn.Parameter(torch.randn(4, 8, 1, 1) * 0.2)
        self.fc = nn.Linear(4 * 16 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # stride/padding/dilation as lists: torch's lowering of F.conv2d passes them to prepack.
        x = F.relu(F.conv2d(x, self.w1, self.b1, [1, 1], [1, 1], [1, 1], 1))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = F.conv2d(x, self.w2, None, [1, 1], [0, 0], [1, 1], 1)
        x = x.reshape(x.shape[0], 4, 16, 16).contiguous()
        x = x.flatten(1).view(x.shape[0], -1)
        return self.fc(x).relu()


class EmbeddingModel(nn.Module):
    """An embedding lookup followed by a linear head (weight-only quantizes the table)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 16)
        self.fc = nn.Linear(16, 8)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.fc(self.emb(idx))


class LstmModel(nn.Module):
    """An LSTM followed by a linear head, the classic dynamic-quantization target."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.fc = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out)


class NormShuffle(nn.Module):
    """GroupNorm, InstanceNorm2d and pixel shuffle between convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.gn = nn.GroupNorm(4, 16)
        self.shuffle = nn.PixelShuffle(2)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gn(self.conv1(x))
        x = self.shuffle(x)
        x = self.inorm(x)
        return F.pixel_unshuffle(self.conv2(x), 2)


def _build(module_cls: Callable[[], nn.Module], *shape: int) -> tuple[nn.Module, tuple]:
    gen = _seeded()
    model = module_cls().eval()
    _randomize_batchnorm(model)
    return model, (torch.randn(*shape, generator=gen),)


def _randomize_batchnorm(model: nn.Module) -> None:
    """Give BatchNorm layers non-trivial statistics, so that folding them is actually tested."""
    gen = torch.Generator().manual_seed(SEED + 1)
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def conv1d_bn_relu() -> tuple[nn.Module, tuple]:
    return _build(lambda: ConvBnRelu(1), 2, 3, 32)


def conv2d_bn_relu() -> tuple[nn.Module, tuple]:
    return _build(lambda: ConvBnRelu(2), 2, 3, 16, 16)


def conv3d_bn_relu() -> tuple[nn.Module, tuple]:
    return _build(lambda: ConvBnRelu(3), 1, 3, 6, 8, 8)


def conv_transpose_bn() -> tuple[nn.Module, tuple]:
    return _build(ConvTransposeBn, 2, 3, 16, 16)


def depthwise_hardswish() -> tuple[nn.Module, tuple]:
    return _build(DepthwiseHardswish, 2, 3, 16, 16)


def mlp() -> tuple[nn.Module, tuple]:
    return _build(Mlp, 8, 16)


def functional_conv() -> tuple[nn.Module, tuple]:
    return _build(FunctionalConv, 2, 3, 8, 8)


def embedding() -> tuple[nn.Module, tuple]:
    gen = _seeded()
    model = EmbeddingModel().eval()
    return model, (torch.randint(0, 100, (4, 12), generator=gen),)


def lstm() -> tuple[nn.Module, tuple]:
    return _build(LstmModel, 2, 10, 16)


def norm_shuffle() -> tuple[nn.Module, tuple]:
    return _build(NormShuffle, 2, 3, 8, 8)


#: name -> factory returning ``(model.eval(), example_inputs)``; deterministic.
MODELS: dict[str, ModelFactory] = {
    "conv1d_bn_relu": conv1d_bn_relu,
    "conv2d_bn_relu": conv2d_bn_relu,
    "conv3d_bn_relu": conv3d_bn_relu,
    "conv_transpose_bn": conv_transpose_bn,
    "depthwise_hardswish": depthwise_hardswish,
    "mlp": mlp,
    "functional_conv": functional_conv,
    "embedding": embedding,
    "lstm": lstm,
    "norm_shuffle": norm_shuffle,
}

#: Which quantization kinds make sense for each model. Static is the default; the embedding
#: model is quantized weight-only, the LSTM dynamically (int8 and fp16).
_KINDS: dict[str, tuple[str, ...]] = {
    "embedding": ("weight_only",),
    "lstm": ("dynamic", "fp16"),
    "mlp": ("static", "dynamic", "fp16"),
}


def mapping_kinds(name: str) -> tuple[str, ...]:
    """The quantization kinds (``static``, ``dynamic``, ``fp16``, ``weight_only``) of a model."""
    if name not in MODELS:
        raise KeyError(name)
    return _KINDS.get(name, ("static",))


def mappings_for(name: str, engine: str = "x86") -> dict[str, object]:
    """The QConfigMappings appropriate for model ``name``, by kind (see :func:`mapping_kinds`).

    ``engine`` picks torch's default static qconfigs (``x86``, ``fbgemm``, ``qnnpack``, ...), which
    differ in their activation range (``reduce_range`` on x86/fbgemm).
    """
    return {kind: make_mapping(kind, engine) for kind in mapping_kinds(name)}


def make_mapping(kind: str, engine: str = "x86"):
    """One QConfigMapping of torch's defaults for a quantization kind."""
    with quiet():
        from torch.ao.quantization import (
            QConfigMapping,
            default_dynamic_qconfig,
            float16_dynamic_qconfig,
            float_qparams_weight_only_qconfig,
            get_default_qconfig_mapping,
        )

        if kind == "static":
            return get_default_qconfig_mapping(engine)
        if kind == "dynamic":
            return _dynamic_mapping(QConfigMapping(), default_dynamic_qconfig)
        if kind == "fp16":
            return _dynamic_mapping(QConfigMapping(), float16_dynamic_qconfig)
        if kind == "weight_only":
            return QConfigMapping().set_object_type(nn.Embedding, float_qparams_weight_only_qconfig)
    raise ValueError(f"unknown quantization kind {kind!r}")


def _dynamic_mapping(qmap, qconfig):
    """A global dynamic qconfig: the backend config quantizes only the ops it has dynamic kernels
    for (linear, recurrent cells), and fused partners such as ReLU must share the qconfig."""
    return qmap.set_global(qconfig)
