"""`get_encoding` and `list_encoding_names` over tiktoken's own encodings (`tiktoken_ext.openai_public`): each
constructor's arguments (its pattern, special tokens, and ranks read by `tiktoken.load`) make an hf_bpe-backed
`Encoding`, once per process, as tiktoken keeps them."""

from __future__ import annotations

from .core import Encoding

ENCODINGS: dict[str, Encoding] = {}


def _constructors() -> dict:
    import tiktoken_ext.openai_public

    return tiktoken_ext.openai_public.ENCODING_CONSTRUCTORS


def get_encoding(encoding_name: str) -> Encoding:
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    if encoding_name not in ENCODINGS:
        constructors = _constructors()
        if encoding_name not in constructors:
            raise ValueError(f"Unknown encoding {encoding_name}. Plugins found: ['tiktoken_ext.openai_public']")
        ENCODINGS[encoding_name] = Encoding(**constructors[encoding_name]())
    return ENCODINGS[encoding_name]


def list_encoding_names() -> list[str]:
    return list(_constructors())
