"""Word boundaries of Chinese and Japanese, which are written without spaces, from the
segmenters their users rely on: jieba for Chinese (dictionary and HMM; what transformers'
Chinese tokenizers call), fugashi with UniDic Lite for Japanese (MeCab; what
BertJapaneseTokenizer calls). Both are the `[cjk]` extra; a language whose segmenter is
not installed gets the settings that count no words (corpus/text/filters/languages.py).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import cache

Segmenter = Callable[[str], list[str]]


def _jieba() -> Segmenter:
    import jieba

    jieba.setLogLevel(60)  # its "Building prefix dict" lines on stderr, every process

    def segment(text: str) -> list[str]:
        return [w for w in jieba.lcut(text) if not w.isspace()]

    return segment


def _fugashi() -> Segmenter:
    import fugashi

    tagger = fugashi.Tagger()  # UniDic Lite's dictionary, inside its package

    def segment(text: str) -> list[str]:
        return [w.surface for w in tagger(text)]

    return segment


# name -> (module that must be importable, factory)
SEGMENTERS: dict[str, tuple[tuple[str, ...], Callable[[], Segmenter]]] = {
    "jieba": (("jieba",), _jieba),
    "fugashi": (("fugashi", "unidic_lite"), _fugashi),
}


def available(name: str) -> bool:
    modules, _ = SEGMENTERS[name]
    return all(importlib.util.find_spec(m) is not None for m in modules)


@cache
def segmenter(name: str) -> Segmenter:
    """The segmenter `name`, loaded once per process."""
    return SEGMENTERS[name][1]()
