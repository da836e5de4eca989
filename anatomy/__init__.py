"""llm-anatomy lab: a 2017 Transformer and a mini-LLaMA, taken apart one part at a time."""

__version__ = "0.1.0"
