"""Strict, scriptable simulators of every provider family (see base.py)."""
