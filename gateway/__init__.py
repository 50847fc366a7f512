"""A local LLM gateway that repairs transcripts between agent apps and LLM providers."""

__version__ = "0.1.0"
