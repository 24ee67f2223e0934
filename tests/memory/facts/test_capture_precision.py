"""Fact capture's precision on near misses written for this test (none tuned on before):
idioms and figurative uses ("moved to tears", "allergic to meetings", "a dose of reality"),
companies, teams, tools and days where a rule expects a city, hypotheticals, questions, plans,
negations, hedges, other people's news and the assistant's words quoted back. Memory is
faithful: a fact the user never stated is worse than a missed one, and it leads every block.

Each sentence's expected captures were decided before the code was run on it. The controls
at the end say the same things literally and must still be captured."""

import pytest

from memory.facts.capture import capture_facts

NOTHING = [
    # "moved to" an organisation, a team, a role, a tool, a day or a step: not a home
    "I've moved to Accenture.",
    "I moved to Accenture last month.",
    "I've moved to Google, the onboarding is intense.",
    "I moved to Amazon in 2020.",
    "I moved to Barclays after five years at HSBC.",
    "I moved to Marketing last spring.",
    "I moved to Sales in January.",
    "I moved to HR in January.",
    "I was moved to Finance when the team split.",
    "I moved to the night shift.",
    "We moved to Slack for team chat.",
    "I moved to Zoom for all client calls.",
    "I've moved to Android.",
    "We moved to Tuesdays for choir practice.",
    "We moved to Sundays.",
    "We've moved to Plan B.",
    "We moved to Option C.",
    "I moved to Part Two of the course.",
    "I was moved to tears by the ending.",
    "We've moved to a new approach for onboarding.",
    "I moved to the sofa after dinner.",
    # "live in", "based in", "settled": a tool, a department, a state of mind
    "I live in Excel these days.",
    "I live in Outlook these days.",
    "I'm based in Engineering.",
    "I live for weekends.",
    "I live in hope.",
    "I basically live in the Slack channel.",
    "My new home is the gym.",
    "I've settled into a routine.",
    # hypotheticals, questions, plans not carried out
    "Should I move to Berlin?",
    "If I moved to Lisbon, would I need a visa?",
    "We might move to Porto next year.",
    "We're thinking of moving to Bristol.",
    "I'd love to move to Kyoto someday.",
    "We're planning to move to Ghent in the spring.",
    "I'm going to move to Oslo once the visa comes through.",
    "What if we moved to Madrid?",
    "I almost moved to Dublin in 2019.",
    "I was supposed to move to Vienna, but it fell through.",
    "Maybe I should have moved to Austin.",
    "I'd never move to Dubai.",
    "I hope we move to Cardiff soon.",
    "I'm moving to Lisbon next month.",
    "I'll be living in Berlin from March.",
    # negations, hedges and jokes
    "I never moved to Leeds.",
    "I didn't move to Glasgow after all.",
    "I haven't moved to Rome yet.",
    "We never actually moved to Perth.",
    "I don't live in London, I just work there.",
    "I'm not allergic to cats.",
    "I moved to Lisbon, jk.",
    "I'm allergic to cats, I think.",
    "I was allergic to milk as a kid.",
    # someone else's news, and the assistant's words quoted back
    "My sister moved to Paris.",
    "My boss lives in Madrid.",
    "Tom said I should move to Berlin.",
    "My flatmate is allergic to cats.",
    "Everyone thinks I moved to London.",
    "Mum's dose went up to 50 mg.",
    "You said I'm allergic to shellfish, but that's my brother.",
    "You told me last time that I live in Leeds, that's wrong.",
    "Earlier you wrote that I moved to Leeds; I didn't.",
    "You mentioned I'm allergic to nuts, which is wrong.",
    "Your last answer assumed I live in Paris.",
    # figurative allergies
    "I'm allergic to bullshit.",
    "I'm allergic to meetings before ten.",
    "I'm basically allergic to Mondays.",
    "I'm allergic to small talk.",
    "I'm allergic to paperwork.",
    "I'm allergic to corporate jargon.",
    "I'm allergic to hard work, ha.",
    "I'm allergic to commitment.",
    "I'm allergic to spreadsheets.",
    "I'm allergic to Mondays and small talk.",
    "I'm allergic to bad coffee.",
    # figurative doses
    "The dose of patience went up to 11.",
    "My daily dose of news went up to 3 hours.",
    "I needed a dose of reality.",
    "My dose of sunshine went up to 2 hours a day.",
    "They upped my dose of optimism to 100 percent.",
    # states that are no fact about the user
    "My life is now a mess.",
    "My brain is now mush.",
    "Our old cat is now in a better place.",
    "The ball is now in your court.",
    "My head is now in a better place.",
    "We switched to Tuesdays.",
    "I switched to plan B.",
    "We switched to survival mode for the exam season.",
    "I went with my gut for the final decision.",
    # jobs: idioms, clubs and apps joined
    "I work for peanuts.",
    "I work at it every day.",
    "I started at the bottom.",
    "I joined Strava to track my runs.",
    "I joined the Ramblers last year.",
    "I joined Weight Watchers in January.",
    "I'm at Starbucks now working on my laptop, the job hunt continues.",
    "I'm at Heathrow now, my flight to the new job leaves soon.",
    "I'm in Leeds now for the conference.",
]

