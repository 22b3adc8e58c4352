"""tiktoken files (`.tiktoken`): read one into a vocab and merges, write one from a vocab and merges.

A `.tiktoken` file, the format of tiktoken's `load_tiktoken_bpe` (OpenAI's cl100k_base and o200k_base, Llama 3's
`tokenizer.model`), has one line per token: its bytes in base64, a space, and its rank. The ranks are the token ids.
The file holds neither the pre-tokenization pattern nor the special tokens: tiktoken takes them separately
(`pat_str=`, `special_tokens=`), and so does hf_bpe (`pattern=`, `special_tokens={token: id}`).

tiktoken needs no merges list: it repeatedly joins the adjacent pair of parts whose concatenation has the lowest rank.
The merges of a BPE are derived from that: each token above the single bytes is the merge of the two lower-ranked
tokens that tiktoken's own procedure reaches on that token's bytes, stopped below its rank (`derive_merges`: the
known `bpe(mergeable_ranks, token, max_rank=rank)`, one merge per token; transformers' TikTokenConverter now lists
every split into two tokens instead). The merges come in rank order and token ids are the ranks. tiktoken could
still join two parts that make a token by another split than its merge; in vocabs made by BPE training, as OpenAI's
are, this has not been seen: `hf_bpe.Tokenizer`, `tokenizers` and `AutoTokenizer` give tiktoken's ids on cl100k_base
(tests/formats/test_tiktoken_files.py, tests/cli/test_convert.py). The reverse, `write_tiktoken_file`, writes the ids
of a vocab as ranks; `tiktoken_ranks` checks that tiktoken will follow its merges.

Not handled: a token that is not the merge of two lower-ranked tokens (tiktoken reaches it only by looking a whole
pre-token up before merging, which hf_bpe's BPE does not do; tokenizers calls that `ignore_merges`) is refused with
an InputError naming its line, as is anything else malformed. Ranks above 2**32 - 2 are refused (tiktoken's ranks are
32-bit, and hf_bpe reserves the last value).

>>> import base64, tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "tiny.tiktoken"
>>> lines = [f"{base64.b64encode(bytes([byte])).decode()} {byte}" for byte in range(256)]
>>> _ = path.write_text("\\n".join(lines + ["YWI= 256", "YWJj 257"]) + "\\n")  # b"ab" and b"abc"
>>> vocab, merges, specials = load_tiktoken(path, {"<|endoftext|>": 300})
>>> merges, vocab[257], vocab[300], specials
([(b'a', b'b'), (b'ab', b'c')], b'abc', b'<|endoftext|>', {'<|endoftext|>': 300})
>>> out = write_tiktoken_file(path.with_name("copy.tiktoken"), vocab, merges, specials)
>>> out.read_bytes() == path.read_bytes()
True
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from pathlib import Path

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import read_small_bytes, write_atomically
from hf_bpe.pretokenize import validate_special_tokens

#: The largest rank (token id) accepted: tiktoken's ranks are 32-bit, and hf_bpe's id arrays keep 2**32 - 1 apart.
MAX_RANK = 2**32 - 2
# Above every rank: the rank of a pair whose concatenation is no token.
_NO_RANK = MAX_RANK + 1
# Missing bytes named in an error message, at most.
_NAMED_BYTES = 8


class UnmergeableTokenError(ValueError):
    """A token that tiktoken's procedure, run on its bytes below its rank, does not bring to exactly two parts."""

    def __init__(self, token: bytes, rank: int, parts: list[bytes]) -> None:
        super().__init__(f"token {token!r} (rank {rank}) is not the merge of two lower-ranked tokens: BPE on its "
                         f"bytes below its rank stops at {len(parts)} parts {parts[:6]!r}"
                         + ("..." if len(parts) > 6 else ""))
        self.token, self.rank = token, rank


def read_tiktoken_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """The token bytes -> rank of a `.tiktoken` file, as tiktoken's `load_tiktoken_bpe` reads it, checked.

    Raises InputError naming the file and line for a line that is not base64 and a rank, a token or rank given twice,
    and (naming the file) a file without a token for each of the 256 single bytes. Blank lines are skipped.
    """
    return _read_ranks(path)[0]


