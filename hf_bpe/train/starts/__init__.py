"""Start states of the one merge loop: continuing from a base tokenizer (extension) and SuperBPE's stage 2, whose
counting passes run on the counting engines."""
