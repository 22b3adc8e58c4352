"""Files on disk: GPT-2's vocab.json and merges.txt, the HuggingFace tokenizer directory, tiktoken files."""
