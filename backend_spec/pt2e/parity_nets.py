"""Models for comparing a spec's quantizer with a hand-written pt2e Quantizer.

Each exercises something the shipped ports (``specs/xnnpack.yaml``, ``specs/x86_inductor.yaml``)
must get right: fusions written as modules and as functions, residual adds (conv + add with the
other input, L2), cat of a float and a quantized input (B2), propagation through pooling and
flatten only when every input is quantized (L3), outputs left float unless a consumer quantizes
them (L1), scalar and broadcast multiplications, and a transformer block. Every factory is
deterministic and returns ``(model.eval(), example_inputs)``.
"""

from __future__ import annotations

from collections.abc import Callable

from backend_spec._torch import torch
from backend_spec.pt2e.nets import _build

nn = torch.nn
F = torch.nn.functional


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = (
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
        )
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv3 = nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.conv3(x)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act = nn.Linear(16, 32), nn.ReLU()
        self.fc2, self.fc3, self.fc4 = nn.Linear(32, 32), nn.Linear(32, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = torch.tanh(self.fc3(x))
        return self.fc4(x)


class Residual(nn.Module):
    """conv + identity add (+ relu), a downsampling branch, ``+=`` and ``Tensor.add``.

    (Not ``torch.add`` next to ``+``: export numbers both calls ``add_1`` in ``torch_fn`` and
    X86InductorQuantizer then sees one partition with two outputs and raises.)"""

    def __init__(self) -> None:
        super().__init__()
        # One ReLU module per call: X86InductorQuantizer refuses a module called twice.
        self.stem, self.relu1, self.relu2 = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.ReLU()
        self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.down = nn.Conv2d(8, 16, 1, stride=2)
        self.conv3 = nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu1(self.stem(x))
        y = self.relu2(self.bn1(self.conv1(x)) + x)
        z = self.conv2(y)
        z += self.down(y)
        return self.conv3(z).add(z)


class Cat(nn.Module):
    """cat of two quantized convs, and cat of a float op with a quantized one (B2)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 1)
        self.c, self.relu = nn.Conv2d(8, 8, 1), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.a(x), self.b(x)], 1)
        z = torch.cat([torch.sigmoid(y), self.relu(self.c(y))], 1)
        return torch.cat([z, torch.tanh(z)], 1)


class CatGroups(nn.Module):
    """cat share groups: one observer for a cat's inputs and output that, in torchao's prepare,
    also reaches through the producers that propagate their input's qparams (hardtanh and
    max_pool2d after a conv: the conv's output joins the group); a cat of a cat, of a tensor and
    its own max-pool, of a float op and of the same tensor twice."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 1)
        self.c = nn.Conv2d(3, 8, 1)
        self.relu, self.hardtanh = nn.ReLU(), nn.Hardtanh()
        self.pool1, self.pool2, self.pool3 = nn.MaxPool2d(1), nn.MaxPool2d(1), nn.MaxPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.pool1(self.relu(self.a(x))), self.pool2(self.hardtanh(self.b(x)))], 1)
        z = torch.cat([y, self.pool3(y), self.c(x)], 1)
        return torch.cat([torch.sigmoid(z), z, z], 1)


class PoolAct(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.pool, self.avg = nn.MaxPool2d(2), nn.AvgPool2d(2)
        self.hardtanh, self.relu6 = nn.Hardtanh(), nn.ReLU6()
        self.gap, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.hardtanh(self.conv1(x)))
        x = self.avg(self.relu6(self.conv2(x)))
        x = torch.flatten(self.gap(F.hardswish(x)), 1)
        return self.fc(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.gelu, self.fc2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (
            m(h).view(b, t, self.heads, -1).transpose(1, 2) for m in (self.q, self.k, self.v)
        )
        attn = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * 0.5, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(out)
        return x + self.fc2(self.gelu(self.fc1(self.norm2(x))))


class Functional(nn.Module):
    """Functional and method spellings: F.conv2d + F.relu, torch.relu, x.relu(), F.linear."""

    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = (
            nn.Parameter(torch.randn(8, 3, 3, 3)),
            nn.Parameter(torch.randn(8, 8, 1, 1)),
        )
        self.w3 = nn.Parameter(torch.randn(4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(F.conv2d(x, self.w1, padding=1))
        x = torch.relu(F.conv2d(x, self.w2)).relu()
        return F.linear(x.mean((2, 3)), self.w3)


class Policies(nn.Module):
    """L1-L3 and the multiplication cases: a conv read by a float op and a quantized one, a
    conv + add whose other input is a graph input, mul of equal shapes, with a broadcast and with
    a scalar, a linear + add, max-pool / cat / flatten after float and quantized inputs, and
    flatten read by a linear, by a float op and by the output. (Modules are not reused: both
    hand-written quantizers treat a module called twice specially.)"""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.conv3, self.conv4, self.pool = nn.Conv2d(8, 8, 1), nn.Conv2d(8, 8, 1), nn.MaxPool2d(2)
        self.fc1, self.fc2 = nn.Linear(64, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        y = self.conv1(x)
        a, b = torch.sigmoid(y), self.pool(y)
        c = self.conv2(b) + self.pool(skip)
        d = self.conv3(c) * c
        e = (d * 2.0) * torch.sigmoid(d.mean((2, 3), keepdim=True))
        f = torch.cat([self.pool(a), e], 1).mean(1)
        g = torch.flatten(self.pool(torch.sigmoid(f)), 1)
        h = self.fc1(torch.flatten(f, 1)) + g
        tail = torch.flatten(self.pool(self.conv4(d)), 1)
        return self.fc2(F.relu(h)), torch.sigmoid(tail), torch.flatten(self.pool(c), 1)


def _policies() -> tuple[nn.Module, tuple]:
    model, (x,) = _build(Policies, 2, 3, 16, 16)
    gen = torch.Generator().manual_seed(7)
    return model, (x, torch.randn(2, 8, 16, 16, generator=gen))


#: name -> factory returning ``(model.eval(), example_inputs)``.
PARITY_NETS: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    "conv_bn_relu": lambda: _build(ConvBnRelu, 2, 3, 16, 16),
    "mlp": lambda: _build(Mlp, 4, 16),
    "residual": lambda: _build(Residual, 2, 3, 16, 16),
    "cat": lambda: _build(Cat, 2, 3, 16, 16),
    "cat_groups": lambda: _build(CatGroups, 2, 3, 8, 8),
    "pool_act": lambda: _build(PoolAct, 2, 3, 16, 16),
    "transformer": lambda: _build(TransformerBlock, 2, 6, 16),
    "functional": lambda: _build(Functional, 2, 3, 8, 8),
    "policies": _policies,
}
