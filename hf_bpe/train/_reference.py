"""A slow, obviously correct BPE trainer: the definition that `hf_bpe.train.merging.merge_loop` must match exactly.

Every step counts all adjacent pairs from scratch, takes the max by (count, (left bytes, right bytes)), and merges it
left to right in every word. Only for tests on small inputs. Training may also continue from a base tokenizer's
merges (`reference_extend_from_counts`): the same loop, started from the words as the base encodes them.

Pre-tokens: GPT-2's with hf_bpe's pinned pattern, as always; any other pattern (`pattern=`, a preset name or regex
text) runs as plain `regex` module text, independent of hf_bpe's own pattern machinery. The `regex` module has its
own Unicode tables, so the tests keep to characters on which those agree with the pinned ones.
"""

from __future__ import annotations

import math
import re
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import regex

from hf_bpe.pretokenize import GPT2_PATTERN, pretokenize, resolve_pattern


def reference_pretokenize(text: str, pattern: str | None = None) -> list[str]:
    r"""The pre-tokens of a document: GPT-2's (None), or the matches of `pattern` run by the `regex` module, with the
    text between matches kept as pre-tokens of its own (as `tokenizers`' Split pre-tokenizer keeps it).

    >>> reference_pretokenize("ab12345", "cl100k"), reference_pretokenize("ab!", r"\p{L}")
    (['ab', '123', '45'], ['a', 'b', '!'])
    """
    regex_text = resolve_pattern(pattern)
    if regex_text == GPT2_PATTERN:
        return pretokenize(text)
    pretokens, position = [], 0
    for match in regex.finditer(_braced_escapes(_end_of_text_anchors(regex_text)), text):
        if match.start() > position:
            pretokens.append(text[position:match.start()])
        pretokens.append(match.group())
        position = match.end()
    if position < len(text):
        pretokens.append(text[position:])
    return pretokens


def _braced_escapes(pattern: str) -> str:
    r"""The pattern with each `\x{...}` (Oniguruma's and hf_bpe's code point escape, which the superword preset is
    written with) written as the `regex` module reads it, `\U` and eight hex digits.

    >>> _braced_escapes(r"[\x{b2}-\x{1F600}]|\\x{41}")
    '[\\U000000b2-\\U0001f600]|\\\\x{41}'
    """
    return regex.sub(r"(?<!\\)((?:\\\\)*)\\x\{([0-9a-fA-F]+)\}",
                     lambda match: f"{match[1]}\\U{int(match[2], 16):08x}", pattern)


