"""The CPU sentence encoder's dense layers on ``ops.linear``: a row's output then depends on that row
alone (one FMA chain per output), so a text's vector does not depend on what else its forward holds,
and a lone text needs no filler to be embedded as the bulk build embeds it."""

from __future__ import annotations

from typing import Any

from ..ops.linear import PackedLinear, pack_linear, rowwise_linear, runs_compiled


class RowwiseForward:
    """Replaces an ``nn.Linear``'s ``forward``: float32 CPU inputs outside autograd run on
    ``rowwise_linear`` with the weights packed when the layer was routed (edit the weights afterwards
    and this layer keeps the old ones); any other input (another device or dtype, a graph being
    recorded) runs ``F.linear`` on the module's own parameters, as it did before routing."""

    def __init__(self, module: Any, layer: PackedLinear) -> None:
        self.module = module
        self.layer = layer

    def __call__(self, x: Any) -> Any:
        import torch

        w = self.module.weight
        if (
            x.device.type != "cpu"
            or w.device.type != "cpu"
            or x.dtype != torch.float32
            or (x.requires_grad and torch.is_grad_enabled())
        ):
            return torch.nn.functional.linear(x, w, self.module.bias)
        y = rowwise_linear(x.detach().reshape(-1, x.shape[-1]), self.layer, backend="cpu")
        return torch.from_numpy(y).reshape(*x.shape[:-1], y.shape[1])


def routable(model: Any) -> bool:
    """True when every matrix product of ``model``'s parameters is an ``nn.Linear`` with float32
    weights: each module holding a parameter of 2 or more dimensions is an ``nn.Linear`` (exactly) of
    float32, or an ``nn.Embedding`` (a lookup). A GPT-2 ``Conv1D``, ``nn.MultiheadAttention``'s own
    projection or a half-precision layer would keep BLAS rows, so such a model is not routed."""
    import torch

    for mod in model.modules():
        for p in mod.parameters(recurse=False):
            if p.ndim < 2 or isinstance(mod, torch.nn.Embedding):
                continue
            if type(mod) is torch.nn.Linear and p.dtype == torch.float32:
                continue
            return False
    return True


def kernel_built() -> bool:
    """True when ``ops.linear.rowwise_linear`` runs its C++ kernel here (``XMEMORY_BACKEND=reference``:
    not, and the layers keep ``F.linear``)."""
    return runs_compiled()


def route_dense_layers(model: Any) -> int:
    """Route every ``nn.Linear`` of a CPU ``model`` to ``ops.linear`` (``RowwiseForward``), packing
    their weights once, here. Returns the number routed: 0 when the kernel is not built or the model
    is not ``routable`` (then nothing is changed)."""
    import torch

    if not kernel_built() or not routable(model):
        return 0
    routed = 0
    for mod in model.modules():
        if type(mod) is torch.nn.Linear:
            bias = None if mod.bias is None else mod.bias.detach()
            mod.forward = RowwiseForward(mod, pack_linear(mod.weight.detach(), bias, backend="cpu"))
            routed += 1
    return routed
