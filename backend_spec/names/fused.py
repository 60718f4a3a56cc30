"""Which float modules each of torch's fused modules wraps.

Shared by the check (which builds fused modules from their parts) and the pt2e rule table
(which asks whether a fused module's weight is quantized): a module of its own, so that the
rule table, and with it ``lint`` and ``compile``, need not import the check package.
"""

from __future__ import annotations

from typing import Any

from backend_spec._torch import torch

nn = torch.nn
nni = torch.ao.nn.intrinsic

#: Fused module class -> the float module classes it wraps, in forward order.
FUSED_PARTS: dict[type, tuple[Any, ...]] = {
    nni.ConvReLU1d: (nn.Conv1d, nn.ReLU),
    nni.ConvReLU2d: (nn.Conv2d, nn.ReLU),
    nni.ConvReLU3d: (nn.Conv3d, nn.ReLU),
    nni.ConvBn1d: (nn.Conv1d, nn.BatchNorm1d),
    nni.ConvBn2d: (nn.Conv2d, nn.BatchNorm2d),
    nni.ConvBn3d: (nn.Conv3d, nn.BatchNorm3d),
    nni.ConvBnReLU1d: (nn.Conv1d, nn.BatchNorm1d, nn.ReLU),
    nni.ConvBnReLU2d: (nn.Conv2d, nn.BatchNorm2d, nn.ReLU),
    nni.ConvBnReLU3d: (nn.Conv3d, nn.BatchNorm3d, nn.ReLU),
    nni.LinearReLU: (nn.Linear, nn.ReLU),
    nni.LinearBn1d: (nn.Linear, nn.BatchNorm1d),
    nni.LinearLeakyReLU: (nn.Linear, nn.LeakyReLU),
    nni.LinearTanh: (nn.Linear, nn.Tanh),
    nni.BNReLU2d: (nn.BatchNorm2d, nn.ReLU),
    nni.BNReLU3d: (nn.BatchNorm3d, nn.ReLU),
    nni.ConvAdd2d: (nn.Conv2d, torch.add),
    nni.ConvAddReLU2d: (nn.Conv2d, torch.add, nn.ReLU),
}
