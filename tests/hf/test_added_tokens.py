"""Finding added tokens (hf_bpe.hf.added_tokens) against the `tokenizers` library itself."""

from __future__ import annotations

import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_bpe.formats.gpt2 import load_gpt2
from hf_bpe.formats.hf_directory import build_tokenizers_json
from hf_bpe.hf.added_tokens import AddedTokenSpec, AddedTokenSplitter
from tests import FIXTURES

# Overlapping tokens (one inside another, one the end of another), none of them in the vocab.
CONTENTS = ["€€", "€", "<x>", "x>", "<|eot|>"]
PIECES = ["€€", "€", "a", "<x>", "x>", "<", " ", "  ", "\t", "\n", "é", "_", "1", ".", "\u0301", "\u3000",
          "<|eot|>", "z"]

_vocab, _merges = load_gpt2(FIXTURES / "train-bpe-reference-vocab.json", FIXTURES / "train-bpe-reference-merges.txt")
_BASE_JSON = build_tokenizers_json(_vocab, _merges, [])


def with_tokenizers(flags: list[AddedTokenSpec], text: str, skip_special: bool
                    ) -> tuple[list[AddedTokenSpec], list[tuple[int, int, int]]]:
    """The added tokens with the ids `tokenizers` gives them, and the (start, end, id) of each it finds in `text`."""
    tokenizer = tokenizers.Tokenizer.from_str(_BASE_JSON)
    tokens = {}
    for token in flags:
        added = tokenizers.AddedToken(token.content, single_word=token.single_word, lstrip=token.lstrip,
                                      rstrip=token.rstrip, normalized=token.normalized, special=token.special)
        (tokenizer.add_special_tokens if token.special else tokenizer.add_tokens)([added])
        tokens[tokenizer.token_to_id(token.content)] = token._replace(id=tokenizer.token_to_id(token.content))
    assert min(tokens) >= len(_vocab)  # new ids: BPE never makes them, so every one in the output is a match
    tokenizer.encode_special_tokens = skip_special
    encoding = tokenizer.encode(text)
    return list(tokens.values()), [(start, end, token_id) for token_id, (start, end)
                                   in zip(encoding.ids, encoding.offsets) if token_id in tokens]


@settings(max_examples=300, deadline=None)
@given(flags=st.lists(st.tuples(*[st.booleans()] * 5), min_size=len(CONTENTS), max_size=len(CONTENTS)),
       pieces=st.lists(st.sampled_from(PIECES), max_size=14), skip_special=st.booleans())
def test_matches_equal_the_tokenizers_library(flags, pieces: list[str], skip_special: bool) -> None:
    added = [AddedTokenSpec(-1, content, special, single_word, lstrip, rstrip, normalized)
             for content, (special, single_word, lstrip, rstrip, normalized) in zip(CONTENTS, flags)]
    text = "".join(pieces)
    tokens, expected = with_tokenizers(added, text, skip_special)
    segments = AddedTokenSplitter(tokens).split(text, skip_special)
    assert [segment for segment in segments if segment[2] is not None] == expected
    # The segments cover the text in order.
    assert [start for start, _, _ in segments] == [0] + [stop for _, stop, _ in segments[:-1]]
    assert segments[-1][1] == len(text)


def test_no_tokens_means_one_segment() -> None:
    assert AddedTokenSplitter([]).split("abc") == [(0, 3, None)]
    assert not AddedTokenSplitter([])
