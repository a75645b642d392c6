"""Exact token counts of a long prompt from the counts of the parts it was joined from.

Fitting a case measures its whole rendered prompt (:mod:`..tasks.fitting`): at 128k tokens that
one tokenisation is ~0.15 s, nine tenths of the case's build time, while the haystack's sentences
and needles were each counted already. For tokenizers whose splitting is known, the prompt's
count follows from those counts exactly, without tokenising the prompt again.

Why it is exact. A byte-level BPE tokenizer (GPT-2's, Llama-3's, Qwen2's, SmolLM2's) first cuts
the text with a regular expression into pre-tokens and merges only inside a pre-token. The
expressions known here have no look-behind, and none of their alternatives matches a
non-whitespace character followed by a whitespace character, except Llama-3's and Qwen2's
punctuation run, which takes the line breaks after it (``" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"``).
So at a *safe cut* (a non-whitespace character, then a space, tab or line break, and not
punctuation then a line break for those two) no pre-token crosses, each side is cut into the
same pre-tokens on its own as in the whole, and the count of the whole is the sum of the counts
of the sides. Added tokens (``<|im_start|>``) are cut out first; none of them may contain
whitespace or strip it, so none crosses a safe cut either.

SentencePiece-style BPE (Gemma 3's: spaces become "\u2581", and merges run over the whole text
with no pre-tokenizer) has no expression to cut at, but a merge only ever makes a token of the
vocabulary: where no token spans the two characters around a cut, no merge crosses it and each
side merges on its own as in the whole. A cut before whitespace is safe unless some token holds
that character pair (for Gemma 3, only ``">\u2581</"`` does), provided no character is dropped
(byte fallback with all 256 byte tokens, or an unknown token). Llama-2's normaliser, which puts
a "\u2581" before the whole text, would put one before each part: it is not covered.

Parts do not always meet at a safe cut (a line break after a sentence's full stop, for
Llama-3; a template's trailing line break). Such a seam is measured in a window from the last
safe cut inside the left part to the first one inside the right part: the seam adds
``count(window) - count(window's left side) - count(window's right side)`` tokens, and windows
are cached by their text. When a part has no safe cut for a window, or the tokenizer is not
one of the known kinds (other expressions or normalisers, Metaspace pre-tokenizers), the caller
tokenises the whole prompt as before.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Protocol

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The expression of a ByteLevel pre-tokenizer with ``use_regex`` (GPT-2, SmolLM2)."""
LINE_BREAK_PATTERNS = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",  # noqa: E501  (Llama-3)
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",  # noqa: E501  (Qwen2)
)
"""Split expressions whose punctuation run takes the line breaks that follow it."""
CUT_WHITESPACE = frozenset(" \t\n\r")
"""What may follow a safe cut: whitespace to every regex engine (Python's ``isspace`` and
Unicode's White_Space disagree on a few control and format characters)."""
LINE_BREAKS = frozenset("\r\n")
METASPACE = "\u2581"
NOT_BEFORE_CUT = "\u180e\u200b" + METASPACE
"""Not whitespace to Python but before a cut treated as if it were (format characters some
engines call spaces; SentencePiece's space)."""
SPACES_TO_METASPACE = {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}
"""The normaliser of SentencePiece-style BPE tokenizers (Gemma 3)."""
_NOT_CUT_WHITESPACE = re.compile(r"[^ \t\n\r]")
_WHITESPACE = re.compile(r"[\s\u180e\u200b\u2581]")
_LINE_BREAK = re.compile(r"[\r\n]")
_TEXT, _TOKENS = attrgetter("text"), attrgetter("tokens")
_FIRST, _LAST = itemgetter(0), itemgetter(-1)
SPECIALS_PROBE = 64
PARAGRAPH_CHARS_KEPT = 32_000_000
"""Characters of paragraphs whose counts a counter keeps (~8 M tokens of passages); a paragraph
over a hundredth of that is counted but not kept."""
"""Characters of a prompt's start that decide which special tokens the backend adds."""


class Part(Protocol):
    """A run of text and its token count when tokenised alone, without special tokens."""

    @property
    def text(self) -> str: ...

    @property
    def tokens(self) -> int: ...


