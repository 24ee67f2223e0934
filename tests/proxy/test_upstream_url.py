"""proxy/upstream.py's `endpoint_url`: the parsed URL an OpenAI-compatible request goes to."""

import httpx

from proxy.upstream import endpoint_url


def test_an_endpoint_is_its_path_under_the_base_url_with_or_without_a_trailing_slash():
    for base in ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"):
        assert endpoint_url(base, "/chat/completions") == httpx.URL(
            "http://127.0.0.1:9/v1/chat/completions"
        )


def test_each_base_url_and_path_has_its_own_url():
    urls = {
        endpoint_url(base, path)
        for base in ("http://a.test/v1", "https://b.test/openai/v1")
        for path in ("/chat/completions", "/responses")
    }

    assert {str(url) for url in urls} == {
        "http://a.test/v1/chat/completions",
        "http://a.test/v1/responses",
        "https://b.test/openai/v1/chat/completions",
        "https://b.test/openai/v1/responses",
    }
