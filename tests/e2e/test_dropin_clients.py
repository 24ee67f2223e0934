"""Drop-in with the clients people point at moim (LangChain, pydantic-ai, instructor, the
Azure SDK): what they send that the official SDK's own tests did not, through the real proxy.

Each test is a case an audit found moim treating differently from the provider, or storing
what it should not, reproduced with the openai SDK or raw httpx.
"""

import json

import httpx
import openai
import pytest

from tests.upstream import WEATHER_CALL

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
ASK = {"role": "user", "content": "Weather in Paris?"}


def stored(proxy, user):
    proxy.flush()
    return [(m.role, m.content) for m in proxy.layer.store.messages(user)]


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_call_sent_back_with_its_arguments_rewritten_is_the_call_stored(proxy, upstream, path):
    """LangChain and pydantic-ai parse a call's arguments and write them again when they send
    the history back (`{"city": "Paris"}` for the provider's `{"city":"Paris"}`): the same
    call, which moim stored a second time."""
    headers = {"X-Memory-User-Id": "agent"}
    rewritten = json.dumps(json.loads(WEATHER_CALL["arguments"]))
    assert rewritten != WEATHER_CALL["arguments"]
    result = "Sunny, 24 °C"
    with proxy.client(default_headers=headers) as client:
        if path == "/responses":
            tools = [{"type": "function", "name": "get_weather", "parameters": {}}]
            client.responses.create(model="tool-call", input=[ASK], tools=tools)
            call = {"type": "function_call", "call_id": WEATHER_CALL["id"], "name": "get_weather"}
            output = {"type": "function_call_output", "call_id": WEATHER_CALL["id"]}
            history = [ASK, {**call, "arguments": rewritten}, {**output, "output": result}]
            client.responses.create(model="gpt-4o-mini", input=history, tools=tools)
        else:
            client.chat.completions.create(model="tool-call", messages=[ASK], tools=TOOLS)
            function = {"name": "get_weather", "arguments": rewritten}
            call = {"id": WEATHER_CALL["id"], "type": "function", "function": function}
            history = [
                ASK,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": WEATHER_CALL["id"], "content": result},
            ]
            client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)

    assert stored(proxy, "agent") == [
        ("user", ASK["content"]),
        ("assistant", ""),  # the call, once
        ("tool", result),
        ("assistant", "echo: " + ASK["content"]),
    ]


# -- Azure OpenAI's client ---------------------------------------------------------------------

AZURE_VERSION = "2024-10-21"
HELLO = [{"role": "user", "content": "Hello"}]


def azure_client(**where):
    return openai.AzureOpenAI(
        api_key="azure-key", api_version=AZURE_VERSION, max_retries=0, **where
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["base_url", "azure_endpoint at /v1", "azure_endpoint"])
def test_an_azure_clients_chat_is_a_404_saying_what_to_do_and_goes_nowhere(
    proxy, upstream, where, stream
):
    """`AzureOpenAI` sends chat to a deployment's path (`…/deployments/{d}/chat/completions`):
    under /v1 it was passed through, so with an Azure upstream the model answered with no
    memory, and nothing said so; at moim's root it was a bare "Not Found"."""
    places = {
        "base_url": {"base_url": proxy.url},
        "azure_endpoint at /v1": {"azure_endpoint": proxy.url},
        "azure_endpoint": {"azure_endpoint": proxy.root},
    }
    with azure_client(**places[where]) as client, pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=stream)
    proxy.flush()

    error = raised.value.response.json()["error"]
    assert error["code"] == "unsupported_path"
    assert "/deployments/gpt-4o-mini/chat/completions" in error["message"]
    assert "/v1" in error["message"] and "/openai/v1" in error["message"]  # what to do
    assert upstream.requests == []
    assert proxy.layer.stats("default").messages == 0


@pytest.mark.parametrize(
    "path", ["/openai/responses", "/openai/v1/chat/completions", "/chat/completions/"]
)
def test_chat_at_a_path_moim_gives_no_memory_is_a_404_too(proxy, upstream, path):
    """The Azure client's Responses path, an Azure v1 base URL appended to moim's, a trailing
    slash: a chat that would reach the provider without memory."""
    body = {"model": "gpt-4o-mini", "messages": HELLO, "input": "Hello"}
    response = httpx.post(proxy.url + path, json=body)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unsupported_path"
    assert upstream.requests == []


def test_an_azure_clients_other_requests_and_chat_with_memory_off_pass_through(proxy, upstream):
    """Embeddings have no memory to miss; neither has a chat with `X-Memory-Mode: off`."""
    with azure_client(base_url=proxy.url) as client:
        with pytest.raises(openai.NotFoundError):  # the stand-in has no deployment paths
            client.embeddings.create(model="text-embedding-3-small", input="Hello")
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model="gpt-4o-mini", messages=HELLO, extra_headers={"X-Memory-Mode": "off"}
            )

    paths = [(r.path, r.query) for r in upstream.requests]
    assert paths == [
        ("/v1/deployments/text-embedding-3-small/embeddings", f"api-version={AZURE_VERSION}"),
        ("/v1/deployments/gpt-4o-mini/chat/completions", f"api-version={AZURE_VERSION}"),
    ]
    assert upstream.requests[0].headers["api-key"] == "azure-key"
