"""SQLite store, schema, export and import."""
from .db import Store, StoreError  # noqa: F401
