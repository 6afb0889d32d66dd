"""Model families, one file each: bert, roberta, albert, electra, gpt, t5, xlnet, bart (and
hf, transformers' names for their tensors). trainer/families.py registers each."""
