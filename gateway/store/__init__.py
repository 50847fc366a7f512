"""Continuity store backends: memory, sqlite, redis (see base.py for the contract)."""
