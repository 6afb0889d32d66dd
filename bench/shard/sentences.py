"""Sentence splitters on hard cases and on speed: ours (sentencex + the whitespace rule)
and whichever peers are installed (pysbd, blingfire, nupunkt, syntok).

    python bench/shard/sentences.py

Cases are our own: abbreviations, decimals, initials, quotes, ellipses, code-like tokens.
Speed is measured over 20 MB of realistic documents (bench/corpus.py: Python's reST docs,
Debian copyright files, man pages).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.corpus import realistic_texts
from clozeworks.corpus.text.sentences import split_sentences

CASES = [
    ("Dr. Smith paid $3.50 for it. J. R. R. Tolkien wrote it, e.g. in 1937. Yes! It is.",
     ["Dr. Smith paid $3.50 for it.", "J. R. R. Tolkien wrote it, e.g. in 1937.", "Yes!",
      "It is."]),
    ("The U.S. economy grew 2.5% in Q3. Analysts expected more.",
     ["The U.S. economy grew 2.5% in Q3.", "Analysts expected more."]),
    ("He arrived at 5 p.m. on Monday. It was late.",
     ["He arrived at 5 p.m. on Monday.", "It was late."]),
    ("Mr. and Mrs. Jones live on Elm St. in Springfield. They have two kids.",
     ["Mr. and Mrs. Jones live on Elm St. in Springfield.", "They have two kids."]),
    ("Version 3.11.2 was released. It fixes bugs.",
     ["Version 3.11.2 was released.", "It fixes bugs."]),
    ('She said, "I\'m leaving." Then she left.', ['She said, "I\'m leaving."', "Then she left."]),
    ("Prof. A. B. Clark, Ph.D., spoke first. Everyone listened.",
     ["Prof. A. B. Clark, Ph.D., spoke first.", "Everyone listened."]),
    ("What? No way. Really?! Yes.", ["What?", "No way.", "Really?!", "Yes."]),
    ("I met John F. Kennedy Jr. at the airport. He smiled.",
     ["I met John F. Kennedy Jr. at the airport.", "He smiled."]),
    ("Use os.path.join() here. Then call f.close().",
     ["Use os.path.join() here.", "Then call f.close()."]),
    ("The meeting is on Jan. 5 at the Univ. of Chicago. Bring notes.",
     ["The meeting is on Jan. 5 at the Univ. of Chicago.", "Bring notes."]),
    ("There were 1,000 people. 500 left early.", ["There were 1,000 people.", "500 left early."]),
    ("This is it... Or is it? We'll see.", ["This is it...", "Or is it?", "We'll see."]),
    ("No. 5 is the best. It won.", ["No. 5 is the best.", "It won."]),
    ("He said \u201cHello.\u201d Then he left.", ["He said \u201cHello.\u201d", "Then he left."]),
    ("The vote was 5 vs. 3. It passed.", ["The vote was 5 vs. 3.", "It passed."]),
    ("Born in St. Louis, Mo., she moved. Later she returned.",
     ["Born in St. Louis, Mo., she moved.", "Later she returned."]),
    ("Paragraph one ends here\n\nParagraph two starts",
     ["Paragraph one ends here", "Paragraph two starts"]),
]  # fmt: skip


def _paragraphs(split: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    return lambda t: [s for p in t.split("\n\n") for s in split(p) if s.strip()]


def splitters() -> dict[str, Callable[[str], list[str]]]:
    found: dict[str, Callable[[str], list[str]]] = {"clozeworks (sentencex)": split_sentences}
    try:
        import pysbd

        seg = pysbd.Segmenter(language="en", clean=False)
        found["pysbd"] = _paragraphs(seg.segment)
    except ImportError:
        pass
    try:
        import blingfire

        found["blingfire"] = _paragraphs(lambda t: blingfire.text_to_sentences(t).split("\n"))
    except ImportError:
        pass
    try:
        import nupunkt

        found["nupunkt"] = _paragraphs(nupunkt.sent_tokenize)
    except ImportError:
        pass
    return found


def main() -> None:
    texts = realistic_texts(20)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{len(CASES)} cases; speed over {mb:.1f} MB of real documents (one run, shared machine)")
    for name, split in splitters().items():
        right = sum(
            [" ".join(s.split()) for s in split(t)] == [" ".join(s.split()) for s in want]
            for t, want in CASES
        )
        start = time.perf_counter()
        for t in texts:
            split(t)
        seconds = time.perf_counter() - start
        print(f"{name:24s} {right:3d}/{len(CASES)} right  {mb / seconds:7.2f} MB/s")


if __name__ == "__main__":
    main()
