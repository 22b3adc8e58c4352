"""The merge loop's queues: a bucket queue given the pairs it starts with (`filed`, as parity-aware training gives its
byte pairs' counts per field) pops what one that finds them in the packed counts pops."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hf_bpe.train.merging.merge_loop import token_order_keys
from hf_bpe.train.merging.queues import QUEUES

WIDTH = 6  # bits per field
FIELDS = 3

packed_pairs = st.dictionaries(
    st.tuples(st.integers(97, 102), st.integers(97, 102)).map(lambda pair: chr(pair[0]) + chr(pair[1])),
    st.lists(st.integers(0, (1 << (WIDTH - 1)) - 1), min_size=FIELDS, max_size=FIELDS), min_size=1)


@given(packed_pairs, st.integers(0, FIELDS - 1), st.sampled_from([0, 1, 2, 4, 8]))
def test_a_queue_given_its_pairs_pops_as_one_that_finds_them(fields: dict[str, list[int]], field: int,
                                                            floor: int) -> None:
    pair_counts = {pair: sum(count << (index * WIDTH) for index, count in enumerate(counts))
                   for pair, counts in fields.items()}
    token_keys = token_order_keys([bytes([byte]) for byte in range(256)])
    shift, mask = field * WIDTH, (1 << WIDTH) - 1
    kept = [(pair, counts[field]) for pair, counts in fields.items() if counts[field] >= max(floor, 1)]
    given_pairs = QUEUES["buckets"](pair_counts, token_keys, floor, field=(shift, mask),
                                    filed=([pair for pair, _ in kept],
                                           np.array([count for _, count in kept], dtype=np.int64)))
    found = QUEUES["buckets"](pair_counts, token_keys, floor, field=(shift, mask))
    popped = [iter(given_pairs.pop, None), iter(found.pop, None)]
    assert list(popped[0]) == list(popped[1])
    assert given_pairs.pop() is None and found.pop() is None