@dataclass(frozen=True)
class CutRule:
    """Where a text may be cut so that its count is the sum of the counts of its sides."""

    line_break_after_punctuation: bool = True
    """Whether a line break may follow punctuation at a cut (not for Llama-3 or Qwen2)."""
    merging: frozenset[tuple[str, str]] = frozenset()
    """(before, after) pairs that a token spans, for a tokenizer that merges across the whole
    text (no pre-tokenizer splits it): a cut there is not safe."""

    def safe(self, before: str, after: str) -> bool:
        """Whether a cut between the characters ``before`` and ``after`` is safe."""
        if after not in CUT_WHITESPACE or before.isspace() or before in NOT_BEFORE_CUT:
            return False
        if (before, after) in self.merging:
            return False
        return self.line_break_after_punctuation or after not in LINE_BREAKS \
            or unicodedata.category(before)[0] in "LN"

    def last_cut(self, text: str) -> int | None:
        """The last safe cut strictly inside ``text``, or None."""
        for position in range(len(text) - 1, 0, -1):
            if text[position] in CUT_WHITESPACE and self.safe(text[position - 1], text[position]):
                return position
        return None

    def first_cut(self, text: str) -> int | None:
        """The first safe cut strictly inside ``text``, or None."""
        for position in range(1, len(text)):
            if text[position] in CUT_WHITESPACE and self.safe(text[position - 1], text[position]):
                return position
        return None


def cut_rule(tokenizer_json: dict[str, Any],
             vocab: Callable[[], Collection[str]] | None = None) -> CutRule | None:
    """The cut rule of a Rust tokenizer's JSON, or None when its counts cannot be shown to add.

    ``vocab`` gives the model's tokens when the rule needs them (default: the JSON's). Two kinds
    are known: byte-level BPE split by a known expression, and SentencePiece-style BPE that
    turns spaces into "▁" and merges across the whole text (Gemma 3), where a cut is safe
    where no token of the vocabulary spans it. Conservative on purpose: any other normaliser or
    pre-tokenizer step, BPE dropout, or an added token that mixes whitespace with other text or
    strips it, and the prompt is tokenised whole.
    """
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout"):
        return None
    for added in tokenizer_json.get("added_tokens") or []:
        content = added.get("content", "")
        if (any(c.isspace() for c in content) and not content.isspace()) or added.get("lstrip") \
                or added.get("rstrip") or added.get("single_word"):
            return None
    normalizer = tokenizer_json.get("normalizer")
    pre_tokenizer = tokenizer_json.get("pre_tokenizer")
    if normalizer == SPACES_TO_METASPACE:
        if pre_tokenizer is not None and not _splits_at_spaces(pre_tokenizer):
            return None
        tokens = vocab() if vocab is not None else (model.get("vocab") or {})
        if METASPACE not in tokens or not _keeps_every_character(model, tokens):
            return None
        return CutRule(merging=_spanned_pairs(tokens))
    if normalizer is not None and normalizer.get("type") != "NFC":
        return None
    return _split_rule(_steps(pre_tokenizer))


def _split_rule(steps: list[dict[str, Any]]) -> CutRule | None:
    """The rule of a byte-level BPE's pre-tokenizer steps, when every step is known."""
    line_break_after_punctuation, splits = True, False
    for step in steps:
        kind = step.get("type")
        if kind == "ByteLevel":
            if step.get("add_prefix_space"):
                return None
            splits = splits or bool(step.get("use_regex", True))
        elif kind == "Split":
            pattern = (step.get("pattern") or {}).get("Regex")
            if step.get("invert") or step.get("behavior") != "Isolated":
                return None
            if pattern in LINE_BREAK_PATTERNS:
                line_break_after_punctuation = False
            elif pattern != GPT2_PATTERN:
                return None
            splits = True
        elif kind != "Digits":
            return None
    return CutRule(line_break_after_punctuation) if splits else None


def _steps(pre_tokenizer: dict[str, Any] | None) -> list[dict[str, Any]]:
    if pre_tokenizer is None:
        return []
    if pre_tokenizer.get("type") == "Sequence":
        steps: list[dict[str, Any]] = pre_tokenizer.get("pretokenizers") or []
        return steps
    return [pre_tokenizer]


