"""Beam coders for the batches the shard builder shuffles: arrays as bytes, never pickle.

Without these, Beam pickles a `SequenceBatch` whenever it crosses a shuffle; with them the
bytes are the arrays themselves (`corpus.shards.arrays`), on Beam's GroupByKey as through
files (`pipelines/plumbing/shuffle.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from apache_beam.coders import Coder

from clozeworks.corpus.shards import arrays


class ArraysCoder(Coder):  # type: ignore[misc]
    """A value that is a list of 1-d numeric arrays, given how to take it apart and back."""

    def __init__(
        self,
        to_arrays: Callable[[Any], Sequence[np.ndarray]],
        from_arrays: Callable[[Sequence[np.ndarray]], Any],
    ) -> None:
        self.to_arrays = to_arrays
        self.from_arrays = from_arrays

    def encode(self, value: Any) -> bytes:
        return arrays.pack(self.to_arrays(value))

    def decode(self, encoded: bytes) -> Any:
        return self.from_arrays(arrays.unpack(encoded))

    def is_deterministic(self) -> bool:
        return True
