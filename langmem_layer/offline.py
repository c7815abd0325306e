"""Deprecated path of ``OfflineChatModel``, kept for one release: import it from
``langmem_layer.offline_chat``."""

import warnings

from langmem_layer.offline_chat import OfflineChatModel

__all__ = ["OfflineChatModel"]

warnings.warn("langmem_layer.offline is deprecated: import OfflineChatModel from "
              "langmem_layer.offline_chat", DeprecationWarning, stacklevel=2)
