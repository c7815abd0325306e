"""References (entities) in free text, for exact-match lookup.

One extractor shared by the write path (a memory's ``refs``) and the read path (the
references of a question, see ``langmem_layer.read.query``), so both sides produce the
same normalised strings and the GIN lookup on memories' references can match them.

What counts as a reference: a run of capitalised words (``Caroline``, ``New York``,
``LGBTQ``, ``Eternal Sunshine``) that does not open a sentence (or a ``Speaker:``
line), minus pronouns, interjections and the names of weekdays and months; a
possessive ``'s`` is dropped. A word opening a sentence is kept only when it shows
capitals inside (``LGBTQ``, ``McDonald``) or digits (``R2D2``): casing alone says
nothing there. Results are normalised with ``langmem_layer.types.normalize_ref``,
deduplicated, in order of first appearance.

This is deliberately a cheap, model-free heuristic: it runs on every write and every
query, offline. An LLM extractor may propose richer refs; they share the same lookup.
"""

from __future__ import annotations

import re

from langmem_layer.types import normalize_ref

__all__ = ["extract_refs"]

_WORD = r"[A-Z][\w'’&.-]*[\w]|[A-Z]"
_RUN = re.compile(rf"(?:{_WORD})(?:[ \t]+(?:{_WORD}))*")
#: Quotes and brackets that may stand, with spaces, between a sentence boundary and
#: the sentence's first word.
_OPENERS = frozenset("\"'“”‘’([")
#: Sentence (or line, or ``Speaker:``) boundaries: what precedes a sentence-initial word.
_ENDS = frozenset(".!?:;\n…—–")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)

_NOT_REFS = frozenset(re.findall(r"\S+", """
i i'm i’m i've i’ve i'd i’d i'll i’ll im ive id ill me my mine we us our you your he him his she
her they them their it its a an the this that these those there here what when where which who
whom why how whose if so and but or not no yes yeah yep nope ok okay oh ah wow hey hi hello
thanks thank please sorry congrats congratulations lol omg haha great good nice cool awesome
sure well just also really dear mr mrs ms dr mom dad
monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
"""))


def _sentence_initial(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence (or a line, or follows ``Speaker:``
    or a spaced dash): only spaces, quotes and brackets between it and a boundary.

    A scan backwards over those alone, so a text of any length costs linear time over
    all its words (a regex over ``text[:start]`` cost the whole prefix at each
    capitalised word: quadratic).
    """
    i = start - 1
    while i >= 0:
        ch = text[i]
        if ch in _ENDS:
            return True
        if not (ch.isspace() or ch in _OPENERS):
            return ch == "-" and i > 0 and text[i - 1].isspace()
        i -= 1
    return True


def _distinctive(word: str) -> bool:
    """Casing says more than sentence position: inner capitals or digits."""
    return any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])


def extract_refs(text: str, *, limit: int = 12) -> list[str]:
    """Normalised references (entities) named in ``text``.

    Args:
        text: A memory's content or a question.
        limit: At most this many references, the first found.

    Returns:
        Normalised, distinct references in order of appearance, e.g.
        ``extract_refs("Caroline: I met Dana at the LGBTQ center in New York.")`` gives
        ``["dana", "lgbtq", "new york"]``.
    """
    found: dict[str, None] = {}
    for m in _RUN.finditer(text):
        words = m.group().split()
        if not words:
            continue
        start = m.start()
        first = words[0]
        if _sentence_initial(text, start) and not _distinctive(first):
            words = words[1:]
        # A run may start with a word that is no reference ("Hey Caroline", "Thanks Dana").
        while words and _POSSESSIVE.sub("", words[0]).lower().strip(".") in _NOT_REFS:
            words = words[1:]
        while words and _POSSESSIVE.sub("", words[-1]).lower().strip(".") in _NOT_REFS:
            words = words[:-1]
        if not words:
            continue
        words[-1] = _POSSESSIVE.sub("", words[-1]).rstrip(".")
        ref = normalize_ref(" ".join(words))
        if ref and ref not in _NOT_REFS and len(ref) > 1:
            found.setdefault(ref, None)
        if len(found) >= limit:
            break
    return list(found)