CAPTURED = [
    ("I moved to Lisbon in 2021.", [("set", "home_city", "Lisbon")]),
    ("We moved to Leeds last spring.", [("set", "home_city", "Leeds")]),
    ("We live in London.", [("set", "home_city", "London")]),
    ("I've settled in Bristol.", [("set", "home_city", "Bristol")]),
    ("I no longer live in Leeds.", [("forget", "home_city", "Leeds")]),
    ("I'm in Paris now, moved here for work.", [("set", "home_city", "Paris")]),
    ("I'm allergic to penicillin.", [("set", "allergy:penicillin", "allergic to penicillin")]),
    ("I'm allergic to latex.", [("set", "allergy:latex", "allergic to latex")]),
    (
        "I'm allergic to cats and dogs.",
        [("set", "allergy:cats", "allergic to cats"), ("set", "allergy:dogs", "allergic to dogs")],
    ),
    ("I'm on 50 mg of sertraline.", [("set", "medication:sertraline", "sertraline 50 mg")]),
    ("We went with Octopus for our energy.", [("set", "current:energy", "Octopus")]),
    ("We switched to Tuesdays for the book club.", [("set", "current:book_club", "Tuesdays")]),
    # labelled "nothing" at first; it says what the audiobook is now, as the line above does
    ("I moved to Spanish for the audiobook.", [("set", "current:audiobook", "Spanish")]),
]


def facts(text):
    return [(c.op, c.key, c.value) for c in capture_facts(text)]


@pytest.mark.parametrize("text", NOTHING)
def test_a_near_miss_states_no_fact(text):
    assert facts(text) == []


@pytest.mark.parametrize(("text", "expected"), CAPTURED)
def test_the_literal_statement_is_still_captured(text, expected):
    assert facts(text) == expected


# Written after the rules above were changed, labelled before running them: how the changes
# generalise to near misses they were not written against (8 of the 54 were wrong at first,
# 19 on main; trailing hedges and organisation suffixes then took 5 of them). The three left
# are marked: only a list of names knows that Kraft Heinz is no town.
_UNKNOWN_ORG = pytest.mark.xfail(strict=True, reason="an organisation no word class names")
HELD_OUT_NOTHING = [
    "I moved to Deutsche Bank in March.",
    "I've moved to the Bristol office.",
    "I moved to Customer Success last quarter.",
    "We moved to Microsoft Teams for calls.",
    "I moved to Python 3.12.",
    "I moved to Grade 5 piano.",
    "I moved to Portuguese lessons.",
    "I moved to Wednesdays at the climbing wall.",
    pytest.param("I've moved to Morgan Stanley.", marks=_UNKNOWN_ORG),
    pytest.param("I moved to Kraft Heinz last year.", marks=_UNKNOWN_ORG),
    "We moved to Version 2 of the API.",
    "I live on Twitter these days.",
    "I live in Figma all day.",
    "I practically live in Costco.",
    "I'm based in Legal now.",
    "I'm allergic to Excel.",
    "I'm allergic to group chats.",
    "I'm allergic to early starts.",
    "I'm allergic to Jira tickets.",
    "I'm allergic to running.",
    "The weekly dose of drama went up to five episodes.",
    "I'm on a dose of optimism these days.",
    "If I ever move to Toronto, I'll tell you.",
    "Would it be crazy to move to Reykjavik?",
    "My partner wants us to move to Galway.",
    "We nearly moved to Bath last year.",
    "We're hoping to move to Norwich.",
    "My parents moved to Spain.",
    "My best friend lives in Glasgow.",
    "You keep saying I live in Bristol, but I don't.",
    "I live in Bristol, lol no I wish.",
    "I moved to Cork, or so I thought.",
    "I work for Satan, apparently.",
    "I joined Duolingo to learn Italian.",
    "I joined Parkrun in May.",
    "I'm at Pret now, waiting for my train.",
    pytest.param(
        "I'm at Tesco now, picking up dinner for the team.",
        marks=pytest.mark.xfail(strict=True, reason="an errand in a sentence with a work word"),
    ),
    "I work for food and a place to sleep.",
    "I live in fear of the inbox.",
    "I've moved on to better things.",
    "My new home is Slack, apparently.",
    "Home is now wherever the laptop is.",
]

