"""Import paths the README, the docs or the examples once showed keep working for one
release after their module is renamed: the old path re-exports the new one and says where
it went."""

from __future__ import annotations

import importlib
import sys

import pytest

#: Old path -> (new path, a name users import from it).
MOVED = {
    "langmem_layer.offline": ("langmem_layer.offline_chat", "OfflineChatModel"),
    "langmem_layer.store.embedding.models": (
        "langmem_layer.store.embedding.default_embedder", "openai_configured"),
    "langmem_layer.layer": ("langmem_layer.facade", "MemoryLayer"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_new_modules_names(
        old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    new, name = MOVED[old]
    # The warning is raised when the module is first imported: forget an earlier import.
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
    assert set(module.__all__) >= set(importlib.import_module(new).__all__)


def test_a_module_under_the_facades_old_package_is_the_facades_module_itself() -> None:
    # Not a second copy: isinstance checks and monkeypatches made through either path agree.
    for name in [n for n in sys.modules if n.startswith("langmem_layer.layer.")]:
        sys.modules.pop(name)
    with pytest.warns(DeprecationWarning):
        sys.modules.pop("langmem_layer.layer", None)
        old = importlib.import_module("langmem_layer.layer.agent_graph")
    assert old is importlib.import_module("langmem_layer.facade.agent_graph")
