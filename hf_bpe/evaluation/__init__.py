"""Knowing a trained tokenizer: its model card, compression on corpora."""
