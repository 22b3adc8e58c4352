"""The one switch from an engine's name to the pipeline that writes a split's token array.

`local` runs `datasets.map` in worker processes and writes `OUT/SPLIT.bin` (`hf_bpe.data.pipeline`); `ray` has Ray
actors write shards of consecutive documents, which concatenate to the same bytes (`hf_bpe.data.ray_tokenize`). The
names are `hf_bpe.cluster.session.ENGINES`.
"""

from __future__ import annotations

from typing import Any

from hf_bpe.cluster.session import check_engine
from hf_bpe.common.files import PathArg
from hf_bpe.data.pipeline import tokenize_dataset
from hf_bpe.data.ray_tokenize import tokenize_dataset_ray


def tokenize_dataset_on(engine: str, tokenizer_dir: PathArg, dataset: str, out_dir: PathArg, *,
                        ray_address: str | None = None, **options: Any) -> dict[str, Any]:
    """Write `dataset`'s split to `out_dir` on `engine`; `options` are that engine's keyword arguments. Returns the
    metadata written. The engine is checked (and ray found) before any work.

    >>> tokenize_dataset_on("spark", "tok", "json", "out")
    Traceback (most recent call last):
    ...
    ValueError: engine must be one of 'local', 'ray', got 'spark'
    """
    check_engine(engine, ray_address)
    if engine == "ray":
        return tokenize_dataset_ray(tokenizer_dir, dataset, out_dir, ray_address=ray_address, **options)
    return tokenize_dataset(tokenizer_dir, dataset, out_dir, **options)
