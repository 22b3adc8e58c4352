"""The transformers adapter: `HFBPETokenizer`, a `PreTrainedTokenizer` that gives the fast tokenizer's outputs.

transformers takes seconds to import, so nothing here is imported by `import hf_bpe` until it is asked for.
"""
