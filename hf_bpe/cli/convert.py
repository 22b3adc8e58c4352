"""`hf-bpe convert` and `hf-bpe export-tiktoken`: tiktoken files to HuggingFace tokenizer directories and back.

    hf-bpe convert cl100k_base.tiktoken --pattern cl100k --special-token '<|endoftext|>=100257' --out cl100k/
    hf-bpe export-tiktoken my-tokenizer/ --out my-tokenizer.tiktoken

A `.tiktoken` file holds the tokens and their ranks only (`hf_bpe.formats.tiktoken_files`): `convert` takes the
pre-tokenization pattern and the special tokens as options, derives the merges from the ranks and writes a complete
directory (built under a temporary name, moved into place when complete); `export-tiktoken` writes the ranks and
prints the pattern and special tokens to pass to `tiktoken.Encoding`.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from hf_bpe.common.errors import InputError, describe_os_error

CONVERT_DESCRIPTION = (
    "Turn a .tiktoken file (base64 token and rank per line, as tiktoken's load_tiktoken_bpe reads: OpenAI's "
    "cl100k_base and o200k_base) into a HuggingFace tokenizer directory (vocab.json, merges.txt derived from the "
    "ranks, tokenizer.json, tokenizer_config.json, model card) that AutoTokenizer.from_pretrained loads without "
    "hf_bpe and that gives tiktoken's ids. The ranks become the ids. The file holds neither the pre-tokenization "
    "pattern nor the special tokens: give them with --pattern and --special-token.")
EXPORT_DESCRIPTION = (
    "Write the .tiktoken file of a tokenizer directory (base64 token and rank per line, ranks = ids) so that "
    "tiktoken.Encoding(..., mergeable_ranks=tiktoken.load.load_tiktoken_bpe(FILE)) encodes like the directory. The "
    "pattern and the special tokens are not part of the file: the command prints the tiktoken.Encoding call that "
    "passes them. Refuses a directory whose merges tiktoken could not follow (merged tokens not numbered in merge "
    "order, tokens made by no merge). A custom pattern that leaves characters unmatched does not encode alike: "
    "tiktoken drops them, hf_bpe keeps them (every preset matches every character).")


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe convert`."""
    parser.add_argument("input", type=Path, metavar="FILE.tiktoken", help="the tiktoken file to convert")
    parser.add_argument("--pattern", required=True, metavar="NAME_OR_REGEX",
                        help="the pre-tokenization pattern the file was made for: a preset name (gpt2, cl100k or "
                             "gpt4, o200k, llama3) or regex text; cl100k_base needs cl100k, o200k_base o200k")
    parser.add_argument("--special-token", action="append", default=[], dest="special_tokens", metavar="TOKEN=ID",
                        help="a special token and its id, as in tiktoken's special_tokens (e.g. "
                             "'<|endoftext|>=100257' for cl100k_base); repeat for several (default: none)")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="the directory to write; it must not exist or be empty unless --force is given")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists and is not empty")


