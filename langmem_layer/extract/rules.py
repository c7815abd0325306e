"""An offline, deterministic extractor driven by a table of regular expressions.

``RuleExtractor`` reads only the user's own messages (``HumanMessage``), splits
them into sentences and clauses, and proposes at most one operation per clause: the
first rule, in table order, that matches. Rules whose confidence is not above
``RuleExtractor.min_confidence`` (0.8) are skipped. Matching is case-insensitive and
accepts both ``'`` and ``’`` in contractions. ``X`` is the rest of the clause.

=======================================  ===============================  ============  =====
Phrase (``X``: rest of the clause)       Kind / layer / policy            Predicate     Conf.
=======================================  ===============================  ============  =====
forget about/that X, please don't        FORGET (each matching memory)                  0.95
remember X, stop remembering X, delete
what you know about X
never mention X, don't bring up X,       protocol / identity / avoid      avoid_topic   0.95
please don't talk about X
I don't want to talk about X             protocol / identity / avoid      avoid_topic   0.85
remind me to/about/of/that X             open_loop / episodic / continue                1.0
my name is X, call me X, I'm called X    profile_fact / identity / speak  name          1.0
I'm allergic to X                        profile_fact / identity / fact.  allergic_to   0.95
I speak X                                profile_fact / identity / speak  speaks        0.95
I work at/for X                          profile_fact / semantic / speak  works_at      0.90
I live in X                              profile_fact / semantic / speak  lives_in      0.90
I moved to X (always a change)           profile_fact / semantic / speak  lives_in      0.85
I prefer X                               preference / procedural / adapt  prefers       0.95
I'm usually free X                       preference / procedural / adapt  usually_free  0.85
I always X (a habit)                     preference / procedural / adapt  habit         0.90
I don't like / dislike / hate X          preference / procedural / adapt  dislikes      0.85
I like / love / enjoy X (never proposed) preference / procedural / adapt  likes         0.80
+ date: I need to / will / promised to   open_loop / episodic / continue                0.90
X; I'm meeting/flying/... X; I have
<event>; my/our/the <event> is X
I no longer live in X, I live in Y now   UPDATE, as the new fact's row    (new fact)    (row)
I no longer work at X; I don't work at   CONTRADICT of the old memory     (the verb's)  0.90
X anymore; I'm not X anymore
actually/no/sorry: it's Y, not X         UPDATE of the memory naming X                  0.85
I called X, I've sent X, done with X,    CLOSE_OPEN_LOOP of the open loop               0.90
X is done (see write/loops.py)           naming X (and the verb)
=======================================  ===============================  ============  =====

Conventions:

* Content is a third-person statement: ``X`` is kept verbatim except that trailing
  punctuation and fillers ("by the way", "too", "now") are dropped, first-person
  pronouns become third person ("my" -> "their") and habits conjugate their first
  verb ("I always take the stairs" -> "Always takes the stairs."). Salience: identity
  facts and boundaries 0.9, open loops 0.8, preferences 0.7, other facts 0.6.
* Dated plans need a date phrase (``dates``) that is not
  in the past and, for "I have" / "my X is", an event noun, so "I have a cold today"
  is not a plan. A relative date is resolved into the content ("Has an interview on
  Friday (Fri 2026-11-20).") so the text stays true after the day has passed.
* Name, workplace and home are single-valued: a new value is an UPDATE of the memory
  holding another value; with no such memory it is still an UPDATE after a change cue
  ("actually", "now", "these days", "I moved to"), with ``target_hint`` the predicate
  in the words contents use ("works at"). The same value is a REINFORCE.
* Any other ADD equal to an existing memory (same content hash, or same subject,
  predicate and object) becomes a REINFORCE of it.
* FORGET and "it's Y, not X" target the existing memories whose content, object or
  refs contain every content word of ``X``. A vague "I'm not X anymore" with no new
  fact and no such memory proposes nothing: the write path never has to guess.
* Refs: ``X`` without leading articles/prepositions (facts, preferences, boundaries,
  forgets; at most six words), plus capitalised runs in the clause that are not its
  first word, "I", a weekday or a month.
* Questions only yield requests (remind, forget, boundaries); clauses starting with
  "if" yield nothing; moods ("I'm tired today") are never extracted. Hypotheticals
  ("imagine I ...", "I wish ..."), sarcasm ("yeah right, ...") and sentences holding a
  quotation also yield only requests, and no fact is taken after a reporting verb
  ("my boss said I should ...") (``phrases``).
* More rows, for favourites, pets, possessions, family members, moves, job changes,
  health, learning and things stopped: ``statements``, placed
  before "I work at". Facts drop a trailing time phrase and an aside ("Porto last
  spring", "Berlin, near the park"); "wish me luck" and the like are fillers.
* One correction per sentence: a sentence that corrects is not searched further.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_layer.extract.dates import DateMatch, find_date
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.extract.loops import done_target
from langmem_layer.extract.phrases import (
    clauses,
    clean,
    name_run,
    not_literal,
    person,
    reported_before,
    sentences,
    text_of,
    third_person,
    untimed,
)
from langmem_layer.extract.statements import STATEMENT_RULES, Rule
from langmem_layer.extract.statements import rule as _rule
from langmem_layer.types import Kind, Layer, Policy, Recalled, content_hash, normalize_ref

__all__ = ["Rule", "RuleExtractor"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_A = "['’]"  # both apostrophes
_NEG = rf"(?:don{_A}t|do\s+not)"
_X = r"(?P<x>.+)"
_OPENER = (r"^(?:(?:please|pls|can\s+you|could\s+you|would\s+you|will\s+you|kindly|just|also|"
           r"and|oh|ok|okay|actually|hey|so|now)[,\s]+)*")
_PLAN_VERBS = (r"meeting|seeing|visiting|flying|driving|going|heading|travell?ing|leaving|moving|"
               r"starting|presenting|interviewing|hosting|attending|taking|catching|picking|"
               r"dropping|calling|joining|giving|having|running|celebrating|returning|coming")
_EVENT_NOUNS = _words(
    "appointment interview meeting exam test quiz call flight train deadline presentation "
    "dentist doctor checkup check-up party trip class lesson session game match review demo "
    "surgery operation wedding shift conference dinner lunch breakfast concert date birthday "
    "anniversary recital performance talk workshop webinar hearing vacation holiday standup "
    "stand-up sync one-on-one launch release visit reservation booking audition race marathon "
    "tournament ceremony graduation funeral vet haircut therapy massage due"
)
_FACT, _PREF, _LOOP, _PROTO = Kind.PROFILE_FACT, Kind.PREFERENCE, Kind.OPEN_LOOP, Kind.PROTOCOL
_ID, _SEM, _PROC, _EPI = Layer.IDENTITY, Layer.SEMANTIC, Layer.PROCEDURAL, Layer.EPISODIC
_AVOID = "Do not bring up {x} unless the user does."


_RULES: tuple[Rule, ...] = (
    _rule("forget", _OPENER + r"(?:forget\s+(?:about\s+|that\s+|what\s+I\s+(?:said|told\s+you)"
          rf"\s+about\s+)?|stop\s+remembering\s+|{_NEG}\s+remember\s+|(?:delete|erase)\s+(?:what"
          r"\s+you\s+know|everything(?:\s+you\s+know)?|anything)\s+about\s+)" + _X,
          _FACT, _SEM, Policy.SPEAK, 0.95, None, "", 0.5, "request forget"),
    _rule("boundary", rf"\b(?:never|{_NEG}|stop|no\s+more)\s+(?:ever\s+)?(?:mention(?:ing)?|"
          r"bring(?:ing)?\s+up|talk(?:ing)?\s+(?:to\s+me\s+)?about|ask(?:ing)?\s+(?:me\s+)?about"
          r"|remind(?:ing)?\s+me\s+(?:about|of))\s+" + _X,
          _PROTO, _ID, Policy.AVOID, 0.95, "avoid_topic", _AVOID, 0.9, "request"),
    _rule("boundary", rf"\bI\s+(?:really\s+)?{_NEG}\s+(?:want|like)\s+to\s+(?:talk|hear)\s+about"
          r"\s+" + _X, _PROTO, _ID, Policy.AVOID, 0.85, "avoid_topic", _AVOID, 0.9),
    _rule("remind", r"\bremind\s+me\s+(?P<prep>to|about|of|that)\s+" + _X,
          _LOOP, _EPI, Policy.CONTINUE, 1.0, None, "Wants a reminder {prep} {x}.", 0.8, "request"),
    _rule("name", r"\bmy\s+name\s+is\s+(?P<x>[^,]+)",
          _FACT, _ID, Policy.SPEAK, 1.0, "name", "Name is {x}.", 0.9, "name"),
    _rule("name", rf"\b(?:call\s+me|I(?:{_A}m|\s+am)\s+called)\s+(?P<x>[^,]+)",
          _FACT, _ID, Policy.SPEAK, 1.0, "name", "Name is {x}.", 0.9, "name proper"),
    _rule("allergy", rf"\bI(?:{_A}m|\s+am)\s+(?:(?:very|severely|really|deathly|highly|mildly|"
          r"slightly|also)\s+)?allergic\s+to\s+" + _X,
          _FACT, _ID, Policy.FACTCHECK, 0.95, "allergic_to", "Is allergic to {x}.", 0.9),
    _rule("speak", r"\bI\s+(?:also\s+|can\s+)?speak\s+(?!(?:to|with|about|at|on|in|up|for|of|"
          r"out|too|my|the|a|your|loudly|softly)\b)" + _X,
          _FACT, _ID, Policy.SPEAK, 0.95, "speaks", "Speaks {x}.", 0.9),
    *STATEMENT_RULES,
    _rule("work", r"\bI(?:\s+(?:currently|now|still))?\s+work\s+(?:at|for)\s+(?!(?:night|home|"
          r"the\s+weekend|weekends|a\s+living|\d))" + _X,
          _FACT, _SEM, Policy.SPEAK, 0.9, "works_at", "Works at {x}.", 0.6),
    _rule("live", r"\b(?:I|we)(?:\s+(?:currently|now|still))?\s+live\s+in\s+" + _X,
          _FACT, _SEM, Policy.SPEAK, 0.9, "lives_in", "Lives in {x}.", 0.6),
    _rule("moved", rf"\b(?:I|we)(?:{_A}ve|\s+have)?(?:\s+(?:just|recently|finally))?\s+"
         r"(?:moved|relocated)\s+to\s+" + _X,
          _FACT, _SEM, Policy.SPEAK, 0.85, "lives_in", "Lives in {x}.", 0.6, "change"),
    _rule("prefer", r"\bI\s+(?:(?:really|generally|usually|always|much|strongly|definitely)"
          r"\s+)?prefer\s+" + _X, _PREF, _PROC, Policy.ADAPT, 0.95, "prefers", "Prefers {x}.", 0.7),
    _rule("usually_free", rf"\bI(?:{_A}m|\s+am)\s+usually\s+free\s+" + _X,
          _PREF, _PROC, Policy.ADAPT, 0.85, "usually_free", "Is usually free {x}.", 0.7),
    _rule("always", r"\bI\s+always\s+" + _X,
          _PREF, _PROC, Policy.ADAPT, 0.9, "habit", "Always {x}.", 0.7, "verb"),
    _rule("dislike", rf"\bI\s+(?:really\s+)?(?:{_NEG}\s+(?:really\s+)?like|dislike|hate|"
          rf"can{_A}t\s+stand|cannot\s+stand)\s+" + _X,
          _PREF, _PROC, Policy.ADAPT, 0.85, "dislikes", "Dislikes {x}.", 0.7),
    # Too often feedback on the current reply ("I like this answer"): kept below threshold.
    _rule("like", r"\bI\s+(?:really\s+)?(?:like|love|enjoy)\s+" + _X,
          _PREF, _PROC, Policy.ADAPT, 0.8, "likes", "Likes {x}.", 0.7),
    _rule("plan-need", rf"\bI(?:\s+(?:need|have|must)\s+to|\s+must|{_A}ve\s+got\s+to|\s+gotta|"
          r"\s+should)\s+(?!(?:be|feel)\b)" + _X,
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "Needs to {x}.", 0.8, "plan"),
    # "I'm going to the gym" is a trip (plan-doing), not "going to" + verb.
    _rule("plan-will", rf"\bI(?:\s+will|{_A}ll|(?:{_A}m|\s+am)\s+(?:going\s+to|gonna)|\s+plan\s+"
          r"to)\s+(?!(?:be|feel|probably|the|an?|my|your|his|her|their|our|this|that|bed|work|"
          r"school|church|town|class|lunch|dinner)\b)(?!(?-i:[A-Z]))" + _X,
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "Plans to {x}.", 0.8, "plan"),
    _rule("plan-promise", r"\bI\s+promised\s+to\s+" + _X,
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "Promised to {x}.", 0.8, "plan"),
    _rule("plan-have", rf"\bI(?:\s+have(?:\s+got)?|{_A}ve\s+got|\s+got)\s+(?P<x>(?:an?|my|the|"
          r"this|that|another|one|two|\d+)\b.+)",
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "Has {x}.", 0.8, "plan event"),
    _rule("plan-doing", rf"\b(?:I(?:{_A}m|\s+am)|we(?:{_A}re|\s+are))\s+(?P<x>(?:{_PLAN_VERBS})"
          r"\b(?!\s+an?\s+(?:bad|rough|hard|good|great|long|tough|lazy)\s+day).+)",
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "Is {x}.", 0.8, "plan"),
    _rule("plan-event", rf"\b(?:my|our|the)\s+(?P<x>[\w'’-]+(?:\s+[\w'’-]+){{0,3}}?(?:\s+is|"
          rf"{_A}s|\s+are)\s+.+)",
          _LOOP, _EPI, Policy.CONTINUE, 0.9, None, "{X}.", 0.8, "plan event"),
)
_FACT_RULES = tuple(r for r in _RULES if r.kind in (_FACT, _PREF) and "forget" not in r.flags)
_SINGLE_VALUED = frozenset({"name", "works_at", "lives_in", "works_in"})

# Old-value markers of a correction, searched in the whole sentence before clause split.
_UNTIL = r"\s*(?=[,;.!?]|$|\s+(?:and|but|so|since|because|as)\b)"
_MORE = r"(?P<more>\s+any\s?more)?"
_CORRECTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE)) for name, pattern in (
        ("verb", rf"\bI\s+(?P<neg>no\s+longer|{_NEG}|stopped)\s+(?P<verb>live|work|speak)(?:ing)?"
                 rf"\s+(?:(?:in|at|for)\s+)?(?P<old>[^,;]+?){_MORE}{_UNTIL}"),
        ("its", rf"\b(?:it{_A}s|it\s+is|I\s+meant|that{_A}s|that\s+is)\s+(?P<new>[^,;]+?),?\s+"
                r"not\s+(?P<old>[^,;.!?]+)"),
        ("am-not", rf"\bI(?:{_A}m|\s+am)\s+(?P<neg>not|no\s+longer)\s+(?P<prep>(?:at|in|with|"
                   rf"into|an?)\s+)?(?P<old>[^,;]+?){_MORE}{_UNTIL}"),
        ("do-not", rf"\bI\s+(?P<neg>{_NEG}|no\s+longer)\s+(?P<old>[^,;]+?){_MORE}{_UNTIL}"),
    )
)
# A predicate in the words its content uses, so a hint matches the memory's text.
_PREDICATE_WORDS = {"name": "name is", "works_at": "works at", "lives_in": "lives in",
                    "speaks": "speaks", "works_in": "works in"}
_VERBS = {"live": "lives_in", "work": "works_at", "speak": "speaks"}
_CORRECTION_CUE = re.compile(r"\b(?:actually|no|nope|sorry|oops|wait|correction|meant)\b", re.I)
_CHANGE_CUE = re.compile(r"\b(?:actually|now|these\s+days|any\s?more)\b", re.I)

_LEADING = re.compile(r"^(?:(?:my|the|a|an|our|their|that|this|on|in|at|to|for|with|about)\s+)+",
                      re.IGNORECASE)
_PROPER = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_NOT_PROPER = _words("i i'm i’m i've i’ve i'd i’d i'll i’ll ok okay monday tuesday wednesday "
                     "thursday friday saturday sunday january february march april may june july "
                     "august september october november december")
_STOP = _words("i me my mine the a an about that this what you know is am are was to of in at "
               "for on and or it its their them user")
_VAGUE = _words("it that this everything all anything")
_QUESTION = re.compile(r"^(?:do|does|did|what|when|where|who|whom|why|how|which|is|are|am|was|"
                       r"were)\b", re.IGNORECASE)
_NEGATED = re.compile(rf"(?:\bnot|n{_A}t|\bnever)\s+$", re.IGNORECASE)

_Found = tuple[Rule, re.Match[str], str, DateMatch | None]


class RuleExtractor:
    """Deterministic extractor implementing ``Extractor``.

    Attributes:
        min_confidence: Only operations with a confidence strictly above this are proposed.
        rules: The rule table in priority order (the first match in a clause wins).
    """

    min_confidence: float = 0.8
    rules: tuple[Rule, ...] = _RULES

    def extract(
        self,
        messages: Sequence[BaseMessage],
        *,
        existing: Sequence[Recalled] = (),
        now: datetime,
    ) -> list[MemoryOperation]:
        """Propose operations for the human messages in ``messages``.

        Args:
            messages: The turn's new messages; only ``HumanMessage`` s are read.
            existing: The user's relevant memories, used for targets and reinforcement.
            now: The turn's time; every relative date is resolved against it.

        Returns:
            The proposed operations in message and sentence order, without repeats.
        """
        ops: list[MemoryOperation] = []
        seen: set[tuple[str, str | None, str | None, str | None]] = set()
        for message in messages:
            if not isinstance(message, HumanMessage):
                continue
            for sentence in sentences(text_of(message)):
                src = {"source_message_id": message.id, "source_text": sentence}
                for op in self._sentence(sentence, existing, now, src):
                    key = (op.op.value, op.content, op.target_id, op.target_hint)
                    if op.confidence > self.min_confidence and key not in seen:
                        seen.add(key)
                        ops.append(op)
        return ops

    async def aextract(
        self,
        messages: Sequence[BaseMessage],
        *,
        existing: Sequence[Recalled] = (),
        now: datetime,
    ) -> list[MemoryOperation]:
        """Async twin of ``extract`` (there is no I/O to await)."""
        return self.extract(messages, existing=existing, now=now)

    def _sentence(self, sentence: str, existing: Sequence[Recalled], now: datetime,
                  src: dict[str, Any]) -> list[MemoryOperation]:
        question = sentence.endswith("?") or bool(_QUESTION.match(sentence))
        if not question:
            correction = self._correction(sentence, existing, now, src)
            if correction is not None:
                return [correction]
        # A question, hypothetical, sarcasm or quotation states nothing about the user;
        # it may still ask for something (remind, forget, a boundary).
        literal = not question and not not_literal(sentence)
        rules = [r for r in self.rules if literal or "request" in r.flags]
        ops: list[MemoryOperation] = []
        for clause in clauses(sentence):
            if not re.match(r"(?:what\s+)?if\b", clause, re.IGNORECASE):
                if not question and (loop := done_target(clause, existing)) is not None:
                    ops.append(MemoryOperation(
                        op=OpType.CLOSE_OPEN_LOOP, target_id=loop.key,
                        target_hint=loop.record.content, kind=Kind.OPEN_LOOP,
                        layer=loop.record.layer, confidence=0.9, reason="rule:loop-done",
                        **src))
                ops.extend(self._clause(clause, rules, existing, now, src))
        return ops

    def _match(self, text: str, rules: Sequence[Rule], now: datetime) -> _Found | None:
        for rule in rules:
            if rule.confidence <= self.min_confidence:
                continue
            m = rule.pattern.search(text)
            # "don't call me Danny", "never remind me ...": negated requests are not requests.
            if m is None or _NEGATED.search(text[: m.start()]):
                continue
            # "My boss said I should ...": someone else's words, not the user's statement.
            if "request" not in rule.flags and reported_before(text[: m.start()]):
                continue
            x = clean(m.group("x"))
            if rule.kind is not _LOOP:
                x = untimed(x)
            if "name" in rule.flags:
                x = name_run(x)
            if not x or ("proper" in rule.flags and not x[0].isupper()):
                continue
            when = find_date(x, now) if rule.kind is _LOOP else None
            if "plan" in rule.flags and (when is None or when.when.date() < _today(now, when)):
                continue
            if "event" in rule.flags and not _has_event(x[: when.start] if when else x):
                continue
            return rule, m, x, when
        return None

    def _clause(self, clause: str, rules: Sequence[Rule], existing: Sequence[Recalled],
                now: datetime, src: dict[str, Any]) -> list[MemoryOperation]:
        found = self._match(clause, rules, now)
        if found is None:
            return []
        rule, m, x, when = found
        if "forget" in rule.flags:
            if normalize_ref(x) in _VAGUE:  # "forget it": nothing to look for
                return []
            common: dict[str, Any] = {"op": OpType.FORGET, "target_hint": x, **src,
                                      "confidence": rule.confidence, "refs": _refs(x, clause),
                                      "reason": f"rule:{rule.name}"}
            targets = _mentioning(existing, x)
            return [MemoryOperation(**common, target_id=t.key, kind=t.record.kind,
                                    layer=t.record.layer) for t in targets
                    ] or [MemoryOperation(**common)]
        op = _build(rule, m, x, when, clause, src)
        if rule.predicate in _SINGLE_VALUED:
            same = [r for r in existing if r.record.predicate == rule.predicate]
            other = [r for r in same if normalize_ref(r.record.object or "") != normalize_ref(x)]
            changed = "change" in rule.flags or bool(_CHANGE_CUE.search(clause))
            if len(other) == len(same) and (other or changed):  # no memory has this value yet
                return [op.model_copy(update={
                    "op": OpType.UPDATE, "reason": op.reason + "+update",
                    "target_id": other[0].key if other else None,
                    "target_hint": other[0].record.content if other
                    else _PREDICATE_WORDS[rule.predicate]})]
        return [_reinforce_if_known(op, existing)]

    def _correction(self, sentence: str, existing: Sequence[Recalled], now: datetime,
                    src: dict[str, Any]) -> MemoryOperation | None:
        """One UPDATE/CONTRADICT for a sentence that says an old value no longer holds."""
        for name, pattern in _CORRECTIONS:
            m = pattern.search(sentence)
            if m is None or not (old := clean(m.group("old"))):
                continue
            groups = m.groupdict()
            # "I don't live in X" may merely clarify; only "anymore" makes it a change.
            neg = re.sub(r"\s+", " ", (groups.get("neg") or "").lower().replace("’", "'"))
            if neg in ("not", "don't", "do not") and not groups.get("more"):
                continue
            reason = f"rule:correction-{name}"
            if name == "its":
                if (new := clean(m.group("new"))) and _CORRECTION_CUE.search(sentence):
                    return _replace_value(old, new, existing, reason, src)
                continue
            predicate = _VERBS.get((groups.get("verb") or "").lower())
            phrase = _PREDICATE_WORDS.get(predicate or "", "")
            hint = f"{phrase} {old}" if phrase else old
            found = self._match(sentence[m.end() :], _FACT_RULES, now) or self._match(
                sentence[: m.start()], _FACT_RULES, now)
            if found is not None:
                rule, fm, x, when = found
                target = _target(existing, predicate or rule.predicate, old)
                return _build(rule, fm, x, when, sentence, src).model_copy(update={
                    "op": OpType.UPDATE, "reason": reason, "target_hint": hint,
                    "target_id": target.key if target else None})
            target = _target(existing, predicate, old)
            if target is None and predicate is None:
                return None  # too vague to contradict anything we do not already know of
            if name == "am-not":
                content = f"Is no longer {groups.get('prep') or ''}{person(old)}."
            else:
                content = f"No longer {hint if phrase else third_person(person(old))}."
            return MemoryOperation(
                op=OpType.CONTRADICT, content=content, target_hint=hint, confidence=0.9,
                target_id=target.key if target else None,
                kind=target.record.kind if target else _FACT, subject="user",
                predicate=predicate, object=old, refs=_refs(old, sentence), reason=reason, **src)
        return None


def _build(rule: Rule, m: re.Match[str], x: str, when: DateMatch | None, text: str,
           src: dict[str, Any]) -> MemoryOperation:
    """The ADD a rule match proposes; ``text`` is where proper nouns are looked for."""
    third = x if "name" in rule.flags else person(x)
    if "verb" in rule.flags:
        third = third_person(third)
    groups = {k: person(v).lower() if k != "name" else v
              for k, v in m.groupdict().items() if v and k not in ("x", "prep")}
    prep = (m.groupdict().get("prep") or "").lower()
    content = rule.template.format(x=third, X=third[:1].upper() + third[1:], prep=prep, **groups)
    if when is not None and not when.is_absolute:
        stamp = when.when.strftime("%a %Y-%m-%d" + (" %H:%M" if when.explicit_time else ""))
        content = f"{content[:-1]} ({stamp})."
    loop = rule.kind is _LOOP
    return MemoryOperation(
        op=OpType.ADD, content=content, kind=rule.kind, layer=rule.layer, policy=rule.policy,
        confidence=rule.confidence, salience=rule.salience,
        subject=None if loop else groups["what"] if "other" in rule.flags else "user",
        predicate=rule.predicate, object=None if loop else x, refs=_refs(None if loop else x, text),
        due_at=when.when if when else None, reason=f"rule:{rule.name}", **src)


def _replace_value(old: str, new: str, existing: Sequence[Recalled], reason: str,
                   src: dict[str, Any]) -> MemoryOperation:
    """UPDATE for "it's NEW, not OLD": rewrite the memory that mentions OLD, if known."""
    common: dict[str, Any] = {"op": OpType.UPDATE, "target_hint": old, "confidence": 0.85,
                              "reason": reason, "refs": _refs(new, src["source_text"]), **src}
    targets = _mentioning(existing, old)
    if not targets:
        return MemoryOperation(content=f"Correction: {new}, not {old}.", **common)
    record = targets[0].record
    content = re.sub(rf"\b{re.escape(old)}\b", lambda _: new, record.content, flags=re.I)
    if content == record.content:  # matched on stems only; say it rather than guess
        content = f"{record.content.rstrip('.')} (correction: {new}, not {old})."
    return MemoryOperation(
        content=content, target_id=targets[0].key, kind=record.kind, layer=record.layer,
        policy=record.policy, salience=record.salience, subject=record.subject,
        predicate=record.predicate, object=new if record.object else None, **common)


def _reinforce_if_known(op: MemoryOperation, existing: Sequence[Recalled]) -> MemoryOperation:
    digest = content_hash(op.content or "")
    triple = _triple(op.subject, op.predicate, op.object)
    for item in existing:
        r = item.record
        if (r.content_hash or content_hash(r.content)) == digest or (
            triple is not None and triple == _triple(r.subject or op.subject, r.predicate, r.object)
        ):
            return op.model_copy(update={"op": OpType.REINFORCE, "target_id": item.key,
                                         "reason": op.reason + "+reinforce"})
    return op


def _triple(subject: str | None, predicate: str | None, obj: str | None) -> tuple[str, ...] | None:
    if not (subject and predicate and obj):
        return None
    return normalize_ref(subject), normalize_ref(predicate), normalize_ref(obj.rstrip(".!?"))


def _target(existing: Sequence[Recalled], predicate: str | None, old: str) -> Recalled | None:
    """The memory a correction replaces: same predicate (preferably also naming the old
    value), else any memory naming the old value."""
    same = [r for r in existing if predicate and r.record.predicate == predicate]
    naming = _mentioning(existing, old)
    candidates = [r for r in same if r in naming] or same or naming
    return candidates[0] if candidates else None


def _mentioning(existing: Sequence[Recalled], phrase: str) -> list[Recalled]:
    """Memories whose content, object or refs contain every content word of ``phrase``."""
    wanted = _tokens(phrase)
    return [item for item in existing if wanted and wanted <= _tokens(
        " ".join([item.record.content, item.record.object or "", *item.record.refs]))]


def _tokens(text: str) -> set[str]:
    # Crude stemming (drop a final "s") so "lives" matches "live" on both sides.
    words = re.findall(r"[\w-]+", text.lower().replace("’", "'").replace("'s", ""))
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in _STOP}


def _refs(obj: str | None, text: str) -> list[str]:
    refs: list[str] = []
    bare = _LEADING.sub("", obj or "")
    if bare and len(bare.split()) <= 6:
        refs.append(normalize_ref(bare))
    first = re.match(r"\W*\w[\w'’-]*", text)
    for m in _PROPER.finditer(text):
        name = normalize_ref(re.sub(r"['’]s$", "", m.group()))
        sentence_initial = first is not None and m.start() < first.end()
        if not sentence_initial and name.rstrip("s") not in _NOT_PROPER and name not in refs:
            refs.append(name)
    return refs


def _has_event(text: str) -> bool:
    words = re.findall(r"[\w-]+", text.lower())
    return any(w in _EVENT_NOUNS or w.rstrip("s") in _EVENT_NOUNS for w in words)


def _today(now: datetime, when: DateMatch) -> date:
    """``now``'s calendar date in the timezone the date was resolved in."""
    aware = now if now.tzinfo is not None else now.replace(tzinfo=when.when.tzinfo)
    return aware.astimezone(when.when.tzinfo).date()


