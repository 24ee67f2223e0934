"""`ui_task`: chat UIs' background task requests, told by their shape.

Each UI's template (docs/dropin.md, "Chat UIs' background tasks", says where each was read;
the guidelines in the middle are shortened here, the parts the shape rests on are as sent)
filled with a small transcript, as the UI sends it; then the near misses a user may type,
which must stay conversations.
"""

import subprocess
import sys

import pytest

from memory import ui_task

TRANSCRIPT = "USER: I adopted a beagle named Biscuit\nASSISTANT: Congratulations on Biscuit!"


def user(text):
    return {"role": "user", "content": text}


def system(text):
    return {"role": "system", "content": text}


# -- Open WebUI: backend/open_webui/config.py, rendered by utils/task.py -----------------------

OWUI_TITLE = f"""### Task:
Generate a concise, 3-5 word title with an emoji summarizing the chat history.
### Guidelines:
- The title should clearly represent the main theme or subject of the conversation.
- Write the title in the chat's primary language; default to English if multilingual.
### Output:
JSON format: {{ "title": "your concise title here" }}
### Examples:
- {{ "title": "📉 Stock Market Trends" }},
### Chat History:
<chat_history>
{TRANSCRIPT}
</chat_history>"""

OWUI_TAGS = f"""### Task:
Generate 1-3 broad tags categorizing the main themes of the chat history, along with 1-3 more \
specific subtopic tags.

### Guidelines:
- Start with high-level domains (e.g. Science, Technology, Philosophy, Arts, Politics)

### Output:
JSON format: {{ "tags": ["tag1", "tag2", "tag3"] }}

### Chat History:
<chat_history>
{TRANSCRIPT}
</chat_history>"""

OWUI_FOLLOW_UPS = f"""### Task:
Suggest 3-5 relevant follow-up questions or prompts that the user might naturally ask next in \
this conversation as a **user**, based on the chat history, to help continue or deepen the \
discussion.
### Guidelines:
- Write all follow-up questions from the user's point of view, directed to the assistant.
### Output:
JSON format: {{ "follow_ups": ["Question 1?", "Question 2?", "Question 3?"] }}
### Chat History:
<chat_history>
{TRANSCRIPT}
</chat_history>"""

OWUI_QUERIES = """### Task:
Analyze the chat history to determine the necessity of generating search queries, in the given \
language.

### Guidelines:
- Respond **EXCLUSIVELY** with a JSON object.
- Today's date is: 2026-11-27.

### Output:
Strictly return in JSON format: \n{
  "queries": ["query1", "query2"]
}

### Chat History:
<chat_history>
USER: What is the weather in Lisbon this weekend?
</chat_history>
"""

OWUI_AUTOCOMPLETE = """### Task:
You are an autocompletion system. Continue the text in `<text>` based on the **completion \
type** in `<type>` and the given language.  

### **Output Rules**:
- Respond only in JSON format: `{ "text": "<your_completion>" }`.

### **Examples**:
#### Example 1:  
Input:  
<type>General</type>  
<text>The sun was setting over the horizon, painting the sky</text>  
Output:  
{ "text": "with vibrant shades of orange and pink." }

---
### Context:
<chat_history>

</chat_history>
<type>search query</type>  
<text>best beagle food for</text>  
#### Output:
"""

OWUI_EMOJI = """Your task is to reflect the speaker's likely facial expression through a fitting \
emoji. Interpret emotions from the message and reflect their facial expression using fitting, \
diverse emojis (e.g., 😊, 😢, 😡, 😱).

Message: ```Congratulations on Biscuit! Beagles are wonderful companions.```"""

OWUI_MOA = '''You have been provided with a set of responses from various models to the latest \
user query: "Which food suits a beagle?"

Your task is to synthesize these responses into a single, high-quality response.

Responses from models: """Dry food with fish."""

"""A vet-approved kibble."""'''

