"""merge_table with merges derived from a rank file: the ids they keep give the tables the lookups give."""

from __future__ import annotations

import base64
import pickle
from pathlib import Path

from hf_bpe import Tokenizer
from hf_bpe.encode.merge_table import as_byte_pairs, merge_table, vocab_index
from hf_bpe.formats.tiktoken_merges import DerivedMerges, derive_lazy_merges, derive_merges


def ranks_with_gaps() -> dict[bytes, int]:
    # Ranks with gaps and out of order, and a token reached through a part ranked above it (.:.: = .:. + :).
    singles = {bytes([byte]): 2 * byte for byte in range(256)}
    return singles | {b".:.:": 600, b"th": 515, b".:": 700, b"the": 701, b".:.": 650, b" the": 900, b"he": 513}


def test_known_ids_equal_the_lookups() -> None:
    ranks = ranks_with_gaps()
    merges = derive_merges(ranks).merges
    assert isinstance(merges, DerivedMerges) and (b".:.", b":") in merges and len(merges) == len(ranks) - 256
    token_ids = vocab_index(dict(zip(ranks.values(), ranks)))
    expected = merge_table(token_ids, list(merges))  # a plain list: looked up
    assert merges.known_ids(token_ids) is not None
    assert merge_table(token_ids, merges) == expected
    copied = as_byte_pairs(merges)
    assert type(copied) is DerivedMerges and copied is not merges and merge_table(token_ids, copied) == expected
    assert type(pickle.loads(pickle.dumps(merges))) is list


def test_an_edited_list_or_another_vocab_is_looked_up() -> None:
    ranks = ranks_with_gaps()
    token_ids = vocab_index(dict(zip(ranks.values(), ranks)))
    edited = derive_merges(ranks).merges
    edited[0] = (b"h", b"e")
    assert edited.known_ids(token_ids) is None
    assert merge_table(token_ids, edited) == merge_table(token_ids, list(edited))
    edited.append((b"t", b"h"))
    assert edited.known_ids(token_ids) is None and merge_table(token_ids, edited)[1][-1] == 515
    merges = derive_merges(ranks).merges
    moved = vocab_index({token_id + 1: token for token_id, token in zip(ranks.values(), ranks)})
    assert merges.known_ids(moved) is None
    assert merge_table(moved, merges) == merge_table(moved, list(merges))


def test_lazy_merges_are_the_derived_ones_made_when_read(tmp_path: Path) -> None:
    """from_tiktoken keeps its merges as LazyMerges: the same tables as the derived list, the same pairs once read
    (the merges property, a pickle), and read-only."""
    ranks = ranks_with_gaps()
    lazy, derived = derive_lazy_merges(ranks), derive_merges(ranks).merges
    token_ids = vocab_index(dict(zip(ranks.values(), ranks)))
    assert as_byte_pairs(lazy) is lazy and merge_table(token_ids, lazy) == merge_table(token_ids, list(derived))
    assert lazy._pairs is None and len(lazy) == len(derived)  # nothing made yet
    assert lazy == derived and list(lazy) == list(derived) and lazy[-1] == derived[-1] and (b".:.", b":") in lazy
    assert type(pickle.loads(pickle.dumps(lazy))) is list and not hasattr(lazy, "append")
    path = tmp_path / "gaps.tiktoken"
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                            for token, rank in sorted(ranks.items(), key=lambda item: item[1])))
    tokenizer = Tokenizer.from_tiktoken(path, pattern="cl100k")
    assert tokenizer.merges == tuple(derived) and pickle.loads(pickle.dumps(tokenizer)).merges == tuple(derived)
    text = "the .:.: the th.:.he"
    assert tokenizer.encode(text) == Tokenizer(tokenizer.vocab, list(derived), ignore_merges=True).encode(text)
