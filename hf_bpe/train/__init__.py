"""Training: count pre-tokens (in parallel, streaming), then merge the most frequent pair until the vocab is full.

`hf_bpe.train._reference` is the plain algorithm, slow and obviously correct: the spec the fast paths equal exactly.
"""

from hf_bpe.train.api import train_bpe, train_bpe_from_counts, train_bpe_from_iterator

__all__ = ["train_bpe", "train_bpe_from_counts", "train_bpe_from_iterator"]
