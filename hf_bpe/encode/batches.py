"""`Tokenizer.encode_batch` in worker processes: the texts cut into batches, and the function a worker runs.

>>> batches_by_length(["aa", "bb", "cc", "dd"], 2)
[['aa', 'bb'], ['cc', 'dd']]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hf_bpe.pretokenize import SpecialTokenSplitter


def batches_by_length(texts: list[str], count: int) -> list[list[str]]:
    """Cut `texts` into at most `count` consecutive batches of about equal total length."""
    target = max(1, sum(map(len, texts)) // count)
    batches: list[list[str]] = [[]]
    batch_length = 0
    for text in texts:
        if batch_length >= target:
            batches.append([])
            batch_length = 0
        batches[-1].append(text)
        batch_length += len(text)
    return batches


def encode_in_worker(texts: list[str], splitter: SpecialTokenSplitter | None = None) -> list[bytes]:
    """The packed ids of `texts`, encoded by the worker's tokenizer (`hf_bpe.common.parallel.worker_state`) at the
    special tokens of `splitter` (None: all of them)."""
    from hf_bpe.common.parallel import worker_state

    return worker_state()._encode_texts(texts, splitter)


__all__ = ["batches_by_length", "encode_in_worker"]
