"""Model groups, target order, and the attempt loop with its commit point."""
