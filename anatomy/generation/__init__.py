"""What a trained model writes: sampled text, how much of it is copied, and the Hugging Face export."""