def _read_ranks(path: str | os.PathLike[str]) -> tuple[dict[bytes, int], dict[int, int]]:
    """(token -> rank, rank -> 1-based line number) of a `.tiktoken` file; see `read_tiktoken_ranks`."""
    name = os.fspath(path)
    data = read_small_bytes(path, expected="a .tiktoken file")
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    for line_number, line in enumerate(data.split(b"\n"), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise InputError(f"{name}: line {line_number}: expected a base64 token, a space and a rank, got "
                             f"{_shorten(line)}")
        encoded, rank_text = fields
        try:
            token = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise InputError(f"{name}: line {line_number}: {_shorten(encoded)} is not base64") from None
        if not rank_text.isdigit() or int(rank_text) > MAX_RANK:
            raise InputError(f"{name}: line {line_number}: the rank {_shorten(rank_text)} is not an integer from 0 "
                             f"to {MAX_RANK}")
        rank = int(rank_text)
        if not token:
            raise InputError(f"{name}: line {line_number}: the token is empty")
        if token in ranks:
            raise InputError(f"{name}: line {line_number}: token {token!r} appears twice (line "
                             f"{line_of_rank[ranks[token]]} gives it rank {ranks[token]})")
        if rank in line_of_rank:
            raise InputError(f"{name}: line {line_number}: rank {rank} appears twice (line {line_of_rank[rank]} "
                             f"gives it to another token)")
        ranks[token] = rank
        line_of_rank[rank] = line_number
    if not ranks:
        raise InputError(f"{name}: no tokens (a .tiktoken file has one line per token: base64 bytes and a rank)")
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise InputError(f"{name}: no token for {_describe_bytes(missing)}: a .tiktoken file has a token for each "
                         f"of the 256 single bytes")
    return ranks, line_of_rank


def derive_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges of a tiktoken vocab, in rank order: for each token above the single bytes, the two parts that
    tiktoken's procedure reaches on its bytes using only lower-ranked tokens.

    Raises UnmergeableTokenError (a ValueError) for a token that this procedure does not bring to two parts.

    >>> derive_merges({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5})
    [(b'b', b'c'), (b'a', b'b'), (b'a', b'bc')]
    """
    get = ranks.get
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 2:  # the common case, and its only possible split
            merges.append((token[:1], token[1:]))
        elif len(token) > 2:
            parts = _merge_below(token, rank, get)
            if len(parts) != 2:
                raise UnmergeableTokenError(token, rank, parts)
            merges.append((parts[0], parts[1]))
    return merges


def _merge_below(token: bytes, max_rank: int, get: Callable[[bytes, int], int]) -> list[bytes]:
    """tiktoken's procedure on the bytes of `token`, stopped before a merge of rank `max_rank` or above: repeatedly
    join the leftmost adjacent pair whose concatenation has the lowest rank.

    Each step is a C-level `min` and `list.index` over the pair ranks, and only the two ranks next to the merge are
    looked up again (tokens are short: quadratic time in C beats a heap's per-step Python work).
    """
    parts = [token[index:index + 1] for index in range(len(token))]
    pair_ranks = list(map(get, map(bytes.__add__, parts, parts[1:]), repeat(_NO_RANK)))
    while pair_ranks:
        lowest = min(pair_ranks)
        if lowest >= max_rank:
            break
        index = pair_ranks.index(lowest)
        parts[index:index + 2] = [parts[index] + parts[index + 1]]
        del pair_ranks[index]
        if index > 0:
            pair_ranks[index - 1] = get(parts[index - 1] + parts[index], _NO_RANK)
        if index < len(pair_ranks):
            pair_ranks[index] = get(parts[index] + parts[index + 1], _NO_RANK)
    return parts


def load_tiktoken(path: str | os.PathLike[str], special_tokens: Mapping[str, int] | None = None
                  ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int]]:
    """(vocab, merges, special tokens) of a `.tiktoken` file, for `hf_bpe.Tokenizer` and `save_tokenizer_directory`:
    the ranks are the ids, the merges are derived from the ranks (`derive_merges`), and each special token joins the
    vocab at the id `special_tokens` gives it (tiktoken's `special_tokens=`). The special tokens come back as
    {token: id} in id order. Several may share an id, as `<|endofprompt|>` and `<|reserved_200018|>` do in
    tiktoken's o200k_harmony: the vocab holds the first of them there, which is what the id decodes as (tiktoken
    decodes o200k_harmony's 200018 as `<|endofprompt|>`), and each encodes to it.

    Raises InputError naming the file (and the line) for a malformed file or a token that is not the merge of two
    lower-ranked tokens, and for a special token whose id is a rank of the file or whose text is one of its tokens.
    """
    ranks, line_of_rank = _read_ranks(path)
    try:
        merges = derive_merges(ranks)
    except UnmergeableTokenError as error:
        raise InputError(f"{os.fspath(path)}: line {line_of_rank[error.rank]}: {error}; hf_bpe's BPE cannot reach "
                         f"such a token") from None
    vocab = {rank: token for token, rank in ranks.items()}
    specials = dict(special_tokens or {})
    validate_special_tokens(list(specials))
    for special, token_id in specials.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id <= MAX_RANK:
            raise InputError(f"special token {special!r}: its id {token_id!r} is not an integer from 0 to {MAX_RANK}")
    for special, token_id in sorted(specials.items(), key=lambda item: item[1]):
        encoded = special.encode("utf-8")
        if encoded in ranks:
            raise InputError(f"special token {special!r}: {os.fspath(path)} has it as an ordinary token (line "
                             f"{line_of_rank[ranks[encoded]]}, rank {ranks[encoded]})")
        if token_id in line_of_rank:
            raise InputError(f"special token {special!r}: its id {token_id} is already the rank of "
                             f"{vocab[token_id]!r} in {os.fspath(path)} (line {line_of_rank[token_id]})")
        vocab.setdefault(token_id, encoded)  # a shared id holds the first of its special tokens
    return vocab, merges, dict(sorted(specials.items(), key=lambda item: item[1]))


def tiktoken_ranks(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                   special_tokens: Sequence[str] = ()) -> dict[bytes, int]:
    """The `mergeable_ranks` with which tiktoken encodes like the BPE (vocab, merges): every token but the special
    ones, its id as its rank.

    tiktoken joins whichever adjacent pair makes the lowest-ranked token, so this holds when merged tokens are
    numbered in merge order (as in GPT-2's files, every vocab hf_bpe trains, and every vocab read from a tiktoken
    file), and every token longer than one byte is made by a merge (tiktoken would make it by lookup). Raises
    ValueError otherwise.

    >>> tiktoken_ranks({0: b"a", 1: b"b", 2: b"ab", 3: b"<s>"}, [(b"a", b"b")], ["<s>"])
    {b'a': 0, b'b': 1, b'ab': 2}
    """
    ids = {token: token_id for token_id, token in vocab.items()}
    special_ids = {ids[token.encode("utf-8")] for token in special_tokens if token.encode("utf-8") in ids}
    merged_ids = list(dict.fromkeys(ids[left + right] for left, right in merges if left + right in ids))
    for earlier, later in zip(merged_ids, merged_ids[1:]):
        if later <= earlier:
            raise ValueError(f"merged tokens are not numbered in merge order ({vocab[later]!r}, id {later}, is "
                             f"merged after {vocab[earlier]!r}, id {earlier}), so tiktoken cannot use the ids as "
                             f"ranks")
    merged = set(merged_ids)
    for token_id, token in sorted(vocab.items()):
        if len(token) > 1 and token_id not in merged and token_id not in special_ids:
            raise ValueError(f"token {token!r} (id {token_id}) is made by no merge and is not a special token, so "
                             f"tiktoken would produce it where the BPE does not")
    return {token: token_id for token_id, token in vocab.items() if token_id not in special_ids}


def write_tiktoken_file(path: str | os.PathLike[str], vocab: Mapping[int, bytes],
                        merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str] = (), *,
                        replace: bool = False) -> Path:
    """Write the `.tiktoken` file of a BPE (its `tiktoken_ranks`, in rank order) atomically; return its path.

    `tiktoken.Encoding(name, pat_str=PATTERN, mergeable_ranks=load_tiktoken_bpe(path), special_tokens={token: id})`
    then encodes like `Tokenizer(vocab, merges, special_tokens, pattern=PATTERN)`: the pattern and the special
    tokens, which the file cannot hold, must be passed as shown. (A custom pattern that leaves some characters
    unmatched is the exception: tiktoken drops them, hf_bpe keeps them; every preset matches every character.)
    Raises ValueError when tiktoken could not follow the merges or a single byte has no token, and InputError when
    `path` exists (unless `replace`) or is a directory.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file name")
    if path.exists() and not replace:
        raise InputError(f"{path}: exists (pass replace=True to replace it)")
    ranks = tiktoken_ranks(vocab, merges, special_tokens)
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise ValueError(f"the vocab has no token for {_describe_bytes(missing)}, and a .tiktoken file needs all 256 "
                         f"single bytes")
    text = "".join(f"{base64.b64encode(token).decode('ascii')} {rank}\n"
                   for token, rank in sorted(ranks.items(), key=lambda item: item[1]))
    try:  # never over a file that appeared meanwhile, unless `replace`
        return write_atomically(path, lambda temporary: temporary.write_text(text, encoding="ascii"), replace)
    except FileExistsError:
        raise InputError(f"{path}: exists (pass replace=True to replace it)") from None


def _describe_bytes(values: list[int]) -> str:
    """'byte 0x0a' or 'bytes 0x00, 0x01, ... (12 in all)'.

    >>> _describe_bytes([10]), _describe_bytes(list(range(10)))
    ('byte 0x0a', 'bytes 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, ... (10 in all)')
    """
    named = ", ".join(f"{value:#04x}" for value in values[:_NAMED_BYTES])
    if len(values) == 1:
        return f"byte {named}"
    return f"bytes {named}" + (f", ... ({len(values)} in all)" if len(values) > _NAMED_BYTES else "")


def _shorten(text: bytes, limit: int = 60) -> str:
    """A file's bytes shown in an error message, cut to `limit` characters."""
    shown = repr(text.decode("utf-8", "replace"))
    return shown if len(shown) <= limit else shown[:limit] + "..."
