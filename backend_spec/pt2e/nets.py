"""Reference nets of the pt2e equivalence check: the shapes the design note measured.

``tutorial_net`` uses only the tutorial spec's ops (conv-relu twice, linear); ``x86_net``
exercises a conv-bn-relu fusion, add-relu, relu6, max-pool, cat, adaptive average pooling,
linear-relu and sigmoid; ``resnet18_net`` is a ResNet-18-shaped model (basic blocks with
downsampling, in-place ReLU and ``+=``). Every factory is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

from backend_spec._torch import torch

nn = torch.nn
F = torch.nn.functional

SEED = 0


class TutorialNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.relu1 = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.conv2, self.relu2 = nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu2(self.conv2(self.relu1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


class X86Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.conv2, self.conv3 = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.relu6, self.pool, self.gap = nn.ReLU6(), nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc_relu, self.fc2 = nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn(self.conv1(x)))
        y = F.relu(self.conv2(x) + x)
        z = self.pool(self.relu6(self.conv3(y)))
        c = torch.flatten(self.gap(torch.cat([self.pool(y), z], 1)), 1)
        return self.gate(self.fc2(self.fc_relu(self.fc1(c))))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1, self.relu = nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18Net(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width)
        self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        layers, cin = [], width
        for cout, stride in ((width, 1), (2 * width, 2), (4 * width, 2), (8 * width, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(cin, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(self.layers(x)), 1))


def _build(cls: Callable[[], nn.Module], *shape: int) -> tuple[nn.Module, tuple]:
    torch.manual_seed(SEED)
    model = cls().eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                n = module.num_features
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                module.weight.copy_(torch.rand(n, generator=gen) + 0.5)
    return model, (torch.randn(*shape, generator=gen),)


def tutorial_net() -> tuple[nn.Module, tuple]:
    return _build(TutorialNet, 2, 3, 8, 8)


def x86_net() -> tuple[nn.Module, tuple]:
    return _build(X86Net, 2, 3, 16, 16)


def resnet18_net() -> tuple[nn.Module, tuple]:
    return _build(ResNet18Net, 2, 3, 64, 64)


#: name -> factory returning ``(model.eval(), example_inputs)``.
NETS: dict[str, Callable[[], tuple[nn.Module, tuple]]] = {
    "tutorial_net": tutorial_net,
    "x86_net": x86_net,
    "resnet18_net": resnet18_net,
}
