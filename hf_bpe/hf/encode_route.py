"""The direct encode route of `HFBPETokenizer`: encode a whole batch at once, truncate, assemble the outputs.

transformers' slow base class encodes text by text and token by token in Python. This route encodes every text of
a call with one `hf_bpe.Tokenizer.encode_batch` call, then truncates (with the overflowing windows) and assembles
the outputs exactly as the fast tokenizer loaded from the same directory does: the same windows, the same
`overflow_to_sample_mapping`, the same character offsets (tests compare them field by field).

The three stages are plain functions over plain lists:

- `EncodeOptions`: the keyword arguments transformers passes to `_encode_plus`, with their defaults, frozen;
- `truncated_rows`: one sample (a text or a pair) -> its rows (the kept window first, then the overflowing ones), as
  `tokenizers`' `truncate_encodings` and `Encoding.merge_with` make them;
- `assemble`: rows -> the output dict (padding is left to the tokenizer's `pad`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

from transformers.utils import PaddingStrategy, TensorType

try:  # transformers 4.x and 5.x define TruncationStrategy here; older 4.x releases only in transformers.utils
    from transformers.tokenization_utils_base import TruncationStrategy
except ImportError:  # pragma: no cover
    from transformers.utils import TruncationStrategy  # type: ignore[no-redef]

Offsets = list[tuple[int, int]]


@dataclass(frozen=True)
class EncodeOptions:
    """The options of one `tok(...)` call, as transformers passes them to `_encode_plus` (with its defaults)."""

    add_special_tokens: bool = True
    padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD
    truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE
    max_length: int | None = None
    stride: int = 0
    is_split_into_words: bool = False
    pad_to_multiple_of: int | None = None
    padding_side: str | None = None
    return_tensors: str | TensorType | None = None
    return_token_type_ids: bool | None = None
    return_attention_mask: bool | None = None
    return_overflowing_tokens: bool = False
    return_special_tokens_mask: bool = False
    return_offsets_mapping: bool = False
    return_length: bool = False
    verbose: bool = True

    @property
    def truncates(self) -> bool:
        return self.truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and self.max_length is not None

    def as_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments again, for the stock route."""
        return asdict(self)


_OPTION_NAMES = frozenset(field.name for field in fields(EncodeOptions))


def split_encode_options(kwargs: dict[str, Any]) -> tuple[EncodeOptions, dict[str, Any]]:
    """Split `_encode_plus` keyword arguments into the known options and the rest.

    >>> options, rest = split_encode_options({"max_length": 8, "split_special_tokens": True})
    >>> options.max_length, options.stride, rest
    (8, 0, {'split_special_tokens': True})
    """
    options = EncodeOptions(**{name: value for name, value in kwargs.items() if name in _OPTION_NAMES})
    rest = {name: value for name, value in kwargs.items() if name not in _OPTION_NAMES}
    return options, rest


class EncodedText(NamedTuple):
    """One encoded text: its ids and, when asked for, the character span of each token."""

    ids: list[int]
    offsets: Offsets | None = None

    def __getitem__(self, item: Any) -> Any:  # slicing gives an EncodedText, indexing a field
        if isinstance(item, slice):
            return EncodedText(self.ids[item], None if self.offsets is None else self.offsets[item])
        return tuple.__getitem__(self, item)


class Row(NamedTuple):
    """One output row: a window of the first text and, for pairs, a window of the second."""

    first: EncodedText
    second: EncodedText | None


def window_ranges(length: int, max_length: int, stride: int, side: str) -> list[tuple[int, int]]:
    """The [start, stop) windows `tokenizers`' `Encoding.truncate` cuts: the kept one first, then the overflowing.

    Consecutive windows share `stride` tokens; on the right side windows run from the start, on the left from the end.

    >>> window_ranges(10, 4, 1, "right")
    [(0, 4), (3, 7), (6, 10)]
    >>> window_ranges(10, 4, 1, "left")
    [(6, 10), (3, 7), (0, 4)]
    >>> window_ranges(3, 0, 0, "right")
    [(0, 0), (0, 3)]
    """
    if max_length >= length:
        return [(0, length)]
    if max_length == 0:
        return [(0, 0), (0, length)]
    if stride >= max_length:
        raise ValueError(f"stride ({stride}) must be smaller than the length a sequence is truncated to "
                         f"({max_length}), which for a pair is part of max_length")
    step = max_length - stride
    ranges = []
    if side == "right":
        for start in range(0, length, step):
            stop = min(start + max_length, length)
            ranges.append((start, stop))
            if stop == length:
                break
    else:
        for last in range(length - 1, -1, -step):
            start = max(0, last + 1 - max_length)
            ranges.append((start, last + 1))
            if start == 0:
                break
    return ranges


