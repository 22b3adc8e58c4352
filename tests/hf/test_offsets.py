"""Character offsets of byte-level tokens (hf_bpe.hf.offsets) against a plain reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hf_bpe.hf.offsets import char_of_byte, token_offsets


def reference_char_of_byte(text: str) -> list[int]:
    return [index for index, char in enumerate(text) for _ in char.encode("utf-8", "surrogatepass")]


@given(st.text())
def test_char_of_byte_equals_the_reference(text: str) -> None:
    assert char_of_byte(text).tolist() == reference_char_of_byte(text)


@given(text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1), data=st.data())
def test_token_offsets_cover_the_characters_of_their_bytes(text: str, data: st.DataObject) -> None:
    size = len(text.encode("utf-8"))
    cuts = sorted(data.draw(st.sets(st.integers(1, size - 1), max_size=size)) if size > 1 else set())
    bounds = [0, *cuts, size]
    lengths = [end - start for start, end in zip(bounds, bounds[1:])]
    chars = reference_char_of_byte(text)
    expected = [(chars[start], chars[end - 1] + 1) for start, end in zip(bounds, bounds[1:])]
    assert token_offsets(text, lengths) == expected


def test_lengths_that_are_not_the_text_are_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="add up to 3 bytes, the text has 2"):
        token_offsets("é", [3])
