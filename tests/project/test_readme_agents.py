"""The README's "Prebuilt agents and memory tools" recipes, run as written."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage

from langmem_layer.offline_chat import OfflineChatModel
from tests.fakes import ScriptedChatModel, tool_call

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


def _recipes() -> list[str]:
    text = README.read_text()
    section = text.split("## Prebuilt agents and memory tools\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def _run(code: str, **names: object) -> dict:
    namespace: dict = dict(names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        exec(compile(code, "README.md", "exec"), namespace)
    return namespace


def test_the_section_has_one_recipe_per_way_in() -> None:
    react, agent, tools, langmem = _recipes()
    assert "create_react_agent" in react and "memory.middleware()" in agent
    assert "memory.tools()" in tools and "import_langmem" in langmem


@pytest.mark.parametrize("n", [0, 1], ids=["create_react_agent", "create_agent"])
def test_prebuilt_recipes_remember_across_threads(n: int, store) -> None:
    model = ScriptedChatModel()
    _run(_recipes()[n], store=store, model=model)
    first, second = model.seen
    assert "Prefers morning meetings." not in first[0].text
    (system,) = [m for m in second if isinstance(m, SystemMessage)]
    assert system.text.startswith("You are a helpful assistant.")
    assert "Prefers morning meetings." in system.text


def test_tools_recipe(store) -> None:
    model = ScriptedChatModel(script=[
        tool_call("remember", "c1", content="Is allergic to peanuts."), "Noted."])
    names = _run(_recipes()[2], store=store, model=model)
    (stored,) = names["memory"].list("alice")
    assert stored.record.content == "Is allergic to peanuts."


class _Recording(OfflineChatModel):
    """The offline model, keeping every call's input and reply."""

    calls: list[tuple[list, AIMessage]]

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        result = super()._generate(messages, stop, run_manager, **kwargs)
        self.calls.append((list(messages), result.generations[0].message))
        return result


def test_tools_recipe_runs_offline(store) -> None:
    model = _Recording(calls=[])
    names = _run(_recipes()[2], store=store, model=model)
    (asked, told) = [reply for _, reply in model.calls]
    (call,) = asked.tool_calls  # "Remember that I'm allergic to peanuts."
    assert (call["name"], call["args"]) == (
        "remember", {"content": "Is allergic to peanuts.", "kind": "profile_fact"})
    (result,) = [m for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert result.text.startswith("Remembered [") and result.status == "success"
    assert not told.tool_calls and "remember: Remembered [" in told.text
    (stored,) = names["memory"].list("alice")  # extraction of the turn reinforced it
    assert stored.record.content == "Is allergic to peanuts."
    assert stored.record.source.message_id.startswith("tool:")  # the tool wrote it
    assert stored.record.reinforcement_count == 1


@pytest.mark.parametrize("n", [0, 1], ids=["create_react_agent", "create_agent"])
def test_prebuilt_recipes_run_offline_and_show_the_memory_used(n: int, store) -> None:
    model = _Recording(calls=[])
    _run(_recipes()[n], store=store, model=model)
    (_, first), (seen, second) = model.calls
    assert "nothing relevant yet" in first.text  # nothing known in thread t1
    system = "\n".join(m.text for m in seen if isinstance(m, SystemMessage))
    assert "### USE SILENTLY\n- Prefers morning meetings." in system
    assert "### RECENT CONVERSATIONS (other threads)\n- user: I prefer morning" in system
    assert second.text == ('Noted: "When should we meet?". From memory — used silently: '
                           "Prefers morning meetings. | also used: 2 lines from other threads.")


def test_langmem_recipe(store, capsys) -> None:
    store.put(("memories", "alice"), "k1", {"content": "User prefers dark mode."})
    names = _run(_recipes()[3], store=store)
    assert "1 imported, 0 already known, 0 imported before, skipped: []" in capsys.readouterr().out
    assert [r.record.content for r in names["memory"].list("alice")] == [
        "User prefers dark mode."]
