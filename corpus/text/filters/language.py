"""Language identification filter, with pluggable backends behind optional dependencies.

`langid` (default) is py3langid: its model ships inside the package, so it works offline
(`pip install 'clozeworks[lang]'`). `fasttext` loads a fastText language-ID model from
`model_path` (e.g. lid.176.bin, as datatrove and CCNet use; `pip install
'clozeworks[fasttext]'`). Other identifiers plug in through `register_backend`.
The 0.65 score threshold is datatrove's `LanguageFilter` default.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from clozeworks.corpus.text.filters.base import FilterResult
from clozeworks.schemas.errors import BadInputError, UsageError


class LanguageIdentifier(Protocol):
    def predict(self, text: str) -> tuple[str, float]:
        """(ISO 639-1 code, probability) of the most likely language."""
        ...


_BACKENDS: dict[str, Callable[[str], LanguageIdentifier]] = {}
_LOADED: dict[tuple[str, str], LanguageIdentifier] = {}


def register_backend(name: str, factory: Callable[[str], LanguageIdentifier]) -> None:
    """Make `backend=name` available; `factory(model_path)` builds the identifier."""
    _BACKENDS[name] = factory


def load_backend(name: str, model_path: str = "") -> LanguageIdentifier:
    """The identifier for `name`, loaded once per process. UsageError names the missing extra."""
    key = (name, model_path)
    if key not in _LOADED:
        if name not in _BACKENDS:
            raise UsageError(
                f"unknown language backend {name!r}; available: {', '.join(sorted(_BACKENDS))}"
            )
        _LOADED[key] = _BACKENDS[name](model_path)
    return _LOADED[key]


class _LangId:
    def __init__(self, model_path: str) -> None:
        try:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier
        except ImportError:
            raise UsageError(
                "the language filter's langid backend needs py3langid: "
                "pip install 'clozeworks[lang]'"
            ) from None
        # The model is a numpy archive inside the package (no download, nothing unpickled).
        self._model = LanguageIdentifier.from_model_file(model_path or MODEL_FILE, norm_probs=True)

    @property
    def languages(self) -> list[str]:
        return list(self._model.nb_classes)

    def predict(self, text: str) -> tuple[str, float]:
        lang, score = self._model.classify(text)
        return str(lang), float(score)


class _FastText:
    def __init__(self, model_path: str) -> None:
        if not model_path:
            raise UsageError("the fasttext language backend needs --language-model-path")
        try:
            import fasttext
        except ImportError:
            raise UsageError(
                "the fasttext language backend needs fasttext: pip install 'clozeworks[fasttext]'"
            ) from None
        try:
            self._model = fasttext.load_model(_local_copy(model_path))
        except ValueError as err:  # fastText's words for a missing file or another format
            raise BadInputError(f"{model_path}: not a fastText model ({err})") from None

    @property
    def languages(self) -> list[str]:
        return [str(label).removeprefix("__label__") for label in self._model.get_labels()]

    def predict(self, text: str) -> tuple[str, float]:
        labels, scores = self._model.predict(text.replace("\n", " "), k=1)
        return str(labels[0]).removeprefix("__label__"), float(scores[0])


def _local_copy(path: str) -> str:
    """`path` itself, or for a URL (gs://, s3://: where remote workers read the model from)
    a copy in this process's temporary folder, which fasttext can open."""
    if "://" not in path or path.startswith("file://"):
        return path.removeprefix("file://")
    import hashlib
    import tempfile

    import fsspec

    name = f"cloze-{hashlib.sha256(path.encode()).hexdigest()[:16]}.bin"
    target = Path(tempfile.gettempdir()) / name
    if not target.is_file():
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            with fsspec.open(path, "rb") as src, open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (OSError, ValueError) as err:
            raise BadInputError(f"{path}: cannot read the language model ({err})") from None
        partial.replace(target)
    return str(target)


register_backend("langid", _LangId)
register_backend("fasttext", _FastText)


@dataclass(frozen=True)
class LanguageFilter:
    """Keeps documents whose most likely language is one of `languages` with a score of at
    least `min_score`."""

    name: ClassVar[str] = "language"
    languages: str = field(default="en", metadata={"help": "comma-separated codes to keep"})
    min_score: float = field(default=0.65, metadata={"help": "lowest accepted probability"})
    backend: str = field(default="langid", metadata={"help": "langid or fasttext"})
    model_path: str = field(
        default="", metadata={"help": "model file (fasttext backend; a URL for remote workers)"}
    )

    def worker_files(self) -> list[tuple[str, str]]:
        """(flag, path) of the files the workers open: they must reach them."""
        return [("language-model-path", self.model_path)] if self.backend == "fasttext" else []

    def check(self) -> None:
        """Load the backend now, so a missing extra fails before the pipeline starts, and
        refuse a code it never answers (every document would be dropped)."""
        backend = load_backend(self.backend, self.model_path)
        known = getattr(backend, "languages", None)
        wanted = [code.strip() for code in self.languages.split(",")]
        unknown = [code for code in wanted if known is not None and code not in known]
        if unknown or not all(wanted):
            shown = ", ".join(unknown) or repr(self.languages)
            raise UsageError(
                f"--language-languages: {self.backend} does not identify {shown} "
                f"(it knows {', '.join(sorted(set(known or [])))})"
            )

    def filter(self, text: str) -> FilterResult:
        """Kept or not, with the language identified (the filters after this one use it)."""
        lang, score = load_backend(self.backend, self.model_path).predict(text)
        if lang not in self.languages.split(","):
            return FilterResult(False, "other_language", language=lang)
        if score < self.min_score:
            return FilterResult(False, "low_score", language=lang)
        return FilterResult.kept(language=lang)
