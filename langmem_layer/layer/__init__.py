"""Deprecated path of the façade, kept for one release: import from
``langmem_layer.facade`` (``langmem_layer.layer.nodes`` is ``langmem_layer.facade.nodes``,
and so on for every module of it)."""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

from langmem_layer.facade import MemoryLayer

__all__ = ["MemoryLayer"]

_OLD, _NEW = __name__, "langmem_layer.facade"


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``langmem_layer.layer.X`` with the module ``langmem_layer.facade.X`` itself,
    so an old import gets the same classes as a new one, not a second copy of them."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD):])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module was imported under its new name."""


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())

warnings.warn("langmem_layer.layer is deprecated: import from langmem_layer.facade "
              "(the same modules under their new package)", DeprecationWarning, stacklevel=2)
