"""Open loops reported done: which existing loop a statement like "I called my mom
yesterday" closes. Used by the rule extractor (``langmem_layer.extract.rules``).

A clause reports something done when it says so in the past tense or with "done":

* ``I (just|finally|already)? <past tense> X`` ("I called my mom", "I sent the email to
  Bob", "I finished the report"), ``I've/I have <past participle> X``;
* ``(finally|just)? (I'm|I am)? done with X``, ``(I'm|I am)? finished with X``,
  ``X is done/finished``;
* an answer to the follow-up: ``(the|my)? X went/was well|great|fine|badly ...`` ("The
  interview went great"): it happened.

It closes the open loop (kind ``open_loop``, not closed) whose content holds every
content word of ``X`` (time words such as "yesterday" aside) and the verb, unless the
verb only says "done" (finish, complete, do, have, get, handle ...). ``X`` must name
something: "I did it" closes nothing. Questions ("Did I call my mom?"), plans ("I
should call my mom") and negations ("I didn't call", "I never called", "I haven't
called") report nothing. When several loops match, the one matching most words wins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langmem_layer.types import Kind, LoopStatus, Recalled, Status

__all__ = ["done_target", "reported_done"]

_A = r"['’]"
_IRREGULAR = {
    "sent": "send", "did": "do", "done": "do", "had": "have", "went": "go", "gone": "go",
    "made": "make", "got": "get", "gotten": "get", "bought": "buy", "paid": "pay",
    "wrote": "write", "written": "write", "took": "take", "taken": "take", "gave": "give",
    "given": "give", "saw": "see", "seen": "see", "met": "meet", "told": "tell",
    "found": "find", "left": "leave", "brought": "bring", "spoke": "speak",
    "spoken": "speak", "ran": "run", "read": "read", "put": "put", "set": "set",
    "rang": "ring", "sold": "sell", "built": "build", "won": "win", "kept": "keep",
    "caught": "catch", "taught": "teach", "flew": "fly", "drove": "drive", "ate": "eat",
}
#: Verbs that only say a thing is done; the object alone must name the loop.
_GENERIC = frozenset({"do", "finish", "complete", "have", "get", "handle", "wrap", "go",
                      "make", "sort", "deal", "take", "knock", "tick", "cross"})
#: Past tenses that report an intention, not a thing done ("I needed to call my mom").
_NOT_DONE = frozenset({"need", "want", "plan", "forget", "try", "hope", "mean", "intend",
                       "decide", "promise", "agree", "expect", "offer", "wish", "start",
                       "schedul", "reschedul", "postpon", "delay", "cancel", "miss", "skipp",
                       "skip", "fail", "consider", "think", "ask"})
#: Words that say when, not what: never required of the loop.
_WHEN = frozenset({"yesterday", "today", "tonight", "earlier", "last", "night", "week",
                   "morning", "afternoon", "evening", "weekend", "this", "ago", "finally",
                   "already", "just", "now", "monday", "tuesday", "wednesday", "thursday",
                   "friday", "saturday", "sunday", "up", "off", "out", "care", "of",
                   "with", "by", "on", "at", "in", "to", "for", "from", "and", "too",
                   "all", "it", "that", "hour", "day", "minute", "few", "couple",
                   "some", "time", "before", "after", "lunch", "work", "so", "well"})
_STOP = frozenset({"i", "me", "my", "mine", "the", "a", "an", "our", "their", "them",
                   "his", "her", "its", "your", "is", "am", "are", "was", "were", "be"})
_ADVERB = r"(?:\s+(?:just|finally|already|actually|also|successfully))?"
_PAST = re.compile(
    rf"\bI(?:{_A}ve|\s+have)?{_ADVERB}\s+(?P<verb>[a-z]+ed|{'|'.join(_IRREGULAR)})\b"
    r"(?P<x>.*)$", re.IGNORECASE)
_DONE_WITH = re.compile(
    rf"^(?:(?:finally|just|already|so|now|ok|okay|phew)[,!]?\s+)*"
    rf"(?:(?:I{_A}m|I\s+am|I{_A}ve\s+been|I\s+was)\s+)?(?:(?:finally|just|already|all)\s+)*"
    r"(?:done|finished|through)"
    r"\s+with\s+(?P<x>.+)$", re.IGNORECASE)
_IS_DONE = re.compile(r"^(?P<x>.+?)\s+(?:is|was|are)\s+(?:all\s+)?(?:done|finished|sorted|"
                      r"taken\s+care\s+of|booked|paid|sent|submitted)\b", re.IGNORECASE)
#: An answer to the follow-up ("The interview went great"): the thing happened.
_WENT = re.compile(r"^(?:the|my|our)?\s*(?P<x>.+?)\s+(?:went|was|turned\s+out)\s+"
                   r"(?:really\s+|so\s+|very\s+|pretty\s+|quite\s+|super\s+)?"
                   r"(?:well|great|fine|good|ok|okay|alright|badly|terribly|horribly|amazing|"
                   r"awesome|brilliant|smoothly|perfectly|better\s+than\s+expected)\b",
                   re.IGNORECASE)
_QUESTION = re.compile(r"^(?:do|does|did|what|when|where|who|why|how|which|is|are|was|were|"
                       r"have|has|should|could|would|will|can)\b", re.IGNORECASE)
_NEGATION = re.compile(rf"\b(?:not|never|n{_A}t|no)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:if|should|supposed|planned|meant|wanted|forgot|almost|nearly)\b",
                    re.IGNORECASE)


def _base(verb: str) -> str:
    """The base form of a past-tense verb ("called" -> "call", "submitted" -> "submit")."""
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    stem = low[:-2]
    if stem.endswith("i"):  # "replied" -> "reply"
        return stem[:-1] + "y"
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "ls":  # "submitted"
        return stem[:-1]
    return stem


_END_OF_OBJECT = re.compile(r"[,;:]|\s+(?:and|but|because|so|when|while|after|before|"
                           r"since|though)\s+", re.IGNORECASE)


def _stem(word: str) -> str:
    # Crude, as in write/rules.py: drop a final "s" so "reports" matches "report".
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][\w-]*", text.lower().replace("’", "'").replace("'s", ""))


def reported_done(clause: str) -> tuple[str | None, list[str]] | None:
    """What a clause reports done: (the verb's base form or None, the object's words).

    None when the clause is a question, a plan, a negation, or names nothing.
    """
    text = clause.strip().rstrip(".!")
    if not text or clause.strip().endswith("?") or _QUESTION.match(text):
        return None
    verb: str | None = None
    m = _DONE_WITH.search(text) or _IS_DONE.search(text)
    if m is None and (m := _PAST.search(text)) is not None:
        verb = _base(m.group("verb"))
        if verb in _NOT_DONE or verb.rstrip("e") in _NOT_DONE:
            return None
    # Last: how it went ("The interview went great") names its subject, not a verb.
    m = m or _WENT.search(text)
    if m is None:
        return None
    head = text[: m.start("x")]
    if _NEGATION.search(head) or _HEDGE.search(head):
        return None
    what = _END_OF_OBJECT.split(m.group("x"), maxsplit=1)[0]
    obj = [_stem(w) for w in _words(what) if w not in _STOP and w not in _WHEN
           and not w.isdigit()]
    if not obj:
        return None
    return verb, obj


def _matches(verb: str | None, obj: Sequence[str], loop: Recalled) -> int:
    words = {_stem(w) for w in _words(" ".join([loop.record.content, *loop.record.refs]))}
    if not set(obj) <= words:
        return 0
    if verb is not None and verb not in _GENERIC and not any(
            w in (verb, verb + "e") or w.rstrip("e") == verb for w in words):
        return 0
    return len(obj) + (verb is not None)


def done_target(clause: str, existing: Sequence[Recalled]) -> Recalled | None:
    """The open loop among ``existing`` that ``clause`` reports done, if any."""
    found = reported_done(clause)
    if found is None:
        return None
    verb, obj = found
    loops = [r for r in existing if r.record.kind == Kind.OPEN_LOOP
             and r.record.loop_status != LoopStatus.CLOSED
             and r.record.status in (Status.ACTIVE, Status.STALE)]
    best: tuple[int, Recalled] | None = None
    for loop in loops:
        score = _matches(verb, obj, loop)
        if score and (best is None or score > best[0]):
            best = (score, loop)
    return best[1] if best else None
