"""The keeper's state: what it knows now, shared by its parts (entry: ``live.py``), and
the values of it that are saved, with their codec (``saved.py``).
"""
