"""The merge loop: one loop over an inverted index with frequency buckets, from any start state. Imports nothing
else of `hf_bpe.train`."""
