"""Pre-tokenization: the pattern that cuts text into pre-tokens, and special tokens that cut it into documents.

The pattern is GPT-2's by default (gpt2.py, with its fast paths), a preset or any regex text (patterns.py, parsed by
regex_syntax.py and run by pinned_regex.py with the pinned classes of unicode_classes.py).

BPE merges never cross a pre-token's edge, so training counts distinct pre-tokens and encoding caches their ids.
"""

from hf_bpe.pretokenize.gpt2 import (
                                     GPT2_ASCII_REGEX,
                                     GPT2_PATTERN,
                                     GPT2_REGEX,
                                     SAFE_SPACE_REGEX,
                                     UNICODE_VERSION,
                                     WHITESPACE_CHARS,
                                     PinnedGpt2Regex,
                                     pretokenize,
                                     safe_segments,
                                     split_at_safe_spaces,
                                     split_into_pieces,
)
from hf_bpe.pretokenize.patterns import (
                                         BEFORE_DIGITS,
                                         PATTERNS,
                                         CompiledPattern,
                                         compile_pattern,
                                         pattern_from_tokenizers,
                                         preset_name,
                                         resolve_pattern,
                                         tokenizers_pattern,
)
from hf_bpe.pretokenize.special_tokens import (
                                             SpecialChoice,
                                             SpecialTokenSplitter,
                                             allowed_and_disallowed,
                                             check_disallowed,
                                             check_stream,
                                             place_special_tokens,
                                             replace_surrogates,
                                             splitter_of,
                                             validate_special_tokens,
)

__all__ = [
    "BEFORE_DIGITS", "PATTERNS", "CompiledPattern", "compile_pattern", "pattern_from_tokenizers", "preset_name",
    "resolve_pattern", "tokenizers_pattern",
    "GPT2_ASCII_REGEX", "GPT2_PATTERN", "GPT2_REGEX", "SAFE_SPACE_REGEX", "UNICODE_VERSION", "WHITESPACE_CHARS",
    "PinnedGpt2Regex", "SpecialTokenSplitter", "pretokenize", "replace_surrogates", "safe_segments",
    "split_at_safe_spaces", "split_into_pieces", "validate_special_tokens",
    "SpecialChoice", "allowed_and_disallowed", "check_disallowed", "check_stream", "place_special_tokens",
    "splitter_of",
]
