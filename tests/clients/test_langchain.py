"""LangChain's `langchain-openai`, run for real against moim and the fake upstream.

`ChatOpenAI` (invoke and stream) with a memory round trip, a tool call and its result sent
back, and `OpenAIEmbeddings`, whose default sends token arrays to `/v1/embeddings`, through
the pass-through.
"""

import langchain_openai
import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from tests.clients.round_trip import FACT, QUESTION, USER, assert_not_recalled_yet, assert_recalled
from tests.upstream_api import embedding_of


def chat_model(proxy):
    return langchain_openai.ChatOpenAI(
        model="gpt-4o-mini",
        base_url=proxy.url,
        api_key="sk-client",
        max_retries=0,
        default_headers={"X-Memory-User-Id": USER},
    )


def invoke(proxy, text):
    return chat_model(proxy).invoke(text).content


def stream(proxy, text):
    return "".join(chunk.content for chunk in chat_model(proxy).stream(text))


@pytest.mark.parametrize("chat", [invoke, stream])
def test_chat_openai_round_trip(proxy, upstream, chat):
    said = chat(proxy, FACT)
    assert_not_recalled_yet(upstream)
    proxy.flush()

    answer = chat(proxy, QUESTION)

    assert said == "echo: " + FACT
    assert answer == "echo: " + QUESTION
    assert_recalled(upstream)


def test_a_tool_call_and_its_result_are_stored_once(proxy, upstream):
    """LangChain sends a call back with its arguments written anew (`{"city": "Paris"}` for
    the provider's `{"city":"Paris"}`): moim stored the call twice."""
    model = chat_model(proxy).bind_tools([{"type": "function", "function": WEATHER_TOOL}])
    model_with_calls = model.bind(model="tool-call")
    history = [HumanMessage("Weather in Paris?")]
    call = model_with_calls.invoke(history)
    history += [call, ToolMessage("Sunny, 24 °C", tool_call_id=call.tool_calls[0]["id"])]

    answer = model.invoke(history)
    proxy.flush()

    assert call.tool_calls[0]["args"] == {"city": "Paris"}
    assert answer.content == "echo: Weather in Paris?"
    assert [(m.role, m.content) for m in proxy.layer.store.messages(USER)] == [
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", "Sunny, 24 °C"),
        ("assistant", "echo: Weather in Paris?"),
    ]


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_openai_embeddings_pass_through(proxy, upstream):
    embeddings = langchain_openai.OpenAIEmbeddings(
        model="text-embedding-3-small", base_url=proxy.url, api_key="sk-client", max_retries=0
    )

    vectors = embeddings.embed_documents([FACT, QUESTION])
    query = embeddings.embed_query(QUESTION)

    sent = upstream.requests[0].json["input"]
    assert all(isinstance(tokens, list) for tokens in sent)  # token arrays, LangChain's default
    assert len(vectors) == 2 and len(query) == 8
    assert vectors[1] == query == pytest.approx(embedding_of(sent[1]))
    proxy.flush()
    assert proxy.layer.stats("default").messages == 0
