"""Continuity: record every assistant turn the gateway returns, and restore it (with its
signatures, encrypted reasoning and block order) when the client sends the turn back."""
