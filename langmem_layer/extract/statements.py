"""The rule table's row type, and the rows for how people state facts about themselves
beyond the core table of ``langmem_layer.extract.rules``.

=========================================  ===============================  ============  =====
Phrase (``X``: rest of the clause)         Kind / layer / policy            Predicate     Conf.
=========================================  ===============================  ============  =====
my favourite W is X; X is my favourite W   preference / semantic / speak    favourite     0.90
my dog/cat... Rex; my dog's name is Rex;   profile_fact / semantic / speak  pet           0.90
I have a cat named Mango; I have two cats
my sister (Ana) works at / lives in / is   profile_fact / semantic / speak  family        0.90
a ... (subject: the relative)
my wife is called Maria; my son's name     profile_fact / semantic / speak  family        0.90
is Leo
I'm/we're based in X; we live in X; we     profile_fact / semantic / speak  lives_in      0.90
moved to X (see the core live/moved rows)
I'm (originally) from X; I grew up in X    profile_fact / identity / speak  from          0.90
I started/got/landed a (new) job at X      profile_fact / semantic / speak  works_at      0.90
(always a change)
I work in X                                profile_fact / semantic / speak  works_in      0.85
I work as X; I'm a/an <occupation>         profile_fact / semantic / speak  occupation    0.90
I drive X; I own X (X with an article)     profile_fact / semantic / speak  drives/owns   0.85
I have/suffer from <condition>             profile_fact / identity / fact.  health        0.90
I'm vegetarian/vegan/diabetic/...          profile_fact / identity / fact.  diet          0.90
I don't/can't eat/drink X                  preference / identity / fact.    avoids        0.85
I'm learning/studying X; I've been ...     profile_fact / semantic / speak  learning      0.85
I stopped/quit/gave up X                   profile_fact / semantic / speak  stopped       0.85
I no longer X (not live/work/speak)        profile_fact / semantic / speak  stopped       0.85
I play (the) X (an instrument, a sport)    profile_fact / semantic / speak  hobby         0.85
I <verb> ... every/each/on Sundays/twice   profile_fact / semantic / speak  routine       0.85
a week/daily (a routine)
=========================================  ===============================  ============  =====

Facts drop a trailing time phrase ("We moved to Porto last spring" -> "Lives in Porto.");
a relative's facts are about the relative (``subject`` is "sister"), never the user's
single-valued facts. Learning and possessions refuse figures of speech ("I'm learning a
lot", "I have a question"). A routine needs a frequency ("every morning", "on Sundays",
"twice a week"), so "I went running" is not one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from langmem_layer.types import Kind, Layer, Policy

__all__ = ["STATEMENT_RULES", "Rule", "rule"]


class Rule(NamedTuple):
    """One row of the rule table.

    Attributes:
        name: Short id; the operation's reason is ``"rule:<name>"``.
        pattern: Compiled, case-insensitive; its group ``x`` is the remembered part.
        kind: Kind of the proposed memory.
        layer: Layer of the proposed memory.
        policy: How the memory may surface.
        confidence: Confidence of a match; proposed only above the threshold.
        predicate: Predicate of the ``("user", predicate, x)`` triple, if any.
        template: ``str.format`` template over ``x`` (third person), ``X`` (capitalised),
            ``prep`` (the pattern's ``prep`` group, if any) and any other named group.
        salience: Salience of the proposed memory.
        flags: ``request`` (allowed in questions), ``proper`` (``x`` must be
            capitalised), ``name`` (keep the leading proper-noun run), ``change``
            (always a change of value), ``plan`` (needs a present or future date),
            ``event`` (needs an event noun), ``verb`` (conjugate the first word),
            ``forget``, ``other`` (about the person in group ``what``, not the user).
    """

    name: str
    pattern: re.Pattern[str]
    kind: Kind
    layer: Layer
    policy: Policy
    confidence: float
    predicate: str | None
    template: str
    salience: float
    flags: frozenset[str] = frozenset()


def rule(name: str, pattern: str, kind: Kind, layer: Layer, policy: Policy, confidence: float,
         predicate: str | None, template: str, salience: float, flags: str = "") -> Rule:
    """A ``Rule`` with its pattern compiled case-insensitively."""
    return Rule(name, re.compile(pattern, re.IGNORECASE), kind, layer, policy, confidence,
                predicate, template, salience, frozenset(flags.split()))


_A = "['’]"
_NEG = rf"(?:don{_A}t|do\s+not)"
_X = r"(?P<x>.+)"
_IM = rf"I(?:{_A}m|\s+am)"
_START = (r"^(?:(?:oh|ok|okay|and|also|so|well|btw|by\s+the\s+way|actually|fun\s+fact)[,\s]+)*")
_CAP = r"(?-i:[A-Z])"  # a capital, even though the patterns ignore case
_FAV = r"(?:all[-\s]time\s+|absolute\s+|very\s+)?(?:fav(?:ou?rite)?|fave)"
_PET = (r"dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|guinea\s+pig|horse|pony|bird|"
        r"budgie|turtle|tortoise|snake|lizard|gecko|ferret|goldfish|fish|pet")
_REL = (r"mom|mum|mother|dad|father|sister|brother|wife|husband|partner|boyfriend|girlfriend|"
        r"fianc[eé]e?|son|daughter|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|"
        r"niece|nephew|step(?:mom|mum|dad|son|daughter|sister|brother)|twin|kids?|children|"
        r"parents|best\s+friend|roommate|flatmate|boss|manager")
# What a relative's sentence must say to be a fact about them, not a passing event.
_REL_FACT = (r"(?:works?|worked|lives?|lived|studies|teaches|runs|owns|moved|is\s+(?:an?|the|"
             r"from|in|at|retired|married|pregnant|allergic|studying|learning|getting\s+married|"
             r"\d+)|has\s+(?:an?|two|three|\d+)|just\s+(?:started|got|moved|had))\b")
_OCCUPATION = (
    r"nurse|teacher|doctor|physician|surgeon|dentist|engineer|developer|programmer|designer|"
    r"architect|lawyer|attorney|accountant|student|professor|lecturer|researcher|scientist|"
    r"writer|journalist|editor|photographer|chef|cook|baker|barista|waiter|waitress|"
    r"pharmacist|therapist|psychologist|consultant|analyst|electrician|plumber|carpenter|"
    r"mechanic|pilot|firefighter|paramedic|vet|veterinarian|musician|artist|actor|actress|"
    r"farmer|librarian|translator|freelancer|entrepreneur|founder|intern|retiree|"
    r"social\s+worker|data\s+scientist|product\s+manager|project\s+manager|software\s+engineer")
_CONDITION = (
    r"asthma|diabetes|epilepsy|migraines?|adhd|autism|dyslexia|depression|anxiety|insomnia|"
    r"arthritis|celiac(?:\s+disease)?|coeliac(?:\s+disease)?|crohn{_A}?s(?:\s+disease)?|ibs|"
    r"high\s+blood\s+pressure|hypertension|a\s+heart\s+condition|tinnitus|eczema|psoriasis|"
    r"lupus|multiple\s+sclerosis|long\s+covid|sleep\s+apnea|a\s+bad\s+(?:back|knee)|"
    r"chronic\s+\w+\s+pain|back\s+pain|colou?r\s*blindness|hearing\s+loss|pcos|endometriosis|"
    r"fibromyalgia|bipolar\s+disorder|ptsd|ocd|hay\s*fever").replace("{_A}", _A)
_DIET = (r"vegetarian|vegan|pescatarian|lactose[-\s]intolerant|gluten[-\s]intolerant|"
         r"gluten[-\s]free|diabetic|celiac|coeliac|epileptic|asthmatic|pregnant|sober|"
         r"colou?r[-\s]?blind|deaf|hard\s+of\s+hearing|halal|kosher|teetotal|dyslexic|autistic")
_FIGURATIVE = r"(?:a\s+lot|so\s+much|that|this|it|how|from|about|with|more|a\s+thing|the\s+hard)\b"
_DAYS = (r"mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|"
         r"weekdays|the\s+weekends?|weekend\s+mornings")
#: How often, which makes "I <verb> ..." a routine rather than something that happened.
_FREQ = (rf"(?:every|each)\s+\w+|on\s+(?:{_DAYS})|(?:once|twice|three\s+times|\d+\s+times)"
         r"\s+a\s+(?:day|week|month|year)|daily|weekly|monthly|most\s+(?:days|mornings|"
         r"evenings|nights|weekends)|at\s+(?:the\s+)?weekends?|in\s+the\s+(?:mornings|evenings)")
#: What does not open a routine: auxiliaries, states of mind, and what other rows take.
_NOT_ROUTINE = (r"[a-z]+ed|am|was|were|will|would|have|has|had|do\s+not|did|don|can|could|"
                r"should|must|might|"
                r"may|need|want|think|thought|guess|know|feel|felt|mean|hope|wish|love|like|"
                r"hate|prefer|always|never|work|live|speak|play|went|got|said|told|asked")
_FACT, _PREF = Kind.PROFILE_FACT, Kind.PREFERENCE
_ID, _SEM = Layer.IDENTITY, Layer.SEMANTIC
_SPEAK, _CHECK = Policy.SPEAK, Policy.FACTCHECK

STATEMENT_RULES: tuple[Rule, ...] = (
    rule("favourite", rf"\bmy\s+{_FAV}\s+(?P<what>[\w'’ -]{{2,40}}?)\s+(?:is|are)\s+"
         r"(?!(?:that|this|it|when|probably\s+not)\b)" + _X,
         _PREF, _SEM, _SPEAK, 0.9, "favourite", "Favourite {what} is {x}.", 0.7),
    rule("favourite", rf"^(?P<x>(?!(?:that|this|it|which|what|there|here)\b)[\w'’&.-]+"
         rf"(?:\s+[\w'’&.-]+){{0,4}}?)\s+(?:is|are)\s+(?:probably\s+|definitely\s+|still\s+)?"
         rf"my\s+{_FAV}\s+(?P<what>[\w'’ -]{{2,30}}?)[.!\s]*$",
         _PREF, _SEM, _SPEAK, 0.9, "favourite", "Favourite {what} is {x}.", 0.7),
    rule("pet", rf"\bmy\s+(?P<what>{_PET})(?:{_A}s\s+name\s+is|\s+is\s+(?:called|named)|,)?"
         rf"\s+(?P<x>{_CAP}.*)", _FACT, _SEM, _SPEAK, 0.9, "pet", "Has a {what} named {x}.",
         0.7, "name proper"),
    rule("pet", rf"\bI\s+(?:also\s+)?(?:have|{_A}ve\s+got|got|adopted)\s+(?:an?|one|our|my)\s+"
         rf"(?:\w+\s+)?(?P<what>{_PET})\s+(?:called|named)\s+(?P<x>{_CAP}.*)",
         _FACT, _SEM, _SPEAK, 0.9, "pet", "Has a {what} named {x}.", 0.7, "name proper"),
    rule("pet", rf"\bI\s+(?:also\s+)?(?:have|{_A}ve\s+got|own)\s+(?P<x>(?:an?|one|two|three|"
         rf"four|\d+)\s+(?:\w+\s+)?(?:{_PET})s?)[.!\s]*$",
         _FACT, _SEM, _SPEAK, 0.9, "pet", "Has {x}.", 0.7),
    rule("family", rf"{_START}my\s+(?P<what>{_REL})\s+(?P<name>{_CAP}[\w'’-]+)\s+"
         rf"(?P<x>{_REL_FACT}.+)", _FACT, _SEM, _SPEAK, 0.9, "family",
         "Their {what} {name} {x}.", 0.7, "other"),
    rule("family", rf"{_START}my\s+(?P<what>{_REL})\s+(?P<x>{_REL_FACT}.+)",
         _FACT, _SEM, _SPEAK, 0.9, "family", "Their {what} {x}.", 0.7, "other"),
    rule("family", rf"\bmy\s+(?P<what>{_REL})(?:{_A}s\s+name\s+is|\s+is\s+(?:called|named))"
         rf"\s+(?P<x>{_CAP}.*)", _FACT, _SEM, _SPEAK, 0.9, "family",
         "Their {what} is named {x}.", 0.7, "name proper other"),
    rule("live", rf"\b(?:{_IM}|we(?:{_A}re|\s+are))\s+(?:now\s+|currently\s+)?based\s+"
         r"(?:in|out\s+of)\s+" + _X, _FACT, _SEM, _SPEAK, 0.9, "lives_in", "Lives in {x}.", 0.6),
    rule("from", rf"\b(?:{_IM}\s+(?:originally\s+)?from|I\s+grew\s+up\s+in)\s+(?P<x>{_CAP}.*)",
         _FACT, _ID, _SPEAK, 0.9, "from", "Is from {x}.", 0.8),
    rule("new-job", rf"\bI(?:{_A}ve|\s+have)?(?:\s+(?:just|recently|finally))?\s+(?:started|got|"
         r"landed|accepted|took|began)\s+(?:a\s+|my\s+|the\s+)?(?:new\s+)?(?:job|position|role|"
         r"gig)\s+(?:at|with)\s+" + _X, _FACT, _SEM, _SPEAK, 0.9, "works_at", "Works at {x}.",
         0.6, "change"),
    rule("work-in", r"\bI(?:\s+(?:currently|now|still))?\s+work\s+in\s+(?!(?:the\s+(?:morning|"
         r"evening|afternoon|night)|shifts|night|a\s+team|an?\s+office)\b)" + _X,
         _FACT, _SEM, _SPEAK, 0.9, "works_in", "Works in {x}.", 0.6),
    rule("occupation", r"\bI(?:\s+(?:currently|now|still))?\s+work\s+as\s+" + _X,
         _FACT, _SEM, _SPEAK, 0.9, "occupation", "Works as {x}.", 0.6),
    rule("occupation", rf"^(?:(?:oh|and|well|so|actually)[,\s]+)*{_IM}\s+(?:now\s+)?(?P<x>an?\s+"
         rf"(?:[\w-]+\s+){{0,2}}?(?:{_OCCUPATION})(?:s)?\b.*)",
         _FACT, _SEM, _SPEAK, 0.9, "occupation", "Is {x}.", 0.6),
    rule("drive", r"\bI\s+(?:also\s+|still\s+)?drive\s+(?P<x>(?:an?|the|my)\s+.+)",
         _FACT, _SEM, _SPEAK, 0.9, "drives", "Drives {x}.", 0.6),
    rule("own", r"\bI\s+(?:also\s+|still\s+)?own\s+(?P<x>(?:an?|two|three|\d+|the)\s+.+)",
         _FACT, _SEM, _SPEAK, 0.9, "owns", "Owns {x}.", 0.6),
    rule("health", rf"\bI\s+(?:also\s+)?(?:have|{_A}ve\s+got|suffer\s+from|live\s+with|"
         rf"(?:was|{_A}ve\s+been|have\s+been)\s+diagnosed\s+with)\s+(?P<x>(?:(?:mild|severe|"
         rf"chronic|bad|type\s+[12]|an?)\s+)*(?:{_CONDITION})\b.*)",
         _FACT, _ID, _CHECK, 0.9, "health", "Has {x}.", 0.9),
    rule("diet", rf"\b{_IM}\s+(?:(?:a|also|strictly|mostly|fully|now)\s+)*(?P<x>(?:{_DIET})\b.*)",
         _FACT, _ID, _CHECK, 0.9, "diet", "Is {x}.", 0.9),
    rule("avoids", rf"\bI\s+(?:can{_A}t|cannot|{_NEG})\s+(?P<verb>eat|drink)\s+" + _X,
         _PREF, _ID, _CHECK, 0.9, "avoids", "Does not {verb} {x}.", 0.8),
    rule("learning", rf"\b(?:{_IM}|I(?:{_A}ve|\s+have)\s+been|I(?:{_A}ve|\s+have)?\s+started)"
         r"\s+(?:currently\s+|also\s+|slowly\s+|finally\s+)?(?:learning|studying|taking\s+"
         rf"(?:lessons|classes)\s+in|practi[cs]ing)\s+(?!{_FIGURATIVE})" + _X,
         _FACT, _SEM, _SPEAK, 0.9, "learning", "Is learning {x}.", 0.7),
    rule("stopped", rf"\bI(?:{_A}ve|\s+have)?(?:\s+(?:just|finally|recently|officially))?\s+"
         r"(?P<verb>stopped|quit|gave\s+up|given\s+up)\s+(?!(?:my\s+job|the\s+job|my\s+work|"
         r"work|it|that|this|trying|caring|on)\b)" + _X,
         _FACT, _SEM, _SPEAK, 0.9, "stopped", "Has stopped {x}.", 0.7),
    rule("stopped", r"\bI\s+no\s+longer\s+(?!(?:live|work|speak|want|need|have\s+to)\b)" + _X,
         _FACT, _SEM, _SPEAK, 0.9, "stopped", "No longer {x}.", 0.7, "verb"),
    rule("hobby", r"\bI\s+(?:also\s+|still\s+|usually\s+|often\s+|regularly\s+)?play\s+"
         r"(?!(?:a\s+(?:role|part|lot|bit)|it|along|around|with|games?\s+with|dumb|nice|hard|"
         r"safe|fair|down|up|out|back|by)\b)" + _X,
         _FACT, _SEM, _SPEAK, 0.85, "hobby", "Plays {x}.", 0.6),
    rule("routine", r"\bI\s+(?:also\s+|still\s+|usually\s+|often\s+|regularly\s+|normally\s+|"
         rf"typically\s+)?(?P<x>(?!(?:{_NOT_ROUTINE})\b)[a-z]+\b.*?\b(?:{_FREQ})\b.*)",
         _FACT, _SEM, _SPEAK, 0.85, "routine", "{X}.", 0.6, "verb"),
)
