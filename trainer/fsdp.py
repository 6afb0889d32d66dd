"""`--fsdp`: parameters, gradients and optimizer state sharded over the ranks (FSDP2).

DDP keeps a whole copy of the model, its gradients and AdamW's two moments on every rank:
16 bytes per parameter, 5.4 GB for bert-large before any activation. With `fully_shard`
each rank keeps 1/N of them and gathers a layer's parameters only while the layer runs.
Each encoder layer is its own unit (gathered and freed in turn); embeddings, heads and
layers whose blocks are shared across depth (ALBERT) belong to the root unit, since a
parameter can be in one unit only.

Checkpoints stay in the single-process format for the weights (`model.safetensors` as
DDP writes it, so export and `--init-from` read them), gathered on every rank and written
by rank 0; the optimizer state is saved keyed by parameter name (`optimizer_format`
"fqn" in state.json), which only an `--fsdp` run reads back.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch import nn

OPTIMIZER_FORMAT = "fqn"


def shard(
    model: nn.Module, encoder_type: type[nn.Module], device: torch.device, world_size: int
) -> nn.Module:
    """Shard `model` in place over the default process group's `world_size` ranks, on
    `device`'s kind; returns it."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # Named, not left to FSDP's default mesh, which takes the accelerator whenever there is
    # one: a CPU run (gloo) on a GPU machine asked rank 1 for cuda:1.
    mesh = init_device_mesh(device.type, (world_size,))

    layers = [layer for m in model.modules() if isinstance(m, encoder_type) for layer in m.layers]
    owners: Counter[int] = Counter()
    for layer in {id(layer): layer for layer in layers}.values():
        owners.update(id(p) for p in layer.parameters())
    done: set[int] = set()
    for layer in layers:
        if id(layer) in done:
            continue
        done.add(id(layer))
        params = list(layer.parameters())
        # A layer that appears twice (ALBERT "all") or shares a block with another layer
        # ("attention", "ffn") stays in the root unit.
        if layers.count(layer) == 1 and all(owners[id(p)] == 1 for p in params):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def full_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """The whole model and optimizer state on the CPU (every rank must call this)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights, optim = get_state_dict(model, optimizer, options=options)
    return _owning(weights), optim


def _owning(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The gathered weights, each covering its own storage, as safetensors needs to write
    it: a parameter smaller than the ranks' padded shards (ELECTRA's one-row
    `rtd.predict.weight` on 2 ranks) comes back as a view into a larger buffer. Such views
    are copied, once each, so that a tied weight stays one tensor under its two names."""
    copies: dict[tuple, torch.Tensor] = {}
    out = {}
    for name, t in weights.items():
        if t.untyped_storage().nbytes() == t.numel() * t.element_size():
            out[name] = t
        else:
            key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
            if key not in copies:
                copies[key] = t.clone()
            out[name] = copies[key]
    return out


def load_full(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None,
    weights: dict[str, torch.Tensor],
    optim_state: dict[str, Any] | None,
) -> None:
    """Load whole (unsharded) states into the sharded model and optimizer, on every rank."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    # A tied weight (the MLM decoder is the word embedding) is one parameter under two
    # names; it is loaded once, under the first (the other name is the same tensor).
    seen: set[int] = set()
    unique = {}
    for key, tensor in weights.items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            unique[key] = tensor
    options = StateDictOptions(full_state_dict=True, strict=False)
    set_model_state_dict(model, unique, options=options)
    if optimizer is not None and optim_state is not None:
        set_optimizer_state_dict(model, optimizer, optim_state, options=options)


def set_gradient_sync(model: nn.Module, sync: bool) -> None:
    """FSDP2's `no_sync`: skip the reduce-scatter on all but the last micro-batch."""
    model.set_requires_gradient_sync(sync)  # type: ignore[operator]


def full(norm: torch.Tensor) -> torch.Tensor:
    """A gradient norm that may be a DTensor (sharded gradients), as a plain tensor."""
    whole = getattr(norm, "full_tensor", None)
    return whole() if whole is not None else norm
