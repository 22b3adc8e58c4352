"""tiktoken files (`.tiktoken`): read one into a vocab and merges, write one from a vocab and merges.

A `.tiktoken` file, the format of tiktoken's `load_tiktoken_bpe` (OpenAI's cl100k_base and o200k_base, Llama 3's
`tokenizer.model`), has one line per token: its bytes in base64, a space, and its rank. The ranks are the token ids.
The file holds neither the pre-tokenization pattern nor the special tokens: tiktoken takes them separately
(`pat_str=`, `special_tokens=`), and so does hf_bpe (`pattern=`, `special_tokens={token: id}`).

tiktoken needs no merges list: it looks a pre-token up whole, else repeatedly joins the adjacent pair of parts whose
concatenation has the lowest rank. The merges of a BPE that takes the same steps are derived from the ranks
(`hf_bpe.formats.tiktoken_merges.derive_merges`): one per token, the two parts that tiktoken's procedure on the
token's own bytes joins last, which may rank above the token (Llama 3's `.:.:` is `.:.` + `:`); a token that the
procedure never reaches gets no merge, and is found by the lookup (`ignore_merges`). The merges come in rank order and
token ids are the ranks. Every file tiktoken reads is taken, and the BPE gives tiktoken's ids on every text. The
reverse, `write_tiktoken_file`, writes the ids of a vocab as ranks; `tiktoken_ranks` checks that tiktoken will follow
its merges. Malformed files are refused with an InputError naming the line. Ranks above 2**32 - 2 are refused
(tiktoken's ranks are 32-bit, and hf_bpe reserves the last value).

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
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hf_bpe.common.errors import InputError
from hf_bpe.common.files import read_small_bytes, write_atomically
from hf_bpe.formats.tiktoken_merges import derive_lazy_merges, derive_merges
from hf_bpe.pretokenize import validate_special_tokens

#: The largest rank (token id) accepted: tiktoken's ranks are 32-bit, and hf_bpe's id arrays keep 2**32 - 1 apart.
MAX_RANK = 2**32 - 2
# A file laid out as tiktoken's are: lines of a base64 token, one space and a rank (CRLF too), the last line feed
# optional.
_CANONICAL = re.compile(rb"(?:[A-Za-z0-9+/]+={0,2} [0-9]+\r?\n)*+(?:[A-Za-z0-9+/]+={0,2} [0-9]+\r?)?+")
# Missing bytes named in an error message, at most.
_NAMED_BYTES = 8


def read_tiktoken_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """The token bytes -> rank of a `.tiktoken` file, as tiktoken's `load_tiktoken_bpe` reads it, checked.

    Raises InputError naming the file and line for a line that is not base64 and a rank, a token or rank given twice,
    and (naming the file) a file without a token for each of the 256 single bytes. Blank lines are skipped.
    """
    return _read_ranks(path)[0]


def _read_ranks(path: str | os.PathLike[str]) -> tuple[dict[bytes, int], Callable[[int], int]]:
    """(token -> rank, the 1-based line number of a rank) of a `.tiktoken` file; see `read_tiktoken_ranks`."""
    name = os.fspath(path)
    data = read_small_bytes(path, expected="a .tiktoken file")
    canonical = _read_canonical(data)
    if canonical is not None:
        return canonical
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
    return ranks, line_of_rank.__getitem__


def _read_canonical(data: bytes) -> tuple[dict[bytes, int], Callable[[int], int]] | None:
    """`_read_ranks` of a file laid out as tiktoken's own are (each line a base64 token, one space, a rank, a line
    feed; no blank line) and valid, with C-level calls over all lines at once; None for any other file, which the
    line-by-line reading then reads, or names the line of its first fault."""
    # One pass of the regex engine checks the layout, the ranks' digits, and each token as b64decode(validate=True)
    # checks it (the alphabet, then at most two "=" at the end; an empty token goes to the line-by-line reading).
    if _CANONICAL.fullmatch(data) is None:
        return None
    fields = data.split()
    if not fields:
        return None
    lines = range(len(fields) // 2)
    try:
        tokens = list(map(binascii.a2b_base64, fields[0::2]))
    except binascii.Error:
        return None
    rank_list = list(map(int, fields[1::2]))
    ranks = dict(zip(tokens, rank_list))
    if (len(ranks) != len(lines) or len(set(rank_list)) != len(lines) or max(rank_list) > MAX_RANK
            or b"" in ranks or any(bytes([byte]) not in ranks for byte in range(256))):
        return None

    def line_of(rank: int) -> int:  # needed only to name a line in an error: no table of 200,000 lines before
        return rank_list.index(rank) + 1

    return ranks, line_of


def load_tiktoken(path: str | os.PathLike[str], special_tokens: Mapping[str, int] | None = None, *,
                  lazy: bool = False) -> tuple[dict[int, bytes], Sequence[tuple[bytes, bytes]], dict[str, int]]:
    """(vocab, merges, special tokens) of a `.tiktoken` file, for `hf_bpe.Tokenizer` and `save_tokenizer_directory`:
    the ranks are the ids, the merges are derived from the ranks (`derive_merges`), and each special token joins the
    vocab at the id `special_tokens` gives it (tiktoken's `special_tokens=`). The special tokens come back as
    {token: id} in id order. Several may share an id, as `<|endofprompt|>` and `<|reserved_200018|>` do in
    tiktoken's o200k_harmony: the vocab holds the first of them there, which is what the id decodes as (tiktoken
    decodes o200k_harmony's 200018 as `<|endofprompt|>`), and each encodes to it.

    Raises InputError naming the file (and the line) for a malformed file, and for a special token whose id is a rank
    of the file or whose text is one of its tokens. `lazy`: the merges as a `LazyMerges` (made into pairs of bytes
    only when read, as `hf_bpe.Tokenizer.from_tiktoken` keeps them) instead of a list.
    """
    ranks, line_of = _read_ranks(path)
    merges = derive_lazy_merges(ranks) if lazy else derive_merges(ranks).merges
    vocab = dict(zip(ranks.values(), ranks))
    specials = dict(special_tokens or {})
    validate_special_tokens(list(specials))
    for special, token_id in specials.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id <= MAX_RANK:
            raise InputError(f"special token {special!r}: its id {token_id!r} is not an integer from 0 to {MAX_RANK}")
    for special, token_id in sorted(specials.items(), key=lambda item: item[1]):
        encoded = special.encode("utf-8")
        if encoded in ranks:
            raise InputError(f"special token {special!r}: {os.fspath(path)} has it as an ordinary token (line "
                             f"{line_of(ranks[encoded])}, rank {ranks[encoded]})")
        if ranks.get(vocab.get(token_id, b"")) == token_id:  # an ordinary token's rank (not another special's id)
            raise InputError(f"special token {special!r}: its id {token_id} is already the rank of "
                             f"{vocab[token_id]!r} in {os.fspath(path)} (line {line_of(token_id)})")
        vocab.setdefault(token_id, encoded)  # a shared id holds the first of its special tokens
    return vocab, merges, dict(sorted(specials.items(), key=lambda item: item[1]))


def tiktoken_ranks(vocab: Mapping[int, bytes], merges: Sequence[tuple[bytes, bytes]],
                   special_tokens: Sequence[str] = (), *, ignore_merges: bool = False) -> dict[bytes, int]:
    """The `mergeable_ranks` with which tiktoken encodes like the BPE (vocab, merges): every token but the special
    ones, its id as its rank.

    tiktoken joins whichever adjacent pair makes the lowest-ranked token, so this holds when merged tokens are
    numbered in merge order (as in GPT-2's files, every vocab hf_bpe trains, and every vocab read from a tiktoken
    file), and every token longer than one byte is made by a merge (tiktoken would make it by lookup), unless the BPE
    looks pre-tokens up too (`ignore_merges`, as a directory converted from a tiktoken file does). Raises ValueError
    otherwise.

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
    for token_id, token in [] if ignore_merges else sorted(vocab.items()):
        if len(token) > 1 and token_id not in merged and token_id not in special_ids:
            raise ValueError(f"token {token!r} (id {token_id}) is made by no merge and is not a special token, so "
                             f"tiktoken would produce it where the BPE does not")
    return {token: token_id for token_id, token in vocab.items() if token_id not in special_ids}


def write_tiktoken_file(path: str | os.PathLike[str], vocab: Mapping[int, bytes],
                        merges: Sequence[tuple[bytes, bytes]], special_tokens: Sequence[str] = (), *,
                        replace: bool = False, ignore_merges: bool = False) -> Path:
    """Write the `.tiktoken` file of a BPE (its `tiktoken_ranks`, in rank order) atomically; return its path.

    `tiktoken.Encoding(name, pat_str=PATTERN, mergeable_ranks=load_tiktoken_bpe(path), special_tokens={token: id})`
    then encodes like `Tokenizer(vocab, merges, special_tokens, pattern=PATTERN)`: the pattern and the special
    tokens, which the file cannot hold, must be passed as shown. (A custom pattern that leaves some characters
    unmatched is the exception: tiktoken drops them, hf_bpe keeps them; every preset matches every character.)
    Raises ValueError when tiktoken could not follow the merges or a single byte has no token, and InputError when
    `path` exists (unless `replace`) or is a directory. `ignore_merges`: the BPE looks pre-tokens up whole
    (`hf_bpe.Tokenizer`'s option), so tokens made by no merge are written too.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file name")
    if path.exists() and not replace:
        raise InputError(f"{path}: exists (pass replace=True to replace it)")
    ranks = tiktoken_ranks(vocab, merges, special_tokens, ignore_merges=ignore_merges)
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