# middleware.py's tool choice: the template with the tools' specs, then the chat's last turns
OWUI_TOOLS = """Available Tools: [{"name": "get_weather", "parameters": {}}]

Your task is to choose and return the correct tool(s) from the list of available tools based on \
the query. Follow these guidelines:

- Return only the JSON object, without any additional text or explanation."""

OWUI_TOOLS_QUERY = (
    'Query: History:\nUSER: """Hi"""\nASSISTANT: """Hello!"""\nQuery: Weather in Lisbon?'
)

# -- LibreChat: @librechat/agents src/utils/title.ts and run.ts; api/app/clients -------------

LC_CONVO = "User: I adopted a beagle named Biscuit\nAI: Congratulations on Biscuit!"

LC_STRUCTURED = f"""Analyze this conversation and provide:
1. The detected language of the conversation
2. A concise title in the detected language (5 words or less, no punctuation or quotation)

{LC_CONVO}"""

LC_COMPLETION = f"""Provide a concise, 5-word-or-less title for the conversation, using title \
case conventions. Only return the title itself.

Conversation:
{LC_CONVO}"""

LC_LEGACY_CONVO = '||>User:\n"I adopted a beagle named Biscuit"\n||>Response:\n"Congratulations!"'

LC_LEGACY = f"""Please generate a concise, 5-word-or-less title for the conversation, using its \
same language, with no punctuation. Apply title case conventions appropriate for the language.

    {LC_LEGACY_CONVO}
    
    ||>Title:"""

LC_LEGACY_SYSTEM = f"""Write a concise title for this conversation in the given language. Title \
in 5 Words or Less. No Punctuation or Quotation. Must be in Title Case, written in the given \
Language.
{LC_LEGACY_CONVO}"""

# -- LobeChat: packages/prompts/src/chains/summaryTitle.ts ------------------------------------

LOBE_SYSTEM = """You are a professional conversation summarizer. Generate a concise title that \
captures the essence of the conversation.

Rules:
- Output ONLY the title text, no explanations or additional context
- Maximum 10 words
- Use the language specified by the locale code: en-US"""

LOBE_LINES = "user: I adopted a beagle named Biscuit\nassistant: Congratulations on Biscuit!"

LOBE_TAGGED = """<task>
Generate a concise title that captures the essence of the conversation.
</task>

<conversation>
<user>
I adopted a beagle named Biscuit
</user>
<assistant>
Congratulations on Biscuit!
</assistant>
</conversation>"""


@pytest.mark.parametrize(
    ("messages", "client"),
    [
        ([user(OWUI_TITLE)], "open-webui"),
        ([user(OWUI_TAGS)], "open-webui"),
        ([user(OWUI_FOLLOW_UPS)], "open-webui"),
        ([user(OWUI_QUERIES)], "open-webui"),
        ([user(OWUI_AUTOCOMPLETE)], "open-webui"),
        ([user(OWUI_EMOJI)], "open-webui"),
        ([user(OWUI_MOA)], "open-webui"),
        ([system(OWUI_TOOLS), user(OWUI_TOOLS_QUERY)], "open-webui"),
        ([system(OWUI_TOOLS), user("Query: Query: Weather in Lisbon?")], "open-webui"),
        # a workspace model's system prompt is put before the task
        ([system("You are Biscuit's vet assistant."), user(OWUI_TITLE)], "open-webui"),
        # as the Responses API or a multimodal client sends it: a list of text parts
        ([{"role": "user", "content": [{"type": "text", "text": OWUI_TAGS}]}], "open-webui"),
        ([user(LC_STRUCTURED)], "librechat"),
        ([user(LC_COMPLETION)], "librechat"),
        ([user(LC_LEGACY)], "librechat"),
        ([system(LC_LEGACY_SYSTEM), user("Language: English")], "librechat"),
        ([system(LOBE_SYSTEM), user(LOBE_LINES)], "lobechat"),
        ([system(LOBE_SYSTEM), user(LOBE_TAGGED)], "lobechat"),
    ],
)
def test_each_uis_background_task_is_recognised(messages, client):
    assert ui_task(messages) == client


