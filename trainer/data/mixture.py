"""Several shard sets mixed by weight (`--data wiki=0.6,books=0.4`).

Each micro-batch comes from one set, drawn with the weights from (seed, rank, batch
number): a pure function, so the sequence of sources is the same after a resume, and
ranks draw independently, so one optimizer step mixes sets across ranks and micro-batches.
Each set keeps its own loader (its own order, masks and epochs): a set drawn more often
than its size warrants repeats sooner, which is what a weight above its share of the data
asks for. The state is the batch count and every set's loader state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from clozeworks.schemas.errors import UsageError
from clozeworks.trainer.data.loader import ShardDataset, ShardLoader

STATE_VERSION = 1


def parse_mixture(text: str) -> dict[str, float]:
    """`a=0.6,b=0.4` -> {"a": 0.6, "b": 0.4}; UsageError naming a bad part."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, weight = part.rpartition("=")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not sep or not name or not value > 0:
            raise UsageError(f"{part!r}: a mixture part is SOURCE=WEIGHT with a weight above 0")
        if name in out:
            raise UsageError(f"{name}: listed twice in the mixture")
        out[name] = value
    return out


def is_mixture(text: str) -> bool:
    return all("=" in part for part in text.split(","))


def check_compatible(datasets: list[ShardDataset]) -> None:
    """The sets of a mixture make one kind of batch: same mode, length and tokenizer."""
    first = datasets[0].manifest
    for ds in datasets[1:]:
        m = ds.manifest
        for what, a, b in (
            ("mode", first.mode, m.mode),
            ("max_seq_len", first.max_seq_len, m.max_seq_len),
            ("tokenizer", first.tokenizer_sha256[:12], m.tokenizer_sha256[:12]),
            ("pre-masking", first.premask, m.premask),
        ):
            if a != b:
                raise UsageError(
                    f"mixture: {datasets[0].source} and {ds.source} differ in {what} "
                    f"({a} vs {b}); the sets of a mixture must make the same kind of batch"
                )


class MixtureLoader:
    """Batches from `loaders`, each batch's set drawn with `weights`; an endless stream
    (one `for` never ends: the training loop counts steps, not epochs)."""

    def __init__(self, loaders: list[ShardLoader], weights: list[float], seed: int, rank: int):
        if len(loaders) != len(weights) or not loaders:
            raise UsageError("a mixture needs one weight per shard set")
        total = float(sum(weights))
        self.loaders = loaders
        self.weights = [w / total for w in weights]
        self.cumulative = np.cumsum(self.weights)
        self.seed = seed
        self.rank = rank
        self.batches = 0
        self.drawn = [0] * len(loaders)

    def choice(self, j: int) -> int:
        u = np.random.default_rng([self.seed, 0x313, self.rank, j]).random()
        return min(int(np.searchsorted(self.cumulative, u, side="right")), len(self.loaders) - 1)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        streams = [_forever(loader) for loader in self.loaders]
        while True:
            k = self.choice(self.batches)
            batch = next(streams[k])
            self.batches += 1
            self.drawn[k] += 1
            yield batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "kind": "mixture",
            "batches": self.batches,
            "drawn": list(self.drawn),
            "weights": list(self.weights),
            "sets": [loader.state_dict() for loader in self.loaders],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "mixture" or len(state.get("sets", [])) != len(self.loaders):
            raise UsageError(
                "the checkpoint's loader state is not a mixture of these "
                f"{len(self.loaders)} shard sets; resume with the same --data"
            )
        if not np.allclose(state["weights"], self.weights):
            raise UsageError(
                f"the checkpoint mixed with weights {state['weights']}, this run with "
                f"{self.weights}; resume with the same weights"
            )
        for loader, saved in zip(self.loaders, state["sets"], strict=True):
            loader.load_state_dict(saved)
        self.batches = int(state["batches"])
        self.drawn = [int(n) for n in state["drawn"]]


def _forever(loader: ShardLoader) -> Iterator[dict[str, torch.Tensor]]:
    while True:
        yield from loader
