"""Parameter holders whose module paths match the checkpoint's tensor names."""
import torch
import torch.nn as nn


class Weight(nn.Module):
    """A weight matrix [out, in] named `weight` (and an optional `bias`), used through the
    Numerics linear helpers so the dtype rule of each checkpoint tensor stays explicit."""

    def __init__(self, out_features, in_features, bias=False, std=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.normal_(self.weight, std=in_features ** -0.5 if std is None else std)
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None


class Norm(nn.Module):
    """RMSNorm weight [dim] named `weight`."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
