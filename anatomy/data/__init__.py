"""From a folder of posts to token arrays: the corpus, the character vocabulary, the batches."""
