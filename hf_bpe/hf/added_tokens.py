"""Finding added tokens in text exactly as the `tokenizers` library does, before BPE runs on the rest.

Tokens added to a tokenizer (special tokens such as `<|endoftext|>`, and any `tok.add_tokens(...)`) are matched in
the raw text first; the text between them is pre-tokenized and merged on its own. `tokenizers`' `AddedVocabulary`
does this in two passes, each a leftmost-longest, non-overlapping scan: first the tokens with `normalized=False`,
then, inside what is left, those with `normalized=True` (no normalizer runs for byte-level BPE). A match is then
checked and widened by the token's flags:

- `single_word`: dropped unless no word character (`\\w` of Rust's regex: alphabetic, marks, digits, connector
  punctuation, joiners) touches it on either side within the piece being scanned; a dropped match still consumes its
  text, so the scan goes on after it;
- `lstrip` / `rstrip`: the match swallows the whitespace before / after it (not past the previous match);
- special tokens are skipped (left as text) when `split_special_tokens=True`.

transformers' slow base class decides `single_word` by spaces only; this module lets `HFBPETokenizer` match the fast
tokenizer instead (tests compare them on random text).

>>> splitter = AddedTokenSplitter([AddedTokenSpec(7, "ab", single_word=True), AddedTokenSpec(8, "<s>", lstrip=True)])
>>> splitter.split("xab ab  <s>!")
[(0, 4, None), (4, 6, 7), (6, 11, 8), (11, 12, None)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import regex

from hf_bpe.formats.hf_directory import AddedTokenSpec

# Rust's regex `\w` and `\s` (Unicode-aware), which `tokenizers` uses for these checks.
_WORD_CHAR = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
_TRAILING_SPACE = regex.compile(r"\p{White_Space}*\Z")
_LEADING_SPACE = regex.compile(r"\p{White_Space}*")

Segment = tuple[int, int, "int | None"]


class _Pass:
    """One leftmost-longest scan over a set of tokens."""

    def __init__(self, tokens: Iterable[AddedTokenSpec]) -> None:
        self.flags = {token.content: token for token in tokens}
        # Longest first: at a given start, the regex takes the first alternative that matches, i.e. the longest.
        contents = sorted(self.flags, key=lambda content: (-len(content), content))
        self.pattern = regex.compile("|".join(map(regex.escape, contents))) if contents else None

    def split(self, text: str, start: int, stop: int, skip_special: bool) -> list[Segment]:
        if self.pattern is None or start == stop:
            return [(start, stop, None)]
        segments: list[Segment] = []
        offset = start
        for match in self.pattern.finditer(text, start, stop):
            token = self.flags[match.group()]
            if skip_special and token.special:
                continue
            begin, end = match.span()
            if token.single_word and ((begin > start and _WORD_CHAR.match(text, begin - 1, begin))
                                      or (end < stop and _WORD_CHAR.match(text, end, end + 1))):
                continue
            if token.lstrip:
                begin = max(_TRAILING_SPACE.search(text, offset, begin).start(), offset)  # type: ignore[union-attr]
            if token.rstrip:
                end = _LEADING_SPACE.match(text, end, stop).end()  # type: ignore[union-attr]
            if begin > offset:
                segments.append((offset, begin, None))
            segments.append((begin, end, token.id))
            offset = end
        if offset < stop or not segments:
            segments.append((offset, stop, None))
        return segments


class AddedTokenSplitter:
    """Splits text into added tokens and the text between them, as `tokenizers` does (see the module docstring)."""

    def __init__(self, tokens: Iterable[AddedTokenSpec]) -> None:
        self.tokens = list(tokens)
        self._passes = [_Pass(token for token in self.tokens if token.normalized == normalized)
                        for normalized in (False, True)]

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def split(self, text: str, skip_special: bool = False) -> list[Segment]:
        """(start, stop, token id or None for text to encode) covering `text` in order, in character positions."""
        segments: list[Segment] = [(0, len(text), None)]
        for scan in self._passes:
            if scan.pattern is None:
                continue
            next_segments: list[Segment] = []
            for start, stop, token_id in segments:
                if token_id is None:
                    next_segments += scan.split(text, start, stop, skip_special)
                else:
                    next_segments.append((start, stop, token_id))
            segments = next_segments
        return segments


def alias_specs(aliases: Mapping[str, int] | None, added: Mapping[int, AddedTokenSpec]) -> list[AddedTokenSpec]:
    """The aliases of special tokens (`hf_bpe.formats.directory_specials`: further tokens for the id of one, as
    tiktoken's o200k_harmony has them) as added tokens with that token's id and flags, for `AddedTokenSplitter`.
    ValueError for an alias of an id that is no added token.

    >>> [(spec.id, spec.content, spec.special) for spec in alias_specs({"<r>": 9}, {9: AddedTokenSpec(9, "<e>", True)})]
    [(9, '<r>', True)]
    """
    specs = []
    for content, token_id in (aliases or {}).items():
        if token_id not in added:
            raise ValueError(f"special token alias {content!r} has id {token_id!r}, which is no added token's")
        specs.append(added[token_id]._replace(content=content))
    return specs


__all__ = ["AddedTokenSpec", "AddedTokenSplitter", "alias_specs"]
