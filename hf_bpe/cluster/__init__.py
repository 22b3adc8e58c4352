"""Running hf_bpe's work on a Ray cluster: counting for training and tokenize-dataset, with identical results.

`ray` is an optional dependency, imported only when a Ray engine runs.
"""
