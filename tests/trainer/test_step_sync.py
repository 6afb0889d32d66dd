"""A training step queues its work without waiting for the device: no operation in it
reads a device value back to the host (`.item()`, `float()`, `bool()` of a tensor, a
boolean index or `nonzero`, whose output shape the host must learn). Checked on the CPU by
recording every operation the step dispatches; on a GPU each would be a host-device sync."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from clozeworks.schemas.masking import MaskingSettings
from clozeworks.trainer.batch_index import prepare
from clozeworks.trainer.config import TrainConfig
from clozeworks.trainer.distributed import Dist
from clozeworks.trainer.loop import _Run
from tests.trainer.test_loop import tiny_config

aten = torch.ops.aten
# Operations that make the host wait for the device.
READS = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default}
READS |= {aten.is_nonzero.default, aten.equal.default}


class Reads(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in READS or (func is aten.index.Tensor and _bool_index(args)):
            self.seen.append(str(func))
        return func(*args, **kwargs)


def _bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else []
    return any(i is not None and i.dtype == torch.bool for i in indices)


def tiny(**kw) -> TrainConfig:
    return tiny_config(max_steps=4, log_every=100, save_every=100, **kw)


@pytest.mark.parametrize(
    "config",
    [
        tiny(objectives=("mlm", "nsp")),
        tiny(objectives=("mlm", "nsp", "sbo"), masking=MaskingSettings(kind="span")),
        tiny(objectives=("mlm", "nsp"), model={"family": "albert", "embedding_size": 16}),
        tiny(objectives=("mlm", "rtd"), model={"family": "electra", "embedding_size": 16}),
        tiny(objectives=("mlm", "nsp"), grad_accum=2, unpad=False),
    ],
    ids=["bert", "spanbert", "albert", "electra", "accumulated-padded"],
)
def test_a_training_step_reads_nothing_back_from_the_device(config, nsp_shards, tmp_path):
    run = _Run(config, nsp_shards, tmp_path / "run", Dist())
    loader = iter(run._loader(0))
    for step in range(3):
        micro = [prepare(next(loader), config.unpad) for _ in range(config.grad_accum)]
        scale, _, _ = run._plan(micro)  # the host's share: counts from the host batches
        with Reads() as reads:
            sums, grad_norm = run._apply(micro, scale)
        assert reads.seen == [], f"step {step}: {sorted(set(reads.seen))}"
    # What the log line then reads is right: the step's losses are there and finite.
    assert torch.isfinite(sums["loss"]) and torch.isfinite(grad_norm)


def test_the_detector_sees_a_read(nsp_shards, tmp_path) -> None:
    x = torch.arange(6.0)
    with Reads() as reads:
        float(x.sum())
        x[x > 2]
    assert len(reads.seen) >= 2
    # LAMB cannot take the finite check as a tensor: its step reads it on the host.
    config = tiny(objectives=("mlm", "nsp"), optim={"name": "lamb"})
    run = _Run(config, nsp_shards, tmp_path / "run", Dist())
    micro = [prepare(next(iter(run._loader(0))), config.unpad)]
    scale, _, _ = run._plan(micro)
    with Reads() as reads:
        run._apply(micro, scale)
    assert reads.seen
