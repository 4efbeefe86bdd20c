"""Saving: the keeper's rows, written as they change, and its audit queue (entry:
``persistence.py``); the batch of changed rows (``row_batches.py``); the rows' kinds, seals
and head (``sealed_rows.py``); one owner for durable writes (``owned_writes.py``).
"""