def truncation_lengths(first: int, second: int | None, strategy: TruncationStrategy, max_length: int
                       ) -> tuple[int, int | None]:
    """How many tokens of each sequence to keep, as `tokenizers`' `truncate_encodings` decides (truncation.rs).

    >>> truncation_lengths(5, 2, TruncationStrategy.LONGEST_FIRST, 4)
    (2, 2)
    >>> truncation_lengths(3, 3, TruncationStrategy.LONGEST_FIRST, 3)
    (1, 2)
    """
    if max_length == 0:
        return 0, None if second is None else 0
    to_remove = first + (second or 0) - max_length
    if to_remove <= 0:
        return first, second
    if strategy == TruncationStrategy.LONGEST_FIRST:
        if second is None:
            return max_length, None
        shorter, longer = sorted((first, second))
        longer = shorter if shorter > max_length else max(shorter, max_length - shorter)
        if shorter + longer > max_length:
            shorter = max_length // 2
            longer = shorter + max_length % 2
        return (longer, shorter) if first > second else (shorter, longer)
    if strategy == TruncationStrategy.ONLY_SECOND and second is None:
        raise ValueError("Truncation error: Second sequence not provided")
    target = first if strategy == TruncationStrategy.ONLY_FIRST else second
    assert target is not None
    if target <= to_remove:
        raise ValueError("Truncation error: Sequence to truncate too short to respect the provided max_length")
    if strategy == TruncationStrategy.ONLY_FIRST:
        return first - to_remove, second
    return first, target - to_remove


def truncated_rows(first: EncodedText, second: EncodedText | None, options: EncodeOptions, side: str) -> list[Row]:
    """One sample's rows: the kept window (pair) first, then, if asked for, the overflowing ones.

    For a pair the overflowing rows come in the order `tokenizers`' `Encoding.merge_with` makes them: each
    overflowing window of the first text with the kept second window and then with each overflowing second window,
    then the kept first window with each overflowing second window.
    """
    if not options.truncates:
        return [Row(first, second)]
    max_length = options.max_length
    assert max_length is not None
    first_length, second_length = truncation_lengths(len(first.ids), None if second is None else len(second.ids),
                                                     options.truncation_strategy, max_length)
    stride = options.stride
    first_windows = [first[start:stop] for start, stop in window_ranges(len(first.ids), first_length, stride, side)]
    second_windows = [] if second is None else \
        [second[start:stop] for start, stop in window_ranges(len(second.ids), second_length or 0, stride, side)]
    if not options.return_overflowing_tokens:
        return [Row(first_windows[0], second_windows[0] if second_windows else None)]
    if not second_windows:
        return [Row(window, None) for window in first_windows]
    (first_kept, *first_overflow), (second_kept, *second_overflow) = first_windows, second_windows
    rows = [Row(first_kept, second_kept)]
    for first_window in first_overflow:
        rows.append(Row(first_window, second_kept))
        rows += [Row(first_window, second_window) for second_window in second_overflow]
    rows += [Row(first_kept, second_window) for second_window in second_overflow]
    return rows


def assemble(rows: list[Row], options: EncodeOptions, return_token_type_ids: bool) -> dict[str, list[Any]]:
    """The unpadded output fields of the rows, one list entry per row.

    The fast tokenizer marks in `special_tokens_mask` only tokens it adds itself (none here), not special tokens
    found in the text.
    """
    outputs: dict[str, list[Any]] = {"input_ids": []}
    if return_token_type_ids:
        outputs["token_type_ids"] = []
    if options.return_offsets_mapping:
        outputs["offset_mapping"] = []
    for first, second in rows:
        if second is None:
            outputs["input_ids"].append(first.ids)
        else:
            outputs["input_ids"].append(first.ids + second.ids)
        if return_token_type_ids:
            outputs["token_type_ids"].append([0] * len(first.ids) + [1] * (0 if second is None else len(second.ids)))
        if options.return_offsets_mapping:
            offsets = list(first.offsets or ())
            if second is not None:
                offsets += second.offsets or ()
            outputs["offset_mapping"].append(offsets)
    if options.return_special_tokens_mask:
        outputs["special_tokens_mask"] = [[0] * len(ids) for ids in outputs["input_ids"]]
    return outputs


def pad_offsets(offsets: list[Offsets], lengths: list[int], side: str) -> list[Offsets]:
    """Pad each row of offsets with (0, 0) to the padded length of its ids, as the fast tokenizer does."""
    padded = []
    for row, length in zip(offsets, lengths):
        padding = [(0, 0)] * (length - len(row))
        padded.append(row + padding if side == "right" else padding + row)
    return padded


def is_rectangular(rows: list[list[Any]]) -> bool:
    return bool(rows) and len(rows[0]) > 0 and all(len(row) == len(rows[0]) for row in rows)


def string_pairs(texts: Any, pairs: Any) -> list[tuple[str, str | None]] | None:
    """A batch of texts (or text pairs) as [(text, pair or None)], or None if it is not one made of strings.

    >>> string_pairs(["a", ("b", "c")], None)
    [('a', None), ('b', 'c')]
    >>> string_pairs([["a", "b", "c"]], None) is None
    True
    """
    if not isinstance(texts, (list, tuple)):
        return None
    if pairs is not None:
        if not isinstance(pairs, (list, tuple)) or len(pairs) != len(texts):
            return None
        result = list(zip(texts, pairs))
    else:
        result = []
        for item in texts:
            if isinstance(item, str):
                result.append((item, None))
            elif isinstance(item, (list, tuple)) and len(item) == 2:
                result.append((item[0], item[1]))
            else:
                return None
    if all(isinstance(first, str) and (second is None or isinstance(second, str)) for first, second in result):
        return result
    return None


__all__ = ["EncodeOptions", "EncodedText", "Row", "assemble", "split_encode_options", "string_pairs",
           "truncated_rows", "truncation_lengths", "window_ranges"]
