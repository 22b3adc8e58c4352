"""Where `Tokenizer.encode_iterable` may cut a buffer of streamed text: at a special token's edge, or at a safe cut
of the pattern inside a document (hf_bpe.pretokenize.patterns), far enough from the buffer's end that nothing
decided before the cut depends on text still to come.
"""

from __future__ import annotations

import re

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


__all__ = ["last_safe_cut", "last_safe_space"]
