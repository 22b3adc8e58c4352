"""Where `Tokenizer.encode_iterable` may cut a buffer of streamed text: at a special token's edge, or at a safe cut
of the pattern inside a document (hf_bpe.pretokenize.patterns), far enough from the buffer's end that nothing
decided before the cut depends on text still to come.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from hf_bpe.pretokenize import SAFE_SPACE_REGEX, SpecialTokenSplitter


def last_safe_cut(text: str, start: int, limit: int, splitter: SpecialTokenSplitter,
                   safe_cut: re.Pattern[str] | None = SAFE_SPACE_REGEX) -> int:
    """The largest safe cut p with start <= p <= limit in `text` (a buffer whose text may continue), or start.

    `limit` is lowered so that every special token or pre-token boundary decided before p is decided by text
    that is already in the buffer. `safe_cut` is the pattern's safe cut inside a document (None: there is none).
    """
    limit = min(limit, len(text) - splitter.longest - 2)
    if limit <= start:
        return start
    segment_start, segment_end = start, len(text)
    for match in splitter.finditer(text, start):
        if match.start() > limit:
            segment_end = match.start()
            break
        if match.end() > limit:
            return match.start() if match.start() > start else match.end()
        segment_start = match.end()
    # A safe space at p needs its following non-whitespace character inside the same segment.
    space = -1 if safe_cut is None else last_safe_space(text, segment_start, min(limit, segment_end - 2), safe_cut)
    return max(space, segment_start)


def stream_windows(iterable: Iterable[str], caller: str, splitter: SpecialTokenSplitter,
                   safe_cut: re.Pattern[str] | None, window: int) -> Iterator[str]:
    """The text of `iterable` in windows of about `window` characters cut at safe cuts (`last_safe_cut`): at the
    edges of `splitter`'s special tokens or at `safe_cut` (the pattern's; None: none). TypeError, naming `caller`,
    for an item that is not a str.

    >>> list(stream_windows(["a b", " c"], "encode_iterable", SpecialTokenSplitter([]), SAFE_SPACE_REGEX, 4))
    ['a b', ' c']
    """
    pending: list[str] = []
    pending_length = 0
    buffer = ""
    threshold = window
    for chunk in iterable:
        if not isinstance(chunk, str):
            raise TypeError(f"{caller} expects an iterable of str, got {type(chunk).__name__}")
        pending.append(chunk)
        pending_length += len(chunk)
        if len(buffer) + pending_length < threshold:
            continue
        buffer += "".join(pending)
        pending.clear()
        pending_length = 0
        start = 0
        while len(buffer) - start >= window:
            cut = last_safe_cut(buffer, start, start + window, splitter, safe_cut)
            if cut == start:
                cut = last_safe_cut(buffer, start, len(buffer), splitter, safe_cut)
                if cut == start:
                    break
            yield buffer[start:cut]
            start = cut
        buffer = buffer[start:]
        # Text with no safe cut (one huge pre-token) waits until the buffer doubles: linear time overall.
        threshold = max(window, 2 * len(buffer))
    buffer += "".join(pending)
    if buffer:
        yield buffer


def last_safe_space(text: str, low: int, high: int, safe_cut: re.Pattern[str] = SAFE_SPACE_REGEX) -> int:
    """The largest p with low <= p <= high where `safe_cut` matches (by default GPT-2's: text[p] == " " and
    text[p + 1] not whitespace), or -1.

    Searches backwards from `high` in growing windows so that the cost is proportional to the distance scanned.

    >>> last_safe_space("a b c  d", 0, 6), last_safe_space("a b", 0, 0)
    (6, -1)
    """
    width = 256
    while high >= low:
        window_start = max(low, high - width)
        last = -1
        for match in safe_cut.finditer(text, window_start, high + 2):
            last = match.start()
        if last >= 0 or window_start == low:
            return last
        high = window_start
        width *= 4
    return -1


__all__ = ["last_safe_cut", "last_safe_space", "stream_windows"]