HELD_OUT_CAPTURED = [
    ("I moved to Sheffield in 2019.", [("set", "home_city", "Sheffield")]),
    ("We moved to New Orleans last year.", [("set", "home_city", "New Orleans")]),
    ("I moved to Reading last year.", [("set", "home_city", "Reading")]),
    ("I live in Salt Lake City.", [("set", "home_city", "Salt Lake City")]),
    ("I'm allergic to amoxicillin.", [("set", "allergy:amoxicillin", "allergic to amoxicillin")]),
    (
        "I'm allergic to clarithromycin.",
        [("set", "allergy:clarithromycin", "allergic to clarithromycin")],
    ),
    (
        "I'm allergic to sesame and mustard.",
        [
            ("set", "allergy:sesame", "allergic to sesame"),
            ("set", "allergy:mustard", "allergic to mustard"),
        ],
    ),
    ("I'm allergic to wasp stings.", [("set", "allergy:wasp_stings", "allergic to wasp stings")]),
    ("I'm allergic to kiwi.", [("set", "allergy:kiwi", "allergic to kiwi")]),
    ("I'm allergic to horses.", [("set", "allergy:horses", "allergic to horses")]),
    (
        "I joined Deloitte as an analyst.",
        [("set", "employer", "Deloitte"), ("set", "job_title", "analyst")],
    ),
    ("I work for Greenpeace.", [("set", "employer", "Greenpeace")]),
]


@pytest.mark.parametrize("text", HELD_OUT_NOTHING)
def test_a_held_out_near_miss_states_no_fact(text):
    assert facts(text) == []


@pytest.mark.parametrize(("text", "expected"), HELD_OUT_CAPTURED)
def test_a_held_out_literal_statement_is_still_captured(text, expected):
    assert facts(text) == expected


# Found by probing other rules after the above, and fixed by word shape, not by listing them.
@pytest.mark.parametrize(
    "text", ["i'm based in reality", "i work for attention", "I'm down to two brain cells."]
)
def test_an_abstract_lowercase_word_or_a_garbled_count_states_no_fact(text):
    assert facts(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i live in reading", [("set", "home_city", "reading")]),
        ("I'm down to 2 shifts a week", [("set", "current:shifts", "2 shifts")]),
    ],
)
def test_a_lowercase_town_and_a_plain_count_are_still_captured(text, expected):
    assert facts(text) == expected


# An allergy to a noun no list names is still kept: a missed allergy is worse than a strange
# one (a list of allergens dropped all of these).
UNLISTED_ALLERGIES = [
    "I'm allergic to lychees.",
    "I'm allergic to blue cheese.",
    "I'm allergic to buckwheat.",
    "I am allergic to elderflower.",
    "I'm allergic to my medication.",
    "I'm allergic to Christmas pudding.",
]


@pytest.mark.parametrize("text", UNLISTED_ALLERGIES)
def test_an_allergy_to_an_unlisted_noun_is_still_captured(text):
    item = text.split(" to ", 1)[1].rstrip(".")
    assert [(c.key, c.value) for c in capture_facts(text)] == [
        (f"allergy:{item.lower().replace(' ', '_')}", f"allergic to {item}")
    ]
