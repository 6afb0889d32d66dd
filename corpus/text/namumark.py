"""NamuWiki's markup (namumark) rendered to plain passages, one paragraph a line, as the
Korean models' preprocessing kept it (namu-wiki-extractor's rules, which KoBERT-era and
KLUE-era corpora were cleaned with) and as the MediaWiki reader keeps Wikipedia's:

- kept: running text, list items and quotes (without their marks), the label of a link
  (the target where there is none, without its `#anchor`), the text inside bold, italic,
  underline, superscript, subscript, size and colour marks, `{{{literal}}}` text as it is
  written, and the contents of `{{{#!wiki}}}` and `{{{#!folding}}}` boxes;
- left out: macros (`[목차]`, `[include(...)]`, `[youtube(...)]`, ...; `[br]` is a line
  break), footnotes (`[* ...]`, `[*name ...]`: their bodies are not running text), tables,
  headings, horizontal rules, `##` comments, struck-through text (`~~...~~`, `--...--`),
  file, image and category links, external links without a label, `<math>`, and
  `{{{#!html}}}` and `{{{#!syntax}}}` blocks.

Braces and brackets are matched with explicit stacks (never recursion), so a hostile page
nests as deep as it likes in linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDIRECT = re.compile(r"\s*#(?:redirect|넘겨주기)\s", re.IGNORECASE)
# Macros, by name; `[br]` alone is kept, as a line break.
MACROS = (
    "date|datetime|include|목차|tableofcontents|각주|footnote|pagecount|youtube|kakaotv|"
    "nicovideo|vimeo|navertv|age|dday|ruby|anchor|clearfix|math|wikicommons|br"
)
_MACRO = re.compile(rf"\[(?:{MACROS})(?:\([^\]\n]*\))?\]", re.IGNORECASE)
_BREAK = re.compile(r"\[br\]", re.IGNORECASE)
# Links whose target is a file, an image or a category: nothing of them is text.
_NOT_TEXT_LINK = re.compile(r"^\s*(?:파일|file|이미지|image|분류|category)\s*:", re.IGNORECASE)
_EXTERNAL = re.compile(r"^\s*(?:https?|ftp)://", re.IGNORECASE)
# Each inline mark with the text that must be present for its pass to run.
_INLINE = [
    ("'''", re.compile(r"'''(.+?)'''")),
    ("''", re.compile(r"''(.+?)''")),
    ("__", re.compile(r"__(.+?)__")),
    ("^^", re.compile(r"\^\^(.+?)\^\^")),
    (",,", re.compile(r",,(.+?),,")),
]
_STRUCK = re.compile(r"~~.+?~~|--.+?--")
_MATH = re.compile(r"<math>.*?</math>", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"^##.*$", re.MULTILINE)
_HEADING_OR_RULE = re.compile(r"^[ \t]*(?:(={1,6})#?[ \t].*[ \t]#?\1|-{4,10})[ \t]*$", re.M)
_LIST = re.compile(r"^[ \t]+(?:\*|[1AaIi]\.(?:#\d+)?)[ \t]*", re.MULTILINE)
_QUOTE = re.compile(r"^[ \t]*>+[ \t]?", re.MULTILINE)
_SIZE_OR_COLOUR = re.compile(r"^(?:[+-][1-5]|#[0-9A-Za-z,#]+)[ \t\n]")
# Literal text is held out of the markup passes as a private-use placeholder.
_HOLD, _END = "\ue000", "\ue001"
_HELD = re.compile(f"{_HOLD}(\\d+){_END}")
_BRACKETS = re.compile(r"(\[\*|\[|\])")
# Runs of blanks, and the single blanks that are not a space (a lone space is left alone:
# replacing every space with itself is most of the cost of this pass).
_SPACES = re.compile(r"[ \t\u00a0]{2,}|[\t\u00a0]")


def is_redirect(text: str) -> bool:
    return REDIRECT.match(text) is not None


def render(text: str) -> str:
    """The plain passages of a page's namumark, one paragraph a line: whole-text passes,
    each skipped where its mark is absent (most of a page is plain text)."""
    text = text.replace(_HOLD, "").replace(_END, "")
    held: list[str] = []
    if "##" in text:
        text = _COMMENT.sub("", text)
    if "{{{" in text:
        text = _braces(text, held)
    if "||" in text:
        text = "\n".join(_without_tables(text.split("\n")))
    text = _QUOTE.sub("", _LIST.sub("", _HEADING_OR_RULE.sub("", text)))
    if "<" in text:
        text = _MATH.sub("", text)
    if "[" in text:
        text = _MACRO.sub("", _BREAK.sub("\n", _footnotes(text)))
        if "[[" in text:
            text = _links(text)
    for mark, pattern in _INLINE:
        if mark in text:
            text = pattern.sub(r"\1", text)
    if "~~" in text or "--" in text:
        text = _STRUCK.sub("", text)
    if held:
        text = _HELD.sub(lambda m: held[int(m.group(1))], text)
    if "  " in text or "\t" in text or "\u00a0" in text:
        text = _SPACES.sub(" ", text)
    lines = (line.strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _braces(text: str, held: list[str]) -> str:
    """`{{{...}}}` resolved innermost first: literal text held, boxes opened, HTML and code
    left out."""
    return _nested(text, "{{{", "}}}", lambda inner: _block(inner, held))


def _nested(text: str, opening: str, closing: str, resolve: Callable[[str], str]) -> str:
    """`text` with each `opening ... closing` pair replaced by `resolve` of what it holds,
    innermost first, in one pass; an opening never closed stays text."""
    stack: list[list[str]] = [[]]
    for piece in re.split(f"({re.escape(opening)}|{re.escape(closing)})", text):
        if piece == opening:
            stack.append([])
        elif piece == closing and len(stack) > 1:
            stack[-2].append(resolve("".join(stack.pop())))
        else:
            stack[-1].append(piece)
    # Openings never closed, in order: each frame took its text before the next opened.
    return "".join(stack[0]) + "".join(opening + "".join(frame) for frame in stack[1:])


def _block(inner: str, held: list[str]) -> str:
    if inner.startswith("#!"):
        kind, _, body = inner[2:].partition("\n")
        name = kind.split(" ", 1)[0].lower()
        if name in ("wiki", "folding"):  # a styled box; a folding box's title line goes
            return "\n" + body + "\n"
        return ""  # html, syntax and anything else is not text
    mark = _SIZE_OR_COLOUR.match(inner)
    if mark:
        return inner[mark.end() :]
    held.append(inner)
    return f"{_HOLD}{len(held) - 1}{_END}"


def _without_tables(lines: list[str]) -> list[str]:
    """The lines outside tables: a row starts with `||` and ends with `||`, a cell may hold
    line breaks."""
    out, in_row = [], False
    for line in lines:
        stripped = line.strip()
        if in_row or stripped.startswith("||"):
            in_row = not (stripped.endswith("||") and (in_row or len(stripped) > 2))
            continue
        out.append(line)
    return out


def _footnotes(text: str) -> str:
    """The text without `[* ...]` footnotes, brackets matched (a footnote holds links)."""
    if "[*" not in text:
        return text
    out: list[str] = []
    depth = 0
    for piece in _BRACKETS.split(text):
        if piece == "[*" or (depth and piece == "["):
            depth += 1
        elif depth and piece == "]":
            depth -= 1
        elif not depth:
            out.append(piece)
    return "".join(out)


def _links(text: str) -> str:
    """`[[target|label]]` -> label, `[[target]]` -> target, innermost first (an image
    inside a link's label); file, image and category links, and bare URLs, to nothing."""
    return _nested(text, "[[", "]]", _link)


def _link(inner: str) -> str:
    target, bar, label = inner.partition("|")
    if _NOT_TEXT_LINK.match(target):
        return ""
    if bar:
        return label
    if _EXTERNAL.match(target):
        return ""
    page = target.split("#", 1)[0] if not target.startswith("#") else target[1:]
    return page.removeprefix("../").removeprefix("/").strip()
