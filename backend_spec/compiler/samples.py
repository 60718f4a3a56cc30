"""Float modules sized for a sample input: the recipes that stand in for a user's layers.

Both the compiler (which calls each fuser on float modules of its pattern, to prove it builds
the declared fused module) and the check (which strings whole models together) make their
modules here, so a module is built the same way wherever bespec needs one.
"""

from __future__ import annotations

from backend_spec._torch import torch

nn = torch.nn

#: Sample input shapes per layout. Channels (4) are divisible by 4 for pixel shuffle; spatial
#: sizes are even for pooling and unshuffle; "flat" and "seq" have 16 features for RNN cells.
LAYOUTS: dict[str, tuple[int, ...]] = {
    "1d": (2, 4, 16),
    "2d": (2, 4, 8, 8),
    "3d": (2, 4, 4, 6, 6),
    "flat": (4, 16),
    "seq": (2, 5, 16),
    "tokens": (4, 6),
}

#: Vocabulary of synthesized embeddings.
VOCAB = 50


class SkipPattern(Exception):
    """The pattern cannot be exercised by a synthesized model; the message says why."""


def module_layout(cls: type) -> str | None:
    """The input layout (a key of :data:`LAYOUTS`) a float module family needs, or None."""
    if issubclass(cls, (nn.Embedding, nn.EmbeddingBag)):
        return "tokens"
    if issubclass(cls, nn.RNNBase):
        return "seq"
    if issubclass(cls, (nn.Linear, nn.RNNCellBase, nn.LayerNorm)):
        return "flat"
    return None


def name_layout(name: str) -> str | None:
    """The layout an op's name implies: ``linear`` is flat, ``...2d`` / ``...2D`` is 2d."""
    if name in ("linear", "layer_norm"):
        return "flat"
    for suffix in ("1d", "2d", "3d"):
        if name.endswith(suffix) or name.endswith(suffix.upper()):
            return suffix
    return None


def float_module(cls: type, x: torch.Tensor, keep_width: bool = False) -> nn.Module:
    """Constructor arguments per module family, sized for ``x``. Convolutions and linear
    layers widen to 8 channels / 16 features unless ``keep_width``: then any order of the
    modules fits (a legacy reversed pattern puts a BatchNorm before its conv)."""
    channels = x.shape[1] if x.dim() > 1 else 1
    features = x.shape[-1]
    mods = nn.modules
    if issubclass(cls, mods.conv._ConvNd):
        return cls(channels, channels if keep_width else 8, 3, padding=1)
    if issubclass(cls, nn.Linear):
        return cls(features, features if keep_width else 16)
    if issubclass(cls, mods.batchnorm._BatchNorm):
        return randomized_bn(cls(channels))
    if issubclass(cls, mods.instancenorm._InstanceNorm):
        return cls(channels, affine=True)
    if issubclass(cls, nn.GroupNorm):
        return cls(2, channels)
    if issubclass(cls, nn.LayerNorm):
        return cls(features)
    if issubclass(cls, (nn.Softmax, nn.LogSoftmax, nn.Softmin)):
        return cls(dim=-1)
    if issubclass(cls, (mods.pooling._MaxPoolNd, mods.pooling._AvgPoolNd)):
        return cls(2)
    if issubclass(cls, (mods.pooling._AdaptiveAvgPoolNd, mods.pooling._AdaptiveMaxPoolNd)):
        return cls(2)
    if issubclass(cls, (nn.PixelShuffle, nn.PixelUnshuffle)):
        return cls(2)
    if issubclass(cls, nn.Embedding):
        return cls(VOCAB, 16)
    if issubclass(cls, nn.EmbeddingBag):
        return cls(VOCAB, 16, mode="sum")
    if issubclass(cls, nn.RNNBase):
        return cls(features, 16, batch_first=True)
    if issubclass(cls, nn.RNNCellBase):
        return cls(features, 16)
    if issubclass(cls, nn.Upsample):
        return cls(scale_factor=2, mode="nearest")
    try:
        return cls()
    except TypeError as exc:
        raise SkipPattern(f"no recipe to construct {cls.__name__}: {exc}") from exc


def randomized_bn(bn: nn.Module) -> nn.Module:
    """Non-trivial statistics, so that folding BatchNorm into a conv is really exercised."""
    n = bn.num_features
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
        bn.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
        bn.weight.copy_(torch.rand(n, generator=gen) + 0.5)
        bn.bias.copy_(torch.randn(n, generator=gen) * 0.1)
    return bn