def _splits_at_spaces(pre_tokenizer: dict[str, Any]) -> bool:
    """A split at the string " ": it finds none once the normaliser has turned them into
    "▁", so it leaves the text whole."""
    return pre_tokenizer.get("type") == "Split" and \
        pre_tokenizer.get("pattern") == {"String": " "} and not pre_tokenizer.get("invert")


def _keeps_every_character(model: dict[str, Any], tokens: Collection[str]) -> bool:
    """Whether a character missing from the vocabulary still becomes a token of its own (its
    bytes, or the unknown token): a dropped character would let its neighbours merge."""
    if model.get("byte_fallback"):
        return all(f"<0x{byte:02X}>" in tokens for byte in range(256))
    return model.get("unk_token") is not None


def _spanned_pairs(tokens: Iterable[str]) -> frozenset[tuple[str, str]]:
    """The (character, whitespace) pairs inside some token, read with "▁" as a space."""
    pairs = set()
    for token in tokens:
        text = token.replace(METASPACE, " ")
        for position in range(1, len(text)):
            if text[position] in CUT_WHITESPACE and not text[position - 1].isspace():
                pairs.add((text[position - 1], text[position]))
    return frozenset(pairs)


@dataclass
class JoinedCounter:
    """Counts a rendered prompt from the parts its context was joined from (see module doc)."""

    rule: CutRule
    encode: Callable[[str], list[int]]
    """Ids without special tokens."""
    count_prompt: Callable[[str], int]
    """The backend's count of a rendered prompt, special tokens included."""
    count_many: Callable[[list[str]], list[int]]
    """``encode`` lengths of many texts in one call, for counting paragraphs."""
    _seams: dict[tuple[str, str], int] = field(default_factory=dict)
    _paragraphs: OrderedDict[str, int] = field(default_factory=OrderedDict)
    _kept_chars: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """A server backend counts prompts from several threads."""

    def count_paragraphs(self, text: str) -> int | None:
        """The count of a whole prompt from the counts of its paragraphs, each counted once and
        kept while the kept paragraphs hold at most PARAGRAPH_CHARS_KEPT characters. Fitting
        loops (HELMET's passages, 100-LongBench's articles) count prompts that differ in a few
        passages and share their demonstrations, so most paragraphs of the next count are
        known. None for a text of one paragraph (nothing to share), or as for ``count``."""
        paragraphs = [_Paragraph(piece) for piece in _paragraph_texts(text)]
        if len(paragraphs) < 2:
            return None
        with self._lock:
            known = self._paragraphs
            new = list(dict.fromkeys(p.text for p in paragraphs if p.text not in known))
            fresh = dict(zip(new, self.count_many(new), strict=True))
            for paragraph in paragraphs:
                if paragraph.text in known:
                    paragraph.tokens = known[paragraph.text]
                    known.move_to_end(paragraph.text)
                    continue
                paragraph.tokens = fresh[paragraph.text]
                if len(paragraph.text) <= PARAGRAPH_CHARS_KEPT // 100:
                    known[paragraph.text] = paragraph.tokens
                    self._kept_chars += len(paragraph.text)
            while self._kept_chars > PARAGRAPH_CHARS_KEPT:
                self._kept_chars -= len(known.popitem(last=False)[0])
        return self.count(text, text, paragraphs)

    def count(self, rendered: str, context: str, parts: Sequence[Part],
              trim: tuple[int, int] = (0, 0)) -> int | None:
        """The count of ``rendered``, which holds ``context``: the parts' texts joined, less
        ``trim`` characters at the start and the end. None when it cannot be shown exact."""
        at = rendered.find(context) if context else -1
        if at < 0:
            return None
        texts, counts = list(map(_TEXT, parts)), list(map(_TOKENS, parts))
        self._trim(texts, counts, trim)
        total = sum(counts)
        if sum(map(len, texts)) != len(context):
            return None  # not the parts of this context (a context built without them)
        before, after = rendered[:at], rendered[at + len(context):]
        total += self._specials(rendered) + len(self.encode(before)) + len(self.encode(after))
        texts = [text for text in (before, *texts, after) if text]
        for seam in self._seams_of(texts):
            if seam is None:
                return None
            total += seam
        return total

    def _specials(self, rendered: str) -> int:
        """Tokens the backend adds to this prompt (BOS unless the template wrote it)."""
        probe = rendered[:SPECIALS_PROBE]
        return self.count_prompt(probe) - len(self.encode(probe))

    def _trim(self, texts: list[str], counts: list[int], trim: tuple[int, int]) -> None:
        """Cut ``trim`` characters off the ends of ``texts`` in place, counting the cut ones
        again in ``counts``."""
        start, end = trim
        for index in range(len(texts)):
            if not start:
                break
            texts[index], start = texts[index][start:], max(0, start - len(texts[index]))
            counts[index] = len(self.encode(texts[index]))
        for index in range(len(texts) - 1, -1, -1):
            if not end:
                break
            kept = max(0, len(texts[index]) - end)
            texts[index], end = texts[index][:kept], max(0, end - len(texts[index]))
            counts[index] = len(self.encode(texts[index]))

    def _seams_of(self, texts: list[str]) -> Iterator[int | None]:
        """What each unsafe meeting of consecutive texts adds (non-empty texts). The texts'
        last and first characters are gathered into two strings and searched for the joints
        that may be unsafe, so a context of thousands of sentences costs no Python loop."""
        lasts = "".join(map(_LAST, texts[:-1]))
        firsts = "".join(map(_FIRST, texts[1:]))
        suspects = {match.start() for match in _NOT_CUT_WHITESPACE.finditer(firsts)}
        suspects.update(match.start() for match in _WHITESPACE.finditer(lasts))
        if not self.rule.line_break_after_punctuation:
            suspects.update(match.start() for match in _LINE_BREAK.finditer(firsts))
        if self.rule.merging:
            suspects.update(index for index, pair in enumerate(zip(lasts, firsts, strict=True))
                            if pair in self.rule.merging)
        unsafe = {index for index in suspects if not self.rule.safe(lasts[index], firsts[index])}
        for index in sorted(unsafe):
            left, right = texts[index], texts[index + 1]
            # A window ends at the nearest safe cut inside a side, or at the side's far end
            # when that is a safe cut (the text's ends are).
            start = self.rule.last_cut(left)
            if start is None and index - 1 not in unsafe:
                start = 0
            stop = self.rule.first_cut(right)
            if stop is None and index + 1 not in unsafe:
                stop = len(right)
            yield None if start is None or stop is None else self._seam(left[start:],
                                                                        right[:stop])

    def _seam(self, left: str, right: str) -> int:
        """Tokens the meeting of ``left`` and ``right`` adds to the sum of their counts, where
        each is cut at a safe cut (or an end) on its far side; cached by the pair."""
        key = (left, right)
        if key not in self._seams:
            self._seams[key] = (len(self.encode(left + right)) - len(self.encode(left))
                                - len(self.encode(right)))
        return self._seams[key]


