"""At `--log-level debug`, what a provider sets in a cookie stays out of moim's logs.

With a proxy in the environment moim's upstream client is httpx's own transport, whose
httpcore logs every response's header lines at DEBUG: a provider's or gateway's
`Set-Cookie` (a session, a load balancer's token) was written out for each request.
"""

import logging

import openai
import pytest

COOKIE = "gateway_session=s3cr3t-cookie-value"


def test_a_providers_cookie_is_relayed_but_never_logged(make_proxy, upstream, caplog, monkeypatch):
    for name in ("HTTPS_PROXY", "ALL_PROXY", "https_proxy", "all_proxy", "http_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # never used: NO_PROXY below
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    caplog.set_level(logging.DEBUG)
    proxy = make_proxy()
    error = {"message": "no", "type": "invalid_request_error", "param": None, "code": None}
    upstream.script.append(
        {"status": 400, "body": {"error": error}, "headers": {"set-cookie": COOKIE}}
    )
    with proxy.client() as client, pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )

    assert refused.value.response.headers["set-cookie"] == COOKIE  # the client's, as sent
    moims = [r for r in caplog.records if r.threadName != "MainThread"]  # not the test client's
    assert moims, "nothing moim logged was captured"
    assert not [r.getMessage() for r in moims if "s3cr3t" in r.getMessage()]
