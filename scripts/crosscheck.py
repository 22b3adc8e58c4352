"""Encode corpora with four independent implementations of a saved tokenizer directory and compare the ids.

Usage: python scripts/crosscheck.py DIR CORPUS... [--max-docs N]

The encoders: hf_bpe (`vocab.json` + `merges.txt`), `tokenizers` (`tokenizer.json`), transformers' `AutoTokenizer`
(the fast tokenizer) and tiktoken (an `Encoding` built from `vocab.json` + `merges.txt` with the GPT-2 pattern).
Every corpus is split into documents at `<|endoftext|>` (empty documents are skipped); `--max-docs` takes at most N
documents from each corpus. Prints counts, and for the first mismatch the document, the character offset where the
ids part and the differing tokens. Exit status: 0 if all agree, 1 on any mismatch, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from hf_bpe.common.errors import InputError
from hf_bpe.formats.gpt2 import load_gpt2_merges, load_gpt2_vocab
from hf_bpe.formats.hf_directory import read_directory_pattern
from hf_bpe.formats.tiktoken import tiktoken_encoding

ENDOFTEXT = "<|endoftext|>"
Encoder = Callable[[list[str]], list[list[int]]]


def read_documents(corpora: Sequence[Path], max_docs: int | None) -> list[tuple[str, int, str]]:
    """(corpus name, index in that corpus, text) for every non-empty document."""
    documents = []
    for corpus in corpora:
        try:
            text = corpus.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{corpus}: no such file") from None
        except UnicodeDecodeError as error:
            raise InputError(f"{corpus}: invalid UTF-8 at byte offset {error.start}") from None
        parts = [(index, part) for index, part in enumerate(text.split(ENDOFTEXT)) if part]
        documents += [(str(corpus), index, part) for index, part in parts[:max_docs]]
    return documents


def special_tokens_of(directory: Path) -> list[str]:
    """The added special tokens of `tokenizer_config.json`, in id order."""
    path = directory / "tokenizer_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON (line {error.lineno}: {error.msg})") from None
    added = config.get("added_tokens_decoder") or {}
    return [entry["content"] for _, entry in sorted(added.items(), key=lambda item: int(item[0]))
            if entry.get("special")]


def hf_bpe_encoder(directory: Path, specials: list[str]) -> Encoder:
    from hf_bpe import Tokenizer

    tokenizer = Tokenizer.from_files(directory / "vocab.json", directory / "merges.txt", specials,
                                     pattern=read_directory_pattern(directory))
    return tokenizer.encode_batch


def tokenizers_encoder(directory: Path, specials: list[str]) -> Encoder:
    import tokenizers

    tokenizer = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
    return lambda texts: [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]


def auto_tokenizer_encoder(directory: Path, specials: list[str]) -> Encoder:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    return lambda texts: tokenizer(texts)["input_ids"]


def tiktoken_encoder(directory: Path, specials: list[str]) -> Encoder:
    vocab = load_gpt2_vocab(directory / "vocab.json")
    merges = load_gpt2_merges(directory / "merges.txt")
    encoding = tiktoken_encoding(vocab, merges, specials, name=f"crosscheck-{directory.name}",
                                 pattern=read_directory_pattern(directory))
    return lambda texts: encoding.encode_batch(texts, allowed_special="all", disallowed_special=())


ENCODERS: dict[str, Callable[[Path, list[str]], Encoder]] = {
    "hf_bpe": hf_bpe_encoder,
    "tokenizers": tokenizers_encoder,
    "AutoTokenizer": auto_tokenizer_encoder,
    "tiktoken": tiktoken_encoder,
}


def describe_mismatch(name: str, document: tuple[str, int, str], number: int, expected: list[int], got: list[int],
                      vocab: dict[int, bytes]) -> str:
    common = 0
    while common < min(len(expected), len(got)) and expected[common] == got[common]:
        common += 1
    prefix = b"".join(vocab.get(token_id, b"?") for token_id in expected[:common])
    offset = len(prefix.decode("utf-8", errors="replace"))
    corpus, index, text = document

    def show(ids: list[int]) -> str:
        return " ".join(f"{token_id}:{vocab.get(token_id, b'?')!r}" for token_id in ids[common:common + 6])

    return (f"MISMATCH in document {number} ({corpus}, document {index}) at character {offset} "
            f"(token {common}): text {text[offset:offset + 40]!r}\n"
            f"  hf_bpe:      {show(expected)}\n"
            f"  {name + ':':<12} {show(got)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("corpora", type=Path, nargs="+")
    parser.add_argument("--max-docs", type=int, default=None, help="at most N documents from each corpus")
    args = parser.parse_args(argv)
    try:
        documents = read_documents(args.corpora, args.max_docs)
        specials = special_tokens_of(args.directory)
        vocab = load_gpt2_vocab(args.directory / "vocab.json")
        encoders = {name: make(args.directory, specials) for name, make in ENCODERS.items()}
    except InputError as error:
        print(f"crosscheck: {error}", file=sys.stderr)
        return 2
    texts = [text for _, _, text in documents]
    size = sum(len(text.encode("utf-8")) for text in texts)
    print(f"{len(documents)} documents, {size / 1e6:.2f} MB, special tokens {specials}")
    results: dict[str, list[list[int]]] = {}
    for name, encode in encoders.items():
        start = time.perf_counter()
        results[name] = encode(texts)
        seconds = time.perf_counter() - start
        print(f"{name:>13}: {sum(map(len, results[name]))} tokens in {seconds:.2f} s")
    expected = results["hf_bpe"]
    failed = False
    for name, ids in results.items():
        mismatched = [number for number, (want, got) in enumerate(zip(expected, ids)) if want != got]
        if not mismatched:
            continue
        failed = True
        print(f"{name}: {len(mismatched)} of {len(documents)} documents differ from hf_bpe")
        number = mismatched[0]
        print(describe_mismatch(name, documents[number], number, expected[number], ids[number], vocab))
    if failed:
        return 1
    print(f"all {len(encoders)} encoders agree on {len(documents)} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
