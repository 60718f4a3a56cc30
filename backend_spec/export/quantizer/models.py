"""The verification models: the shapes hand-written quantizers treat differently.

A conv-bn-relu net, an MLP, a residual net with adds, a cat net whose inputs come from a
quantized and a float producer, a pooling/activation net, a small transformer block and an
embedding (integer indices). Each factory is deterministic and returns
``(model.eval(), example_inputs)``.
"""

from __future__ import annotations

from collections.abc import Callable

from backend_spec._torch import torch

nn = torch.nn
F = torch.nn.functional


class ConvBnReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        return F.hardtanh(self.bn2(self.conv2(x)), 0.0, 6.0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.fc1(x))
        x = F.hardtanh(self.fc2(x))
        return self.fc3(x)


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.conv3 = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y) + x)
        z = self.conv3(y) + y
        return z * torch.sigmoid(z)


class CatNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)
        self.conv3 = nn.Conv2d(12, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.relu(self.conv1(x))
        b = F.max_pool2d(self.conv2(x), 3, 1, 1)
        c = torch.tanh(x).repeat(1, 2, 1, 1)[:, :4]
        y = torch.cat([a, b, c], 1)
        return torch.cat([self.conv3(y), F.elu(y[:, :4])], 1)


class PoolAct(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.hardswish(self.conv1(x)), 2)
        x = F.avg_pool2d(F.leaky_relu(self.conv2(x)), 2)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.softmax(self.fc(x), -1)


class Block(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.fc1, self.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, -1)
        shape = (batch, seq, self.heads, width // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.5, -1)
        y = torch.matmul(attn, v).transpose(1, 2).reshape(batch, seq, width)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ModuleNet(nn.Module):
    """Written with modules, as torchvision writes ResNets: quantizers that match source
    partitions by module class (LiteRT's add + ``nn.ReLU`` and ``nn.MaxPool2d``) treat it
    otherwise than the functional nets: a conv-bn-relu stem before ``nn.MaxPool2d``, a
    residual add before an ``nn.ReLU``, ``nn.AdaptiveAvgPool2d`` and a Linear head. (Each ReLU
    is its own module: X86InductorQuantizer raises on one called twice. Neither is in place:
    the probes do not write ``relu_`` apart from ``relu``, so a quantizer that annotates one
    twin only would be refused here on an op the format can state.)"""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.relu1, self.relu2, self.pool = nn.ReLU(), nn.ReLU(), nn.MaxPool2d(2)
        self.avg, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu1(self.bn1(self.conv1(x))))
        y = self.relu2(self.bn2(self.conv2(x)) + x)
        return self.fc(torch.flatten(self.avg(y), 1))


class EmbeddingNet(nn.Module):
    """Token ids -> an embedding table -> a Linear: a quantizer may quantize the table only
    (weight-only, float qparams), the Linear only, or both."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.fc = nn.Linear(16, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.embed(ids)))


def _embedding() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    return EmbeddingNet().eval(), (torch.randint(0, 20, (2, 6), generator=gen),)


def _build(cls: Callable[[], nn.Module], *shape: int) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    model = cls().eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
    return model, (torch.randn(*shape, generator=gen),)


#: name -> factory of ``(model, example_inputs)``.
MODELS: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    "conv_bn_relu": lambda: _build(ConvBnReLU, 2, 3, 8, 8),
    "mlp": lambda: _build(MLP, 4, 16),
    "residual": lambda: _build(Residual, 2, 4, 8, 8),
    "cat": lambda: _build(CatNet, 2, 3, 8, 8),
    "pool_act": lambda: _build(PoolAct, 2, 3, 16, 16),
    "transformer": lambda: _build(Block, 2, 5, 16),
    "embedding": _embedding,
    "modules": lambda: _build(ModuleNet, 2, 3, 8, 8),
}
