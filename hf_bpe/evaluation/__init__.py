"""Knowing a trained tokenizer: its model card (card), token counts and under-trained tokens (token_counts), compression
and vocabulary use against baselines on any corpus (evaluate, baselines), plots (plots) and the token viewer (viewer).
"""
