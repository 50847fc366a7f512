"""Canonical transcript model, stream events and the assembler that folds them."""