@dataclass
class _Paragraph:
    text: str
    tokens: int = 0


def _paragraph_texts(text: str) -> list[str]:
    """``text`` cut before each blank line ("\n\n"), the break kept with what follows."""
    first, *rest = text.split("\n\n")
    return [first, *("\n\n" + piece for piece in rest)]


def rule_of(rust_tokenizer: Any) -> CutRule | None:
    """The cut rule of a ``tokenizers.Tokenizer``, read from its parts (its whole JSON is 12 MB
    for Gemma's vocabulary; the vocabulary is read only when the rule needs it)."""
    def part(component: Any) -> dict[str, Any] | None:
        return json.loads(component.__getstate__()) if component is not None else None

    try:
        model = rust_tokenizer.model
        added = rust_tokenizer.get_added_tokens_decoder().values()
        components = {
            "model": {"type": type(model).__name__, "dropout": getattr(model, "dropout", None),
                      "unk_token": getattr(model, "unk_token", None),
                      "byte_fallback": getattr(model, "byte_fallback", False)},
            "normalizer": part(rust_tokenizer.normalizer),
            "pre_tokenizer": part(rust_tokenizer.pre_tokenizer),
            "added_tokens": [{"content": token.content, "lstrip": token.lstrip,
                              "rstrip": token.rstrip, "single_word": token.single_word}
                             for token in added]}
        return cut_rule(components, lambda: rust_tokenizer.get_vocab(with_added_tokens=False))
    except (AttributeError, TypeError, ValueError):
        return None
