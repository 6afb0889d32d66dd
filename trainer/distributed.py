"""One process or many: `torchrun --nproc-per-node N -m clozeworks train ...` runs DDP.

`setup()` reads torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), joins the process
group (NCCL on GPU, gloo on CPU) and picks the device. Rank 0 alone writes files; the
others send it what only they know (their loader position and RNG states) through
`gather_json`, which moves JSON text as byte tensors: nothing is pickled.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from clozeworks.schemas.errors import UsageError


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    # Whether deterministic kernels were on before `setup` turned them on (None: left as
    # they were); `teardown` puts them back.
    deterministic_before: bool | None = None

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.active:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def gather_json(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank."""
        if not self.active:
            return [value]
        data = torch.frombuffer(bytearray(json.dumps(value).encode()), dtype=torch.uint8)
        size = torch.tensor([data.numel()], device=self.device)
        sizes = [torch.zeros_like(size) for _ in range(self.world_size)]
        dist.all_gather(sizes, size)
        longest = int(max(s.item() for s in sizes))
        padded = torch.zeros(longest, dtype=torch.uint8, device=self.device)
        padded[: data.numel()] = data.to(self.device)
        chunks = [torch.zeros_like(padded) for _ in range(self.world_size)]
        dist.all_gather(chunks, padded)
        return [
            json.loads(bytes(c[: int(s.item())].cpu().tolist()).decode())
            for c, s in zip(chunks, sizes, strict=True)
        ]

    def barrier(self) -> None:
        if self.active:
            dist.barrier()


def setup(device: str, deterministic: bool = False) -> Dist:
    """The process's place in the job; joins the process group under torchrun."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda, but no CUDA device is available")
    if device not in ("cpu", "cuda"):
        raise UsageError(f"device {device!r} is not one of auto, cpu, cuda")
    if device == "cuda" and local_rank >= (count := torch.cuda.device_count()):
        raise UsageError(
            f"local rank {local_rank} has no GPU of its own ({count} visible): start at most "
            f"{count} process(es) per node, or pass --device cpu"
        )
    before = None
    if deterministic:
        before = torch.are_deterministic_algorithms_enabled()
        # cuBLAS reads this when it starts, which is at the first matrix product.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    dev = torch.device(device, local_rank) if device == "cuda" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
    return Dist(rank, world_size, local_rank, dev, deterministic_before=before)


def teardown(d: Dist) -> None:
    if d.deterministic_before is not None:
        torch.use_deterministic_algorithms(d.deterministic_before)
    if d.active and dist.is_initialized():
        dist.destroy_process_group()