def _end_of_text_anchors(pattern: str) -> str:
    r"""The pattern with each `$` outside a class written `\Z`: tiktoken's `$` is the end of the text, the `regex`
    module's also matches before a newline that ends it.

    >>> _end_of_text_anchors(r"a$|[$]|\$|\\$")
    'a\\Z|[$]|\\$|\\\\\\Z'
    """
    result, in_class, index = [], False, 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            result.append(pattern[index:index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            result.append(char)
            index += 1
            for opening in ("^", "]"):  # "]" first in a class, after an optional "^", is a literal
                if pattern.startswith(opening, index):
                    result.append(opening)
                    index += 1
            continue
        if char == "]" and in_class:
            in_class = False
        result.append("\\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(result)


def reference_counts(texts: Iterable[str], special_tokens: Sequence[str] = (), pattern: str | None = None
                     ) -> Counter[bytes]:
    """Pre-token counts with the plain regex, each text split into documents at the special tokens.

    A special token splits where it occurs leftmost, the longest one first when several start at the same place.
    """
    longest_first = sorted(special_tokens, key=lambda token: (-len(token), token))
    special_regex = re.compile("|".join(map(re.escape, longest_first))) if special_tokens else None
    counts: Counter[bytes] = Counter()
    for text in texts:
        for document in special_regex.split(text) if special_regex else [text]:
            counts.update(token.encode("utf-8") for token in reference_pretokenize(document, pattern))
    return counts


def merge_word(word: tuple[Any, ...], pair: tuple[Any, Any], into: Any = None) -> tuple[Any, ...]:
    """Replace each occurrence of `pair` in `word`, scanning left to right, by `into` (default: the pair's bytes
    joined; tokens may also be ids, with the new token's id as `into`).

    >>> merge_word((b"a",) * 5, (b"a", b"a")), merge_word((7, 7, 7), (7, 7), into=300)
    ((b'aa', b'aa', b'a'), (300, 7))
    """
    merged: list[Any] = []
    joined = pair[0] + pair[1] if into is None else into
    position = 0
    while position < len(word):
        if position + 1 < len(word) and (word[position], word[position + 1]) == pair:
            merged.append(joined)
            position += 2
        else:
            merged.append(word[position])
            position += 1
    return tuple(merged)


def reference_train_from_counts(counts: Mapping[bytes, int], vocab_size: int, special_tokens: Sequence[str] = (),
                                *, min_frequency: int = 0, max_token_length: int | None = None
                                ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train by brute force: recount every pair before each merge. Ids 0-255 are the bytes, then the merges, then
    the special tokens; `vocab_size` counts them all. The options as `reference_continue` takes them."""
    vocab = {byte: bytes([byte]) for byte in range(256)}
    words = {tuple(bytes([byte]) for byte in token): count for token, count in counts.items()}
    merges = reference_continue(words, vocab, vocab_size - len(special_tokens), min_frequency=min_frequency,
                                max_token_length=max_token_length)
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def reference_extend_from_counts(counts: Mapping[bytes, int], base_vocab: Mapping[int, bytes],
                                 base_merges: Sequence[tuple[bytes, bytes]], vocab_size: int, *,
                                 min_frequency: int = 0, max_token_length: int | None = None
                                 ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Continue training a base tokenizer (its vocab, special tokens included, and merges): each pre-token is first
    split into base tokens as the encoder does (`reference_encode_word`), then merged by brute force until the vocab
    has `vocab_size` tokens. New tokens take the ids after the base's largest; the base's merges come first.

    >>> base = {byte: bytes([byte]) for byte in range(256)} | {256: b"ab", 300: b"<|endoftext|>"}
    >>> vocab, merges = reference_extend_from_counts({b"abab": 2, b"abc": 1}, base, [(b"a", b"b")], 259)
    >>> merges, vocab[301]
    ([(b'a', b'b'), (b'ab', b'ab')], b'abab')
    """
    vocab = dict(base_vocab)
    words: Counter[tuple[bytes, ...]] = Counter()
    for token, count in counts.items():
        words[reference_encode_word(token, base_merges)] += count
    new_merges = reference_continue(dict(words), vocab, vocab_size, min_frequency=min_frequency,
                                    max_token_length=max_token_length)
    return vocab, [*base_merges, *new_merges]


def reference_encode_word(word: bytes, merges: Sequence[tuple[bytes, bytes]]) -> tuple[bytes, ...]:
    """A pre-token split into tokens as the encoder does it: from single bytes, repeatedly merge the adjacent pair of
    the lowest rank (a pair listed twice has its first rank), the leftmost one first.

    >>> reference_encode_word(b"abcab", [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    (b'a', b'bc', b'ab')
    """
    ranks: dict[tuple[bytes, bytes], int] = {}
    for rank, pair in enumerate(merges):
        ranks.setdefault(pair, rank)
    tokens = [bytes([byte]) for byte in word]
    while True:
        ranked = [(ranks[pair], position) for position, pair in enumerate(zip(tokens, tokens[1:])) if pair in ranks]
        if not ranked:
            return tuple(tokens)
        _, position = min(ranked)
        tokens[position:position + 2] = [tokens[position] + tokens[position + 1]]


def reference_continue(words: dict[tuple[bytes, ...], int], vocab: dict[int, bytes], vocab_size: int, *,
                       min_frequency: int = 0, max_token_length: int | None = None) -> list[tuple[bytes, bytes]]:
    """The merge loop: merge the best pair of `words` (tokens as bytes, with their counts) until `vocab` (updated in
    place, each new token at the id after the largest) has `vocab_size` tokens or no pair is left; return the merges.

    The best pair has the highest count, ties going to the greater (left bytes, right bytes). Pairs that may not be
    merged are passed over:

    - a pair whose token is already in `vocab` (only a base token that the base merges do not make from its own
      bytes can be): every token has one id;
    - with `max_token_length`, a pair whose token has `max_token_length` bytes or more, unless it is two single
      bytes. This is what HF `tokenizers`' BpeTrainer does (its check on a new pair is `<`, in characters of the
      byte-level alphabet, one per byte, and the pairs of single characters are counted before any check), so
      `max_token_length=L` gives tokens of fewer than L bytes.

    Training stops when the best pair counts less than `min_frequency` (as BpeTrainer: `min_frequency > count`).
    """
    merges: list[tuple[bytes, bytes]] = []
    known = set(vocab.values())
    shortest_refused = None if max_token_length is None else max(max_token_length, 3)
    while len(vocab) < vocab_size:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += count
        allowed = [pair for pair in pair_counts if pair[0] + pair[1] not in known
                   and (shortest_refused is None or len(pair[0] + pair[1]) < shortest_refused)]
        if not allowed:
            break
        best = max(allowed, key=lambda pair: (pair_counts[pair], pair))
        if pair_counts[best] < min_frequency:
            break
        merges.append(best)
        vocab[max(vocab) + 1] = best[0] + best[1]
        known.add(best[0] + best[1])
        merged_words: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged_words[merge_word(word, best)] += count
        words = dict(merged_words)
    return merges


def reference_train(texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (),
                    pattern: str | None = None, *, min_frequency: int = 0, max_token_length: int | None = None
                    ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train by brute force on texts (each a separate document, further split at the special tokens)."""
    return reference_train_from_counts(reference_counts(texts, special_tokens, pattern), vocab_size, special_tokens,
                                       min_frequency=min_frequency, max_token_length=max_token_length)


def reference_superword_pretokenize(text: str) -> list[str]:
    r"""SuperBPE's published stage-2 pre-tokens, made as its two `tokenizers` steps make them, by the `regex` module:
    `Digits(individual_digits=False)` isolates each run of numeric characters, then `Split` cuts each piece before
    every group of three digits that ends a run of digits (`(?=(\d{3})+(?!\d))`); empty pieces are dropped.

    >>> reference_superword_pretokenize("By the way, 1234567 is ½12345")
    ['By the way, ', '1', '234', '567', ' is ', '½12', '345']
    """
    return [part for piece in regex.split(r"(\p{N}+)", text)
            for part in regex.split(r"(?=(?:\d{3})+(?!\d))", piece) if part]


def reference_superword_train(texts: Sequence[str], vocab_size: int, transition: int,
                              special_tokens: Sequence[str] = (), pattern: str | None = None,
                              superword_pattern: str | None = None
                              ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """SuperBPE by brute force: train with `pattern` up to `transition` tokens (counted as `vocab_size` counts them:
    bytes, merges and special tokens), then continue from those merges (`reference_extend_from_counts`) on the texts
    cut with `superword_pattern` (None: `reference_superword_pretokenize`) up to `vocab_size`. The special tokens
    take the last ids, after both stages' merges.
    """
    _, merges = reference_train(texts, transition, special_tokens, pattern)
    base = {byte: bytes([byte]) for byte in range(256)} | {256 + rank: left + right
                                                           for rank, (left, right) in enumerate(merges)}
    counts = reference_superword_counts(texts, special_tokens, superword_pattern)
    vocab, merges = reference_extend_from_counts(counts, base, merges, vocab_size - len(special_tokens))
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def reference_superword_counts(texts: Iterable[str], special_tokens: Sequence[str] = (),
                               superword_pattern: str | None = None) -> Counter[bytes]:
    """Stage-2 pre-token counts: the texts split at the special tokens and cut with `superword_pattern` (None:
    `reference_superword_pretokenize`, SuperBPE's published pre-tokenization)."""
    if superword_pattern is not None:
        return reference_counts(texts, special_tokens, superword_pattern)
    documents = reference_counts(texts, special_tokens, r"[\s\S]+")  # each document whole
    counts: Counter[bytes] = Counter()
    for document, count in documents.items():
        for pretoken in reference_superword_pretokenize(document.decode("utf-8")):
            counts[pretoken.encode("utf-8")] += count
    return counts


def reference_parity_train(sources: Mapping[str, Mapping[bytes, int]], vocab_size: int,
                           special_tokens: Sequence[str] = (), *, dev: Mapping[str, Mapping[bytes, int]] | None = None,
                           ratios: Mapping[str, float] | None = None, variant: str = "base", window_size: int = 100,
                           alpha: float = 2.0, global_merges: int = 0, weights: Mapping[str, int] | None = None,
                           min_frequency: int = 0, max_token_length: int | None = None,
                           tie_order: Callable[[tuple[bytes, bytes]], Any] | None = None
                           ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Parity-aware BPE (Foroutan et al. 2025, arXiv 2508.04796) by brute force: each merge is the best pair of the
    language that is worst served at that step, merged in every language. The rules are those of HF `tokenizers`'
    `ParityBpeTrainer` (0.23, `tokenizers/src/models/bpe/parity_trainer.rs`, `do_train`), which follows the
    paper's code, except where said.

    `sources` holds each language's pre-token counts, in language order; `dev` each language's pre-token counts of a
    parallel dev set; `ratios` each language's target compression ratio; `weights` each language's integer multiplier
    of its counts (missing: 1; the same as repeating its text that many times: a weight changes no ranking of pairs
    within its language nor any dev length or compression, only the pooled counts of the global merges and the
    training lengths that choose when there are neither dev sets nor ratios). Ids, `vocab_size`, `min_frequency`
    and `max_token_length` are as `reference_train_from_counts` has them.

    Each step, while the vocab is short of `vocab_size` and some language is not exhausted:

    1. The first `global_merges` merges take the best pair of all languages' (weighted) counts added together; when
       there is none, or it counts less than `min_frequency`, training stops.
    2. After them, a language is chosen among those not exhausted by how much it needs a merge:
       - with `dev`, its dev set's length in tokens (the dev words as split so far times their counts): the
         longest needs it most;
       - with `ratios`, its compression `initial / current` of its own (weighted) training words, both in tokens
         (bytes before any merge), divided by its ratio, `(initial / current) / ratio` in floating point: the
         smallest needs it most. Only the ratios relative to each other count. A language without training text is
         never chosen (ParityBpeTrainer computes 0/0 for it). ParityBpeTrainer takes the dev sets when given both;
         the reference refuses both;
       - with neither, its (weighted) training words' length in tokens: the longest;
       - `variant="base"`: the language most in need, the first in `sources` order among equals;
       - `variant="window"`: the languages ranked by need (equals in `sources` order), the first whose share of the
         last `window_size` choices is at most `alpha / len(sources)` (both divisions in floating point); when
         every one has more, the last ranked. The choice joins the window even when the language then turns out
         exhausted. (ParityBpeTrainer also ranks exhausted languages, last; when only they are left under the
         threshold it takes language 0 or never returns. The reference ranks only the others.)
    3. The chosen language's best pair: the highest count in its (weighted) words, then the greater (left bytes,
       right bytes), as in `reference_continue` (`tie_order`, when given, orders pairs of equal count instead:
       ParityBpeTrainer compares the pairs' byte-level strings, `hf_bpe.formats.gpt2.token_to_str`, which for
       bytes outside `!`-`~`, `¡`-`¬` and `®`-`ÿ` is another order). Only pairs with a positive count are taken,
       and none that `reference_continue` passes over (a token already in the vocab: ParityBpeTrainer would merge
       it again; one of `max_token_length` bytes or more). When it has none, or it counts less than
       `min_frequency`, the language is exhausted for good and the step makes no merge (the paper's code stops
       training there instead).
    4. The pair is merged in every language's training words and every dev word.

    Dev lengths 3 and 6 in tokens: "fr" twice (ties go to the greater pair), then 3 against 2, then 2 against 2:

    >>> reference_parity_train({"en": {b"abc": 3}, "fr": {b"xyz": 2}}, 260,
    ...                        dev={"en": {b"abc": 1}, "fr": {b"xyz": 2}})[1]
    [(b'y', b'z'), (b'x', b'yz'), (b'b', b'c'), (b'a', b'bc')]
    """
    names = list(sources)
    check_parity_options(names, dev, ratios, variant, window_size, alpha, weights)
    multiplier = {name: 1 if weights is None else weights.get(name, 1) for name in names}
    words = [{tuple(bytes([byte]) for byte in token): count * multiplier[name]
              for token, count in sources[name].items() if count * multiplier[name] > 0} for name in names]
    dev_words = None if dev is None else [{tuple(bytes([byte]) for byte in token): count
                                           for token, count in dev[name].items() if count > 0} for name in names]
    initial = [_length_in_tokens(language) for language in words]
    vocab = {byte: bytes([byte]) for byte in range(256)}
    known = set(vocab.values())
    shortest_refused = None if max_token_length is None else max(max_token_length, 3)
    order = tie_order or (lambda pair: pair)
    exhausted = {index for index, total in enumerate(initial) if total == 0} if ratios is not None else set()
    window: deque[int] = deque(maxlen=window_size)
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) < vocab_size - len(special_tokens) and len(exhausted) < len(names):
        if len(merges) < global_merges:
            pooled: Counter[tuple[bytes, bytes]] = Counter()
            for language in words:
                pooled.update(_reference_pair_counts(language))
            best = _reference_best_pair(pooled, known, shortest_refused, order)
            if best is None or pooled[best] < min_frequency:
                break
        else:
            if dev_words is not None:
                need = [_length_in_tokens(language) for language in dev_words]
            elif ratios is not None:  # the smaller the adjusted compression, the greater the need
                need = [-(initial[index] / max(_length_in_tokens(words[index]), 1)) / ratios[name]
                        for index, name in enumerate(names)]
            else:
                need = [_length_in_tokens(language) for language in words]
            ranked = sorted((index for index in range(len(names)) if index not in exhausted),
                            key=lambda index: (-need[index], index))
            chosen = ranked[0]
            if variant == "window":
                chosen = next((index for index in ranked if window.count(index) / window_size
                               <= alpha / len(names)), ranked[-1])
                window.append(chosen)
            counts = _reference_pair_counts(words[chosen])
            best = _reference_best_pair(counts, known, shortest_refused, order)
            if best is None or counts[best] < min_frequency:
                exhausted.add(chosen)
                continue
        merges.append(best)
        vocab[max(vocab) + 1] = best[0] + best[1]
        known.add(best[0] + best[1])
        words = [_merge_all(language, best) for language in words]
        if dev_words is not None:
            dev_words = [_merge_all(language, best) for language in dev_words]
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges


def check_parity_options(names: list[str], dev: Mapping[str, Any] | None, ratios: Mapping[str, float] | None,
                          variant: str, window_size: int, alpha: float, weights: Mapping[str, int] | None) -> None:
    """ValueError for options that `reference_parity_train` cannot follow."""
    if not names:
        raise ValueError("no sources")
    if dev is not None and ratios is not None:
        raise ValueError("give dev sets or ratios, not both")
    for given, what in ((dev, "dev sets"), (ratios, "ratios")):
        if given is not None and list(given) != names:
            raise ValueError(f"the {what} must name the sources, in their order: {names}, got {list(given)}")
    if ratios is not None and not all(math.isfinite(ratio) and ratio > 0 for ratio in ratios.values()):
        raise ValueError(f"ratios must be positive: {dict(ratios)}")
    if weights is not None and not all(name in names and isinstance(weight, int) and weight >= 0
                                       for name, weight in weights.items()):
        raise ValueError(f"weights must be non-negative integers of sources: {dict(weights)}")
    if variant not in ("base", "window"):
        raise ValueError(f"variant must be 'base' or 'window', got {variant!r}")
    if variant == "window" and not (window_size >= 1 and math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"the window variant needs window_size >= 1 and alpha > 0, got {window_size}, {alpha}")


def _length_in_tokens(words: Mapping[tuple[bytes, ...], int]) -> int:
    return sum(len(word) * count for word, count in words.items())


def _reference_pair_counts(words: Mapping[tuple[bytes, ...], int]) -> Counter[tuple[bytes, bytes]]:
    pair_counts: Counter[tuple[bytes, bytes]] = Counter()
    for word, count in words.items():
        for pair in zip(word, word[1:]):
            pair_counts[pair] += count
    return pair_counts


def _reference_best_pair(pair_counts: Mapping[tuple[bytes, bytes], int], known: set[bytes],
                         shortest_refused: int | None, order: Callable[[tuple[bytes, bytes]], Any]
                         ) -> tuple[bytes, bytes] | None:
    """The pair of the highest count, then the greatest by `order`, among those with a positive count whose token is
    not in the vocab and is shorter than `shortest_refused` bytes; None if there is none."""
    allowed = [pair for pair, count in pair_counts.items() if count > 0 and pair[0] + pair[1] not in known
               and (shortest_refused is None or len(pair[0] + pair[1]) < shortest_refused)]
    return max(allowed, key=lambda pair: (pair_counts[pair], order(pair)), default=None)


def _merge_all(words: Mapping[tuple[bytes, ...], int], pair: tuple[bytes, bytes]) -> dict[tuple[bytes, ...], int]:
    merged: Counter[tuple[bytes, ...]] = Counter()
    for word, count in words.items():
        merged[merge_word(word, pair)] += count
    return dict(merged)


def reference_superword_extend(texts: Sequence[str], base_vocab: Mapping[int, bytes],
                               base_merges: Sequence[tuple[bytes, bytes]], base_specials: Sequence[str], keep: int,
                               vocab_size: int, superword_pattern: str | None = None
                               ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """SuperBPE's stage 2 on top of an existing tokenizer, by brute force: the base (its vocab, special tokens
    included, its merges and its special tokens) keeps its first `keep` tokens, counted as `vocab_size` counts them
    (the 256 bytes, its first `keep - 256 - len(base_specials)` merges and its special tokens), and training goes on
    from those merges (`reference_extend_from_counts`) on the texts cut as stage 2 cuts them
    (`reference_superword_counts`) until the vocab has `vocab_size` tokens.

    The ids: with `keep` the base's size, the base's (the new tokens after its largest id). Otherwise as SuperBPE
    trained from scratch lays them out: the bytes at 0-255 (in the order of their ids in the base), the kept merges'
    tokens at 256 + rank, the new merges' tokens, then the special tokens in the base's order.

    >>> base = {byte: bytes([byte]) for byte in range(256)} | {256: b"<s>", 257: b"ab", 258: b"abc"}
    >>> merges = [(b"a", b"b"), (b"ab", b"c")]
    >>> vocab, _ = reference_superword_extend(["ab ab ab"], base, merges, ["<s>"], 259, 261)
    >>> vocab[256], vocab[259], vocab[260]
    (b'<s>', b'ab ', b'ab ab ')
    >>> vocab, _ = reference_superword_extend(["ab ab ab"], base, merges, ["<s>"], 258, 259)
    >>> vocab[256], vocab[257], vocab[258]
    (b'ab', b'ab ', b'<s>')
    """
    if not 256 + len(base_specials) <= keep <= len(base_vocab):
        raise ValueError(f"keep {keep} must be from {256 + len(base_specials)} to the base's size, {len(base_vocab)}")
    counts = reference_superword_counts(texts, base_specials, superword_pattern)
    if keep == len(base_vocab):
        return reference_extend_from_counts(counts, base_vocab, base_merges, vocab_size)
    merges = list(base_merges[:keep - 256 - len(base_specials)])
    byte_ids = sorted(token_id for token_id, token in base_vocab.items() if len(token) == 1)
    vocab = {new_id: base_vocab[token_id] for new_id, token_id in enumerate(byte_ids)}
    vocab |= {256 + rank: left + right for rank, (left, right) in enumerate(merges)}
    vocab, merges = reference_extend_from_counts(counts, vocab, merges, vocab_size - len(base_specials))
    for token in base_specials:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges
