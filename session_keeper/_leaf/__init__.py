"""Leaf values that import nothing else of session_keeper, so that even the exception
tree can carry them."""