def add_export_tiktoken_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `hf-bpe export-tiktoken`."""
    parser.add_argument("directory", type=Path, metavar="DIR", help="a tokenizer directory saved by hf_bpe")
    parser.add_argument("--out", required=True, type=Path, metavar="FILE.tiktoken",
                        help="the file to write; it must not exist unless --force is given")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")


def parse_special_tokens(values: Sequence[str]) -> dict[str, int]:
    """`TOKEN=ID` options -> {token: id}; the id is what follows the last "=", so a token may contain "=".

    >>> parse_special_tokens(["<|endoftext|>=100257", "<a=b>=7"])
    {'<|endoftext|>': 100257, '<a=b>': 7}
    """
    specials: dict[str, int] = {}
    for value in values:
        token, equals, token_id = value.rpartition("=")
        if not equals or not token or not token_id.isdecimal() or not token_id.isascii():
            raise InputError(f"--special-token {value!r} is not TOKEN=ID with a non-negative integer id, e.g. "
                             f"'<|endoftext|>=100257'")
        if token in specials:
            raise InputError(f"--special-token {token!r} is given twice")
        specials[token] = int(token_id)
    return specials


def check_pattern_option(value: str) -> str:
    """`value`, unless it is a plain word that names no preset: as a regex, that would match only itself (a typo such
    as `--pattern cl100K` would otherwise convert with a pattern that drops almost all text).

    >>> check_pattern_option("gpt4"), check_pattern_option("[a-z]+|[^a-z]")
    ('gpt4', '[a-z]+|[^a-z]')
    >>> check_pattern_option("cl100K")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hf_bpe.common.errors.InputError: --pattern 'cl100K' names no preset (gpt2, cl100k, ...), and as a regex it ...
    """
    from hf_bpe.pretokenize import PATTERNS

    if value not in PATTERNS and re.fullmatch(r"[\w-]+", value):
        raise InputError(f"--pattern {value!r} names no preset ({', '.join(PATTERNS)}), and as a regex it would "
                         f"match only that word")
    return value


def run_convert(args: argparse.Namespace) -> int:
    """Run `hf-bpe convert` with parsed arguments; InputError is left to the caller to report."""
    from hf_bpe._version import __version__
    from hf_bpe.common.outputs import staging_directory
    from hf_bpe.encode.tokenizer import Tokenizer
    from hf_bpe.evaluation.card import TRAINING_INFO_FILE, write_model_card
    from hf_bpe.formats.directory_specials import describe_aliases
    from hf_bpe.formats.hf_directory import save_tokenizer_directory
    from hf_bpe.formats.tiktoken_files import load_tiktoken
    from hf_bpe.pretokenize import UNICODE_VERSION, preset_name, resolve_pattern

    pattern = resolve_pattern(check_pattern_option(args.pattern))
    specials = parse_special_tokens(args.special_tokens)
    source: Path = args.input
    with staging_directory(args.out, replace=args.force) as staging:
        vocab, merges, special_tokens = load_tiktoken(source, specials)
        info = {
            "converted_from": {"path": str(source), "bytes": source.stat().st_size,
                               "sha256": hashlib.sha256(source.read_bytes()).hexdigest()},
            "vocab_size": len(vocab),
            "special_tokens": special_tokens,
            "pattern": preset_name(pattern) or pattern,
            "hf_bpe_version": __version__,
            "unicode_version": UNICODE_VERSION,
            "date": datetime.date.today().isoformat(),
        }
        try:
            # tiktoken looks a pre-token up whole before merging: tokens it reaches no other way need that.
            save_tokenizer_directory(staging, vocab, merges, special_tokens, pattern=pattern, ignore_merges=True)
            (staging / TRAINING_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
            # The card describes the tokenizer made here rather than reading the directory back.
            tokenizer = Tokenizer(vocab, merges, special_tokens, pattern=pattern, ignore_merges=True)
            write_model_card(staging, training_info=info, tokenizer=tokenizer,
                             title=f"Byte-level BPE tokenizer converted from {source.name}")
        except OSError as error:
            raise InputError(f"{args.out}: cannot write the tokenizer: {describe_os_error(error)} "
                             f"(nothing was written)") from None
    special_ids = set(special_tokens.values())  # several special tokens may share an id
    whole_only = len(vocab) - 256 - len(merges) - len(special_ids)  # no merge makes them: found by lookup
    print(f"hf-bpe convert: wrote {args.out} ({len(vocab):,} tokens: 256 single bytes, {len(merges):,} merges derived "
          f"from the ranks, {whole_only:,} found only as whole pre-tokens, {len(special_tokens)} special; pattern "
          f"{preset_name(pattern) or repr(pattern)})", file=sys.stderr)
    if len(special_ids) < len(special_tokens):
        print(f"hf-bpe convert: {describe_aliases(vocab, special_tokens)}", file=sys.stderr)
    return 0


def run_export_tiktoken(args: argparse.Namespace) -> int:
    """Run `hf-bpe export-tiktoken` with parsed arguments; InputError is left to the caller to report."""
    from hf_bpe.common.outputs import created_directories
    from hf_bpe.formats.hf_directory import load_tokenizer_directory, read_directory_ignore_merges
    from hf_bpe.formats.tiktoken_files import write_tiktoken_file
    from hf_bpe.pretokenize import preset_name

    out: Path = args.out
    if out.is_dir():
        raise InputError(f"{out}: is a directory, expected a file name")
    if out.exists() and not args.force:
        raise InputError(f"{out}: exists (use --force to replace it)")
    loaded = load_tokenizer_directory(args.directory)
    vocab, merges, special_tokens = loaded
    pattern = loaded.pattern
    with created_directories(out.parent, out):
        try:
            write_tiktoken_file(out, vocab, merges, special_tokens, replace=args.force,
                                ignore_merges=read_directory_ignore_merges(args.directory))
        except InputError:
            raise
        except ValueError as error:
            raise InputError(f"{args.directory}: cannot be written as a .tiktoken file: {error}") from None
    special_ids = loaded.special_token_ids  # with those that share an id (formats.directory_specials)
    print(f"hf-bpe export-tiktoken: wrote {out} ({len(vocab) - len(set(special_ids.values())):,} ranks); a .tiktoken "
          f"file holds "
          f"neither the pattern ({preset_name(pattern) or 'custom'}) nor the special tokens: pass them to tiktoken "
          f"as printed on stdout", file=sys.stderr)
    print(tiktoken_snippet(out, pattern, special_ids, name=Path(args.directory).resolve().name))
    return 0


def tiktoken_snippet(path: Path, pattern: str, special_tokens: dict[str, int], name: str) -> str:
    r'''The Python code that builds the `tiktoken.Encoding` of an exported file.

    >>> print(tiktoken_snippet(Path("t.tiktoken"), r"\s+|\S+", {"<|endoftext|>": 3}, "t"))
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    <BLANKLINE>
    encoding = tiktoken.Encoding(
        name='t',
        pat_str=r"""\s+|\S+""",
        mergeable_ranks=load_tiktoken_bpe('t.tiktoken'),
        special_tokens={'<|endoftext|>': 3},
    )
    # hf_bpe always encodes special tokens as their ids; tiktoken does with encode(text, allowed_special="all")
    '''
    return "\n".join([
        "import tiktoken",
        "from tiktoken.load import load_tiktoken_bpe",
        "",
        "encoding = tiktoken.Encoding(",
        f"    name={name!r},",
        f"    pat_str={_python_string(pattern)},",
        f"    mergeable_ranks=load_tiktoken_bpe({str(path)!r}),",
        f"    special_tokens={special_tokens!r},",
        ")",
        '# hf_bpe always encodes special tokens as their ids; tiktoken does with encode(text, allowed_special="all")',
    ])


def _python_string(text: str) -> str:
    r'''A Python literal for `text`: a raw triple-quoted string where that is exact (readable regexes), else repr.

    >>> print(_python_string(r"\s+(?!\S)"), _python_string('ends in "'))
    r"""\s+(?!\S)""" 'ends in "'
    >>> all(eval(_python_string(text)) == text for text in [r"'s|\p{L}+", "a\\", '"""', "\t", r'\"'])
    True
    '''
    trailing_backslashes = len(text) - len(text.rstrip("\\"))
    if '"""' in text or text.endswith('"') or trailing_backslashes % 2 or not text.isprintable():
        return repr(text)
    return f'r"""{text}"""'
