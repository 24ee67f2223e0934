"""The lexicon of the fact cues: patterns and word lists that `memory/facts/capture.py` reads.

Kept apart so the rules in `cues.py` read as rules. Every pattern is compiled once here.
"""

from __future__ import annotations

import re


def cue(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Not the user's own words: code, blockquotes, multi-word quotes, transcripts, text to process.
# A curly quote ends at the next opening one too: from an opening quote that no closing one
# follows, the search ran to the end of the text (or line), once per such quote, which made a
# message of them quadratic ('“' 80,000 times: 5 s). A straight quote's span with a blank in it
# is found by its first blank (or its line break), not by trying each blank in turn: that read
# the rest of the line again from every blank, so one unclosed '"' before 100 kB of words held
# the writer minutes.
QUOTES = re.compile(
    r"```.*?(?:```|\Z)|`(?:[^`\n]*\n|[^`\s]*\s)[^`\n]*`|^[ \t]*>[^\n]*|“[^“”]*”|‘[^‘’\n]*’"
    r"|\"(?:[^\"\n]*\n|[^\"\s]*\s)[^\"\n]*\"|(?<![\w’])'(?:[^'\n]*\n|[^'\s]*\s)[^'\n]*'(?!\w)",
    re.S | re.M,
)
CODE_LINE = re.compile(
    r"^(?:[ ]{4,}|\t)\S|^\s*(?:#|//|/\*|def |class |import |from \S+ import|return\b|const |let "
    r"|var |function |SELECT |\$ )|[{};]\s*$|==|!=|=>|->|\w\(|\w\s*=\s*\S"
)
SPEAKER = re.compile(
    r"^\s*(?!(?:Note|Update|Edit|Correction|Remember|Context|Background|Also|Info|Reminder)\b)"
    r"(?:[A-Z][\w'-]{0,15}|(?i:user|assistant|human|bot|q|a)):\s"
)
PROCESSING = cue(
    r"\b(?:translate|translating|proofread|rephrase|paraphrase|reword|rewrite|grammar|spell-?check"
    r"|role-?play|pretend|cover letter|write (?:a|an|me a) (?:story|poem|dialogue|script|scene"
    r"|letter|email|bio|message|paragraph)|draft (?:a|an|my)|sample|placeholder|fixture)\b"
)
# Words that make the rest of their sentence hypothetical, fictional or a joke ...
TAINT = cue(
    r"\b(?:if|suppose|supposing|imagine|hypothetically|let'?s say|assuming|unless|whether|thinks?"
    r"|thought|believes?|jk|kidding|joking|wish(?:ed)?|dream\w*|example|e\.g|character|story"
    r"|novel|game|script|sentence)\b"
)
# ... and reported speech, which voids its sentence ('…, as they say'), but for a clause the
# user said before a report that goes on with what was said (`own_words`).
REPORTED = cue(
    r"\b(?:said|says|told|tells|asked|asks|wrote|writes|claim(?:s|ed)?|according|replied|texted"
    r"|emailed|(?:they|people|everyone|you) say)\b"
)
# After a report's verb: the words reported ('said halve it', 'told me to rest'), not an end
# ('…, she told me', '…, he said so', '…, she said jokingly').
_REPORT_ENDS = word_set("so too again once before that's")
_OBJECT = word_set("me us him her them")


def own_words(sentence: str) -> str:
    """`sentence` as the user's own statement: "" when it reports what someone said, else the
    clauses before the report when the report comes after a comma and goes on with what was
    said: in "Pip's Apoquel went from 16 mg to 8 mg a day, Dr Okafor said halve it since the
    itching settled" the change is the user's (fresh2's dog, whose new dose was lost with the
    whole sentence). A report at the end ("I moved to Paris, she said") still voids all of it:
    what came before is what was reported."""
    found = REPORTED.search(sentence)
    if found is None:
        return sentence
    comma = max(sentence.rfind(",", 0, found.start()), sentence.rfind(";", 0, found.start()))
    verb = found[0].lower()
    if comma < 0 or verb == "according" or verb.endswith(" say"):  # 'as they say' ends it
        return ""
    words = [w.strip(".,;:!?'\"").lower() for w in sentence[found.end() :].split()]
    words = words[1:] if words[:1] and words[0] in _OBJECT else words
    if not words or not words[0].isalpha() or words[0] in _REPORT_ENDS or words[0].endswith("ly"):
        return ""
    return sentence[:comma]


# A joke or a hedge takes back the whole sentence, also what came before it ('I moved to
# Lisbon, jk', 'I'm allergic to cats, I think'); 'I'm not kidding' takes back nothing.
RETRACTED = cue(
    r"(?<!\bnot\s)(?<!\bno\s)\b(?:jk|j/k|kidding|joking)\b|[,;]\s*(?:(?:lol\s+|haha\s+)?(?:no\s+)?"
    r"(?:but\s+)?i\s+(?:think|guess|believe|suppose|reckon|wish)|maybe|probably|perhaps|possibly"
    r"|apparently|supposedly|allegedly|in\s+theory|on\s+paper|or\s+so\s+i\s+(?:thought|hear"
    r"|heard|hope)|not\s+sure|i'?m\s+not\s+(?:sure|certain)|or\s+something(?:\s+like\s+that)?)"
    r"\W*$"
)
LEAD = cue(
    r"(?:(?:[-*•]+|(?:hi|hello|hey|hiya|there|ok|okay|oh|so|well|also|and|but|btw|fyi|by the way"
    r"|just so you know|for the record|for context|quick (?:note|update)|actually|oops|sorry"
    r"|(?:a\s+)?(?:small\s+|quick\s+|slight\s+|minor\s+)?correction\s+(?:to|on)\s+(?:what"
    r"|something)\s+i\s+(?:said|told\s+you|mentioned|wrote)(?:\s+(?:before|earlier))?"
    r"|i\s+meant(?:\s+to\s+say)?|correction|update|ps|anyway|anyways|yeah|yes|no|nope|alright|right|um|uh|hmm|again"
    r"|heads up|one more thing|ah|wait|just|fwiw|to be clear|in fact|plus|honestly|frankly|tbh"
    r"|personally|now)\b)[\s,:;!.\-—]*)*"
)
QWORDS = (
    r"(?:what|where|who|whom|whose|when|why|how|which|do|does|did|is|are|am|was|were|can|could"
    r"|would|will|should|shall|has|have|any|anything)\b(?!\s+not\b)"
)
QUESTION = cue(QWORDS)
QUESTION_TAIL = cue(
    rf"\s*(?:[,;:]|\s[-—]+)\s*(?:(?:and|but|so|or)\s+)?(?={QWORDS})|\s+(?:and|but|so|or)\s+"
    rf"(?={QWORDS})"
)
TAG = cue(r",?\s*(?:ok|okay|alright|right|yeah|please|thanks)\s*\?$")
ASK_MEMORY = cue(r"(?:can|could|would|will) you (?:please )?(?:remember|note|keep in mind|forget)")
COLON_CMD = cue(r"\b(remember|note)(?:\s+this)?\s*:\s*")
FROM_NOW = cue(r"\b(from now on|going forward|moving forward|in (?:the )?future)\s*,\s*")
SUBJ = r"(?:now|i|i'm|im|i've|ive|my|our|we|please|always|never|actually|call|forget|remember)\b"
CLAUSE = cue(
    rf"\s*(?:[,;:]|\s[-—–]+|\.\.\.)\s*(?:(?:and|but|so|plus|also|though)\s+)?(?={SUBJ})"
    rf"|\s+(?:and|but|so|plus|also)\s+(?={SUBJ})"
)
# 'I live in Sheffield and work as a network engineer': a second statement about the same
# subject after 'and', its subject left out; read as 'I work as a network engineer' too.
ELIDED_AND = cue(
    r"(?P<s>i|we)\b(?P<first>[^,;]+?)\s+and\s+(?P<rest>(?:work|live|teach|study|run|own)\b.+)"
)
MAX_SENTENCE = 600  # characters; longer "sentences" are pasted text, and this bounds the cost
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
ABBREV = cue(r"\b(?:st|mr|mrs|ms|dr|jr|sr|prof|mt|ft|e\.g|i\.e|vs)\.$")

# A name or place never starts with these: 'my name is important' is not a name.
JUNK = word_set(
    "a an the not no that this these those it its what who which something anything nothing "
    "everything someone here there important irrelevant relevant unknown secret private long "
    "weird hard common unusual boring funny fine ok okay whatever none same different on in at "
    "complicated difficult simple short mine spelled pronounced written just very pretty really "
    "so too also probably maybe kinda home night nights weekends myself yourself free fear hope "
    "peace denial luxury poverty misery limbo hiding later back crazy tomorrow today now please "
    "mornings mondays people work effort exercise meetings nonsense drama you your to by for of "
    "with after before like about from into over under all still listed mentioned attached"
)
# Common nouns that a user who types in lowercase never means as a name: 'I work for peanuts'
# (a capitalised 'Food Standards Agency' is still a name).
COMMON_NOUNS = word_set(
    "peanuts pennies peanut tips money cash food fun exposure love charity hire living pay "
    "coffee beer wine free nothing"
)
# What may follow a value: the start of a new clause ('Lisbon since 2019', 'Dana and …').
BOUNDARY = word_set(
    "and but because cause since so now currently nowadays these at in for with near from on as "
    "when while after before until though although which who where if unless lol haha btw too "
    "actually also anymore then last this next a an the ago by to yesterday today recently"
)
PHRASE_JUNK = word_set(
    "not no that this these those it its what who which something anything nothing everything "
    "someone here there you your to when how the him her them myself being having whichever "
    "whatever either neither both any"
)
TECH = word_set(  # 'I moved to Rust' is a migration, 'I live in Excel' a figure of speech
    "python rust go golang java kotlin swift typescript javascript react vue angular svelte "
    "postgres postgresql mysql sqlite mongodb redis kubernetes docker aws gcp azure linux windows "
    "macos ubuntu debian arch vim neovim emacs vscode github gitlab jira slack notion django "
    "flask fastapi rails node deno terraform nix poetry conda vite webpack graphql kafka "
    "android ios iphone ipad chrome firefox safari excel outlook word powerpoint teams zoom "
    "sheets docs gmail figma photoshop trello asana confluence discord whatsapp telegram "
    "signal skype webex sharepoint onedrive dropbox salesforce tableau sap"
)
# Not a place a user lives in, though capitalised: 'I moved to Marketing / Spanish / Tuesdays /
# Plan B' is a change of team, language, day or plan. Whole values (one word), except the
# numbering words, which name no place when a label follows them ('Part Two', 'Option C').
DEPARTMENTS = word_set(
    "marketing sales hr finance engineering legal operations ops product design support "
    "compliance procurement accounts accounting payroll recruitment recruiting research "
    "development r&d management admin administration security qa analytics strategy editorial "
    "logistics partnerships communications comms pr tax audit risk treasury underwriting "
    "infrastructure platform devops"
)
LANGUAGES = word_set(
    "english french spanish german italian portuguese dutch japanese chinese mandarin cantonese "
    "korean arabic russian hindi urdu bengali polish swedish norwegian danish finnish greek "
    "turkish hebrew czech hungarian romanian ukrainian vietnamese thai indonesian swahili welsh "
    "irish gaelic catalan basque latin esperanto"
)
CALENDAR = word_set(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
    "thursdays fridays saturdays sundays weekdays weekends january february april june july "
    "august september october november december"
)
NUMBERING = word_set(
    "plan option part step level chapter phase stage round version season book module unit "
    "tier track lesson week day section volume episode grade"
)
# The last word of an organisation's or a department's name ('Deutsche Bank', 'Acme Labs',
# 'Customer Success', 'Human Resources'); a direction before 'Bank' makes a place ('South Bank').
ORG_SUFFIX = word_set(
    "inc inc. ltd ltd. llc plc corp corp. gmbh ag bank group partners consulting capital labs "
    "technologies technology systems solutions software studios ventures holdings insurance "
    "airlines airways motors pharmaceuticals pharma foods brands media networks success support "
    "services relations resources"
)
# Car makes: a car said by its make is a car ('we've got a Kia Sorento'; memory/facts/cars.py).
CAR_MAKES = word_set(
    "audi bmw byd chevrolet chevy citroen citroën cupra dacia fiat ford honda hyundai jaguar jeep "
    "kia lexus mazda mercedes mg mini mitsubishi nissan peugeot polestar porsche renault seat "
    "skoda škoda subaru suzuki tesla toyota vauxhall volkswagen vw volvo opel"
)
DIRECTIONS = word_set("north south east west left right upper lower")
# Well-known employers whose names are no city: 'I've moved to Accenture' is a new job.
# Names that are also places (Santander, Nokia, Orange, Virgin) are left out on purpose.
EMPLOYERS = word_set(
    "accenture deloitte kpmg pwc ey mckinsey bcg bain capgemini infosys wipro tcs cognizant "
    "ibm oracle microsoft google alphabet amazon apple meta facebook netflix spotify uber lyft "
    "airbnb stripe shopify twitter linkedin adobe cisco intel nvidia amd qualcomm dell hp "
    "lenovo samsung sony siemens bosch philips unilever nestle nestlé pepsico pfizer novartis "
    "roche astrazeneca gsk bayer sanofi moderna barclays hsbc lloyds natwest jpmorgan citi "
    "citigroup citibank goldman blackrock revolut monzo starling wise klarna paypal visa "
    "mastercard tesco sainsbury's asda ocado aldi lidl walmart costco ikea zalando starbucks "
    "mcdonald's deliveroo booking.com expedia anthropic openai deepmind palantir databricks "
    "snowflake atlassian canva figma github gitlab dropbox slack zoom tesla boeing airbus "
    "rolls-royce bp unilever diageo vodafone bt telefonica ericsson verizon at&t comcast "
    "disney bbc itv sky reuters bloomberg"
)
# Words that name no thing whose state changes: pronouns, and one-off conversation events
# (moving one is not a lasting fact: 'I moved the meeting to Friday').
PRONOUN = word_set("it them this that these those everything something things stuff one")
ONE_OFF = word_set("meeting call standup stand-up sync chat catch-up session")
# Journeys, parcels and furniture: moved about, never a lasting state ('the train's been
# changed to platform 4', 'my parcel got moved to the depot', 'I moved the sofa').
MOVED_ABOUT = word_set(
    "train bus tram flight plane taxi uber ferry parcel package delivery order sofa couch bed "
    "table desk chair furniture car-park"
)
# People, not things: 'we moved the kids to a new school' says nothing current about a thing.
KIN = word_set(
    "sister brother mum mom dad mother father son daughter wife husband partner friend kids kid "
    "children child boss neighbour neighbor parents"
)
# An allergy to one of these is a figure of speech ('allergic to small talk / meetings / group
# chats / paperwork'), and a fact nobody stated; any other noun is kept, since a missed allergy
# is worse than a strange one ('allergic to lychees'). Foods ending in -ing are named so that
# the gerund guard ('allergic to running') spares them.
FIGURATIVE = word_set(
    "bullshit nonsense drama talk jargon paperwork admin bureaucracy politics commitment "
    "meetings meeting calls chats emails tickets deadlines starts mornings mondays people crowds "
    "work effort exercise change hype feedback criticism rules authority responsibility "
    "spreadsheets slides decks reports homework chores housework commutes queues traffic "
    "stupidity idiots idiocy fools nonsense mediocrity"
)
GERUND_FOODS = word_set("pudding puddings stuffing icing frosting dressing seasoning bedding")
# Evaluative words before the noun make it a figure of speech ('allergic to bad coffee').
EVALUATIVE = word_set("bad boring hard early late corporate pointless endless stupid useless")
JOIN = word_set("de da del van von der la le of upon & al")
TITLES = word_set("Dr. Mr. Mrs. Ms. Prof. St. Mt.")
WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")
ORG_WORD = re.compile(r"[^\W_][\w&.'-]*")
REGION = re.compile(r",\s+([A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)?)(.*)")
CLIP = cue(
    r"\s*(?:[,;:!?()]|\.(?:\s|$)|\s(?:but|because|cause|since|so|although|though|unless|which"
    r"|anymore|any more|lol|haha|btw)\b)"
)
POLITE = cue(
    r"(?:\s+(?:please|pls|thanks|thank you|for me|from (?:your )?memory|now|too|at all|either"
    r"|very much|so much|that much|much|a lot|whatsoever))+$"
)
DEICTIC = cue(r"\b(?:this|these|those|here|above|below|following|latter|former)\b")
FEEDBACK = cue(r"\b(?:you|your|option|version|snippet|solution|approach|answer|response|code)\b")
CODEISH = re.compile(r"[(){}=<>\[\]_\\]|\w\.\w")
# A key under a provider's prefix (OpenAI's and Anthropic's `sk-…`, Stripe's `pk-`/`rk-`,
# Slack's `xoxb-…`, GitLab's `glpat-…`, AWS's `AKIA…`, Google's `AIza…`); those with `_` or a
# dot (`ghp_…`, `sk_live_…`, a JWT) are CODEISH already.
_PREFIXED_KEY = re.compile(r"\b(?:(?:sk|pk|rk|xox[a-z]|glpat)-|AKIA|ASIA|AIza)[\w-]{12}")
_LONG_TOKEN = re.compile(r"[\w-]{32,}")


def holds_credential(text: str) -> bool:
    """Whether `text` holds what reads as a credential: a key under a provider's prefix, or
    a run of 32 or more letters and digits mixing both (a token, a hex secret). Linear: each
    pattern is tried once from each position, over at most 32 characters that fail."""
    if _PREFIXED_KEY.search(text):
        return True
    return any(_mixed(token.group()) for token in _LONG_TOKEN.finditer(text))


def _mixed(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


# A stay, not a home (the home rules read none): 'we're renting a villa in Crete for the week'.
STAY = cue(
    r"\b(?:trip|holiday|vacation|hotel|hostel|airbnb|conference|festival|weekend|for\s+(?:the|a"
    r"|one|two|three)\s+(?:week|night|nights))\b"
)
# Capitalised words that own nothing before "'s": 'That's gone from 2 to 3', 'Here's …'.
NOT_OWNER = word_set("it that there here what who where how he she let everything nothing")
