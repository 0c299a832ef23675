"""Object stores for the lab: one interface (``store.ObjectStore``), one class per store."""

from __future__ import annotations

from .store import Credentials, ObjectStore, StoreUnavailable
from .embedded import EmbeddedStore

__all__ = ["Credentials", "ObjectStore", "StoreUnavailable", "EmbeddedStore"]
