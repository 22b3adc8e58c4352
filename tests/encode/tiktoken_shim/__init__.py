"""A `tiktoken` package backed by hf_bpe, to run tiktoken's own tests against hf_bpe (tests/encode/tiktoken_suite.py
puts this folder first on the path of the interpreter that runs them, so their `import tiktoken` gives this one).

`tiktoken.Encoding` wraps an `hf_bpe.Tokenizer` built from the encoding's ranks, pattern and special tokens; the
encodings are tiktoken's own constructors (`tiktoken_ext.openai_public`, from the installed tiktoken) with their rank
files taken from a folder built offline (`tiktoken.load`), and `encoding_for_model` is tiktoken's own model table.
Nothing here runs tiktoken's encoder.
"""
