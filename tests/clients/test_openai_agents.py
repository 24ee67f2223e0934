"""The OpenAI Agents SDK (`openai-agents`), run for real against moim: agent turns.

The agent uses the chat completions model on an `AsyncOpenAI` client whose base URL is moim
(the Responses API model needs moim's Responses support). Tracing is off for every run: its
exporter would call OpenAI. The first run says the fact; a second run, a new conversation,
asks, calls a function tool and answers, and each of its requests carries the recalled fact.
"""

import asyncio
import json

import openai
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool

from tests.clients.round_trip import FACT, QUESTION, USER, assert_not_recalled_yet, assert_recalled

NO_TRACING = RunConfig(tracing_disabled=True)
WEATHER_CALL = {"id": "call_weather", "name": "get_weather", "arguments": '{"city": "Lisbon"}'}


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 24 °C in {city}"


def test_agent_turns_round_trip(proxy, upstream):
    async def run():
        async with openai.AsyncOpenAI(
            base_url=proxy.url,
            api_key="sk-client",
            max_retries=0,
            default_headers={"X-Memory-User-Id": USER},
        ) as client:
            agent = Agent(
                name="Assistant",
                instructions="You answer briefly.",
                model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
                tools=[get_weather],
            )
            said = await Runner.run(agent, FACT, run_config=NO_TRACING)
            assert_not_recalled_yet(upstream)
            await asyncio.to_thread(proxy.flush)
            upstream.script += [{"tool_calls": [WEATHER_CALL]}, {"content": "Whiskers; sunny."}]
            answer = await Runner.run(agent, QUESTION, run_config=NO_TRACING)
            return said.final_output, answer.final_output

    said, answer = asyncio.run(run())

    assert said == "echo: " + FACT
    assert answer == "Whiskers; sunny."
    asked, answered = upstream.requests[-2:]
    assert [t["function"]["name"] for t in asked.json["tools"]] == ["get_weather"]
    tool_result = answered.json["messages"][-1]
    assert (tool_result["role"], tool_result["tool_call_id"]) == ("tool", "call_weather")
    assert "Sunny and 24 °C in Lisbon" in json.dumps(tool_result["content"], ensure_ascii=False)
    for request in (asked, answered):
        assert_recalled(upstream, request.json["messages"])