@pytest.mark.parametrize(
    "messages",
    [
        # the words without a transcript: a user's own request
        [user("### Task: write a title for my blog post about adopting a beagle")],
        [user("### Task:\nGenerate a concise title for my essay.\n### Guidelines:\n- short")],
        [user("Analyze this conversation and provide: a title and a summary, please.")],
        [user("Provide a concise, 5-word-or-less title for the conversation I had with my boss")],
        [system(LOBE_SYSTEM), user("Summarize my week: I adopted a beagle and moved house.")],
        # a transcript without a UI's instruction: a user pasting a chat log to discuss
        [user(f"What do you make of this?\n<chat_history>\n{TRANSCRIPT}\n</chat_history>")],
        [user(LOBE_LINES)],
        [user(LC_CONVO)],
        # a chat_history block with no transcript in it, and no text to complete
        [user("### Task:\nTitle this.\n<chat_history>\nsomething I wrote\n</chat_history>")],
        [user("### Task:\nTitle this.\n<chat_history>\n\n</chat_history>")],
        # the emoji or merge instruction quoted, without what it embeds
        [user(OWUI_EMOJI.split("Message:")[0] + "Is this a good prompt for my app?")],
        [user(OWUI_MOA.split("Responses from models:")[0])],
        # a user's own query beside a tools system prompt, or the query form without it
        [system(OWUI_TOOLS), user("Weather in Lisbon? Query: is it sunny?")],
        [user(OWUI_TOOLS_QUERY)],
        # the instruction after the block is not Open WebUI's shape
        [user(f"<chat_history>\n{TRANSCRIPT}\n</chat_history>\n### Task: title it")],
        # a task prompt inside a conversation under way: the user's message, kept
        [user("Hi"), {"role": "assistant", "content": "Hello!"}, user(OWUI_TITLE)],
        [user(OWUI_TITLE), {"role": "assistant", "content": '{"title": "🐶 Biscuit"}'}],
        [user(LC_STRUCTURED), {"role": "tool", "tool_call_id": "c1", "content": "{}"}],
        # two user messages: a conversation, whatever the first says
        [user(OWUI_TITLE), user("And what should Biscuit eat?")],
        # no user message at all
        [system(OWUI_TITLE)],
        # an app that renders the chat so far into its system prompt in Open WebUI's form
        # (Open WebUI sends a task as the user message): the user's message is theirs
        [system(OWUI_TITLE), user("My beagle Biscuit turns three on Friday.")],
        [],
    ],
)
def test_what_a_user_may_type_is_a_conversation(messages):
    assert ui_task(messages) is None


# A user's message that opens like a UI's task over a pasted log the transcript regex never
# completes (~1 MB each): each regex tried from every line start scanned to the end, minutes
# on the event loop before (18 s already for 160 KB of `User:` lines). The deadline only
# catches a return to quadratic time, far above any machine's normal time.
ADVERSARIAL = {
    "user lines with no AI line": "Write a concise title for this conversation\n"
    + "User: x\n" * 125_000,
    "legacy user markers with no response": "Write a concise title for this conversation\n"
    + '||>User: "x\n' * 90_000,
    "blank lines": "Write a concise title for this conversation\n" + " \n" * 500_000,
    "tagged openings never closed": "<task>" + "<conversation><user>x" * 50_000,
}


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_an_adversarial_message_is_read_in_linear_time(name):
    # A process of its own, killed at the deadline: a regex holds the GIL until it returns.
    code = (
        "from memory import ui_task\n"
        "from tests.memory.ingest.test_ui_tasks import ADVERSARIAL, LOBE_SYSTEM\n"
        f"text = ADVERSARIAL[{name!r}]\n"
        "lobe = {'role': 'system', 'content': LOBE_SYSTEM}\n"
        "assert ui_task([lobe, {'role': 'user', 'content': text}]) is None\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {name!r} took more than 15 s: quadratic again")
