"""The OpenAI Agents SDK (`openai-agents`) running agent turns through moim, for real.

The SDK's default model is the Responses API (`OpenAIProvider` with `use_responses` on), so an
agent pointed at moim goes through `POST /v1/responses`: what it said in one run is injected
into a later run's request as a memory block, and a turn with a function tool is stored as the
chat messages it amounts to, each once. Tracing is off: it would export to OpenAI.
"""

import asyncio

import openai
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider

from memory import BLOCK_START
from tests.upstream import WEATHER_CALL

CLARA = "My sister Clara teaches violin at the conservatory in Lisbon"
QUESTION = "Where does my sister Clara teach violin these days?"


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def run_agent(proxy, user, said, tools=()):
    """One `Runner.run` of a fresh agent through moim as `user`; its result."""

    async def run():
        client = openai.AsyncOpenAI(
            base_url=proxy.url,
            api_key="sk-client",
            max_retries=0,
            default_headers={"X-Memory-User-Id": user},
        )
        agent = Agent(
            name="Assistant", instructions="Answer briefly.", model="gpt-4o-mini", tools=list(tools)
        )
        config = RunConfig(
            model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True
        )
        try:
            return await Runner.run(agent, said, run_config=config)
        finally:
            await client.close()

    return asyncio.run(run())


def test_an_agent_turn_gets_memory_from_an_earlier_run(proxy, upstream):
    first = run_agent(proxy, "ana", CLARA)
    proxy.flush()
    second = run_agent(proxy, "ana", QUESTION)

    assert (first.final_output, second.final_output) == ("echo: " + CLARA, "echo: " + QUESTION)
    assert [r.path for r in upstream.requests] == ["/v1/responses"] * 2
    sent = upstream.last_responses_json
    assert sent["instructions"] == "Answer briefly."
    block, question = sent["input"]
    assert block["role"] == "system" and block["content"].startswith(BLOCK_START)
    assert CLARA in block["content"]
    assert question == {"role": "user", "content": QUESTION}


def test_an_agent_turn_with_a_tool_is_stored_once(proxy, upstream):
    upstream.script.extend([{"tool_calls": [WEATHER_CALL]}, {"content": "It is sunny in Paris."}])
    result = run_agent(proxy, "ben", "What is the weather in Paris?", tools=[get_weather])
    proxy.flush()

    assert result.final_output == "It is sunny in Paris."
    called = upstream.requests[-1].json["input"]
    assert called[-1] == {
        "call_id": WEATHER_CALL["id"],
        "output": "Sunny in Paris",
        "type": "function_call_output",
    }
    messages = proxy.layer.store.messages("ben")
    assert [(m.role, m.content) for m in messages] == [
        ("system", "Answer briefly."),
        ("user", "What is the weather in Paris?"),
        ("assistant", ""),
        ("tool", "Sunny in Paris"),
        ("assistant", "It is sunny in Paris."),
    ]
    assert len({m.session_id for m in messages}) == 1
