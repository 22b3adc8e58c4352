"""Counting: the corpus read in parallel, streaming passes, into tables that add up (pre-token counts, SuperBPE's
stage-2 tables, per-source counts), on local processes or Ray actors. Imports nothing else of `hf_bpe.train`."""
