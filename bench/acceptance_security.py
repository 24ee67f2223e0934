"""Adversarial black-box probes of moim's security and privacy promises (session 26).

As bench/acceptance.py: a real `moim serve` of this tree (log level debug) in front of the
stand-in provider, the official openai SDK (httpx or a raw socket where it cannot send the
bytes), one line per check (`ok` / `FAIL` / `info`), a total, the exit status the number of
failures. Groups: stored text forging the memory block, one user reaching another's memory,
header injection (bench/acceptance_forging.py); proxy keys (a bound key beats every other way
to name a user); secrets (provider key, proxy keys, a gateway's `user:password@`) in logs,
headers, error bodies, /metrics, the inspector and exports. Three servers: no keys; keys, a
provider key and a base URL with credentials; a provider port that refuses connections.

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_security.py [--keep DIR]
        [--only plain|keyed|refused] [--source DIR]   # DIR: git archive REV | tar -x -C DIR
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import socket
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.acceptance import Probe  # noqa: E402
from bench.acceptance_forging import (  # noqa: E402
    INJECTION,
    ISOLATION,
    WORD,
    Check,
    api,
    forge_checks,
    raw_headers,
    run,
)
from bench.harness import serve_proxy  # noqa: E402
from tests.upstream import Upstream, serve_upstream  # noqa: E402

# -- proxy keys and secrets ------------------------------------------------------------------------

PROVIDER_KEY, GATEWAY = "sk-provider-DO-NOT-LEAK-7f3a9c", ("gwuser", "gwPASS-DO-NOT-LEAK-51e2")
ALICE, FREE, ADMIN = "sk-moim-alice-c0ffee", "sk-moim-free-beef", "sk-moim-admin-f00d"
BOB = "sk-moim-bob-d00d"
KEYS = [{"key": ALICE, "user_id": "alice"}, {"key": FREE}, {"key": ADMIN, "admin": True}]
KEYS += [{"key": BOB, "user_id": "bob"}]
BASIC = base64.b64encode(":".join(GATEWAY).encode()).decode()  # what the provider gets
SECRETS = [PROVIDER_KEY, GATEWAY[1], ALICE, FREE, ADMIN, BOB, BASIC]
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "what is my pet?"}]}
AS_ALICE, AS_ADMIN = {"Authorization": f"Bearer {ALICE}"}, {"Authorization": f"Bearer {ADMIN}"}


def inspector(root: str, key: str) -> httpx.Client:
    """An httpx client logged in to the inspector with `key` (its form's CSRF token)."""
    client = httpx.Client(base_url=root)
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/ui/login").text)
    client.post("/ui/login", data={"key": key, "csrf": csrf.group(1) if csrf else ""})
    return client


def leaks(text: str) -> list[str]:
    return [s[:12] for s in SECRETS if s in text]


def spoofing(probe: Probe) -> tuple[bool, str]:
    """alice's key, bob named every other way: alice's memory is read and written."""
    for key, pet in ((AS_ALICE, "vole"), (AS_ADMIN, "lynx")):
        api(
            probe, "POST", "/v1/memory/facts", "bob", headers=key, json={"key": "pet", "value": pet}
        )
    seen: dict[str, Any] = {}
    for name, path, head in (
        ("header", "/v1/memory/facts", {"X-Memory-User-Id": "bob"}),
        ("path", "/u/bob/v1/memory/facts", {}),
        ("openwebui", "/v1/memory/facts", {"X-OpenWebUI-User-Id": "bob"}),
        ("litellm", "/v1/memory/facts", {"x-litellm-end-user-id": "bob"}),
        ("export", "/u/bob/v1/memory/export", {}),
        ("search", "/u/bob/v1/memory/search?q=lynx", {}),
        ("history", "/u/bob/v1/memory/facts/pet/history", {}),
    ):
        got = api(probe, "GET", path, headers={**AS_ALICE, **head})
        seen[name] = "BOB'S" if "lynx" in got.text else got.status_code
    responses = {"model": "gpt-4o-mini", "input": "my pet?", "user": "bob"}
    for name, path, body in (
        ("chat", "/u/bob/v1/chat/completions", {**CHAT, "user": "bob"}),
        ("responses", "/u/bob/v1/responses", responses),
    ):
        api(probe, "POST", path, "bob", headers=AS_ALICE, json=body)
        sent = json.dumps(probe.upstream.requests[-1].json)
        seen[name] = "BOB'S" if "lynx" in sent else ("alice's" if "vole" in sent else "none")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "recall_facts", "arguments": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    got = api(probe, "POST", "/u/bob/mcp", "bob", headers={**AS_ALICE, **accept}, json=call)
    seen["mcp"] = "BOB'S" if "lynx" in got.text else ("alice's" if "vole" in got.text else "none")
    lines = api(probe, "GET", "/v1/memory/export", headers=AS_ALICE).text  # alice's own
    lines = lines.replace("vole", "planted")
    seen["import"] = api(probe, "POST", "/u/bob/v1/memory/import", headers=AS_ALICE, content=lines)
    seen["delete"] = api(probe, "DELETE", "/u/bob/v1/memory", headers=AS_ALICE).status_code
    bob = api(probe, "GET", "/v1/memory/facts", "bob", headers=AS_ADMIN).text
    seen["bob after"] = "BOB'S CHANGED" if "planted" in bob or "lynx" not in bob else "intact"
    seen["import"] = seen["import"].status_code
    bad = {k: v for k, v in seen.items() if str(v).startswith("BOB")}
    return not bad, f"{seen}"


def refusals(probe: Probe) -> tuple[bool, str]:
    seen: dict[str, Any] = {}
    for name, head in (("no key", {}), ("a wrong key", {"Authorization": "Bearer sk-nope"})):
        got = api(probe, "POST", "/v1/chat/completions", headers=head, json=CHAT)
        error = got.json().get("error", {})
        seen[name] = (got.status_code, error.get("type"), error.get("code"))
    for path in ("/metrics", "/v1/files", "/v1/batches"):
        seen[path] = api(probe, "GET", path, headers=AS_ALICE).status_code
    with closing(inspector(probe.root, ALICE)) as ui:
        seen["ui alice, bob"] = [ui.get(f"/ui/users/{u}").status_code for u in ("alice", "bob")]
    ok = all(v[0] == 401 and v[1] for k, v in seen.items() if "key" in k)
    ok = ok and seen["ui alice, bob"][0] == 200 and seen["ui alice, bob"][1] in (403, 404)
    return ok and seen["/metrics"] == 403 and seen["/v1/files"] == 403, f"{seen}"


def replies(probe: Probe) -> tuple[bool, str]:
    """alice's Responses reply: bob's key (bound, or unbound naming bob) may not continue,
    poll or delete it; alice's may."""
    body = {"model": "gpt-4o-mini", "input": "My PIN is 4417.", "background": True}
    reply = api(probe, "POST", "/v1/responses", headers=AS_ALICE, json=body).json()["id"]
    seen: dict[str, Any] = {}
    for who, head in (
        ("bob", {"Authorization": f"Bearer {BOB}"}),
        ("free as bob", {"Authorization": f"Bearer {FREE}", "X-Memory-User-Id": "bob"}),
        ("alice", AS_ALICE),
    ):  # noqa: E501
        more = {"model": "gpt-4o-mini", "input": "What is my PIN?", "previous_response_id": reply}
        seen[who] = [
            api(probe, "POST", "/v1/responses", headers=head, json=more).status_code,
            api(probe, "GET", f"/v1/responses/{reply}", headers=head).status_code,
        ]
    seen["bob deletes"] = api(
        probe, "DELETE", f"/v1/responses/{reply}", headers={"Authorization": f"Bearer {BOB}"}
    ).status_code  # noqa: E501
    refused = [code for who in ("bob", "free as bob") for code in seen[who]] + [seen["bob deletes"]]
    ok = all(code in (403, 404) for code in refused) and seen["alice"] == [200, 200]
    return ok, f"{seen}"


def failures(probe: Probe) -> tuple[bool, str]:
    bodies = []
    quoted = f"bad login {GATEWAY[0]}:{GATEWAY[1]} (Basic {BASIC})"  # a gateway's words
    for status in (401, 500):
        probe.upstream.script.append({"status": status, "body": {"error": {"message": quoted}}})
        got = api(probe, "POST", "/v1/chat/completions", "carol", headers=AS_ADMIN, json=CHAT)
        bodies.append(f"{got.status_code} {got.headers} {got.text}")
    probe.upstream.script.append({"content": "late reply", "delay": 3.0})  # > read_timeout
    url, body = probe.root + "/v1/chat/completions", {**CHAT, "stream": True}
    with httpx.stream("POST", url, headers=AS_ADMIN, json=body) as got:
        received = f"{got.status_code} {got.headers} "
        try:  # moim breaks off as the provider did (README, Errors)
            received += "".join(got.iter_text())
        except httpx.RemoteProtocolError:
            received += " [broken off]"
    found = leaks("\n".join([*bodies, received]))
    return not found, f"statuses {[b[:3] for b in [*bodies, received]]}, secrets: {found}"


def secret_checks(log: Path) -> list[tuple[str, Check]]:
    def surfaces(probe: Probe) -> tuple[bool, str]:
        texts = {p: api(probe, "GET", p, "carol", headers=AS_ADMIN).text
                 for p in ("/metrics", "/v1/memory/export")}  # fmt: skip
        with closing(inspector(probe.root, ADMIN)) as ui:
            texts["ui"] = "".join(ui.get(p).text for p in ("/ui", "/ui/users/carol/why"))
        texts["debug log"] = log.read_text(errors="replace")
        found = {k: leaks(v) for k, v in texts.items() if leaks(v)}
        shown = "logged in" if "carol" in texts["ui"] else "NOT LOGGED IN"
        return not found, f"secrets found: {found}; inspector {shown}"

    def user_key(probe: Probe) -> tuple[bool, str]:
        said = "My OpenAI key is sk-proj-abcdEFGH1234ijklMNOP5678qrst, keep it safe."
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": said}]}
        api(probe, "POST", "/v1/chat/completions", "dave", headers=AS_ADMIN, json=body)
        api(probe, "POST", "/v1/memory/flush", headers=AS_ADMIN, timeout=120)
        export = api(probe, "GET", "/v1/memory/export", "dave", headers=AS_ADMIN).text
        facts = api(probe, "GET", "/v1/memory/facts", "dave", headers=AS_ADMIN).text
        in_log = "sk-proj-abcd" in log.read_text(errors="replace")
        stored, fact = "sk-proj-abcd" in export, "sk-proj" in facts
        return not in_log, f"stored as said: {stored}, a fact: {fact}, in the log: {in_log}"

    return [
        ("auth: a key bound to alice acts for alice whatever names bob", spoofing),
        ("auth: no or a wrong key is a 401 in OpenAI's shape; a user key gets no admin", refusals),
        ("auth: another user's key cannot continue, poll or delete alice's reply", replies),
        ("secrets: a provider's 401/500 quoting them, and a timeout", failures),
        ("secrets: /metrics, export, inspector pages and the debug log", surfaces),
        ("info secrets: a key-like string the user says", user_key),
    ]


def refused_check(log: Path) -> Check:
    def check(probe: Probe) -> tuple[bool, str]:
        got = api(probe, "POST", "/v1/chat/completions", headers=AS_ADMIN, json=CHAT)
        models = api(probe, "GET", "/v1/models", headers=AS_ADMIN)
        found = leaks(f"{got.headers} {got.text} {models.text} {log.read_text(errors='replace')}")
        return got.status_code == 502 and not found, f"{got.text[:70]}; secrets: {found}"

    return check


def plain_log_check(log: Path) -> Check:
    """Without keys a client's own key (`Authorization`, `api-key`, `x-api-key`) passes
    through; neither it nor what users said is in the debug log."""

    def check(probe: Probe) -> tuple[bool, str]:
        key = "sk-client-own-key-0a1b2c3d"
        for name, value in (
            ("Authorization", f"Bearer {key}"),
            ("api-key", key),
            ("x-api-key", key),
        ):
            api(probe, "POST", "/v1/chat/completions", "client", headers={name: value}, json=CHAT)
        text = log.read_text(errors="replace")
        found = [w for w in (key, WORD, "quokka", "walrus7", INJECTION) if w in text]
        return not found, f"in the debug log: {found} ({len(text)} chars)"

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the stores and logs, kept")
    parser.add_argument("--only", default="", help="only the server: plain, keyed or refused")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    args = parser.parse_args()
    total = [0, 0]

    def serve(name: str, url: str, config: dict[str, Any], upstream: Upstream) -> Any:
        (home / name).mkdir(parents=True, exist_ok=True)
        db = home / name / "moim.db"
        handle = serve_proxy(url, db, config=config, log_level="debug", source=args.source)
        return handle, lambda root: Probe(root, upstream, db.with_suffix(".yaml"))

    def add(probe: Probe, checks: list[tuple[str, Check]]) -> None:
        counted, failed = run(probe, checks)
        total[0], total[1] = total[0] + counted, total[1] + failed

    with tempfile.TemporaryDirectory(prefix="moim-sec-") as scratch:
        home = args.keep or Path(scratch)
        with serve_upstream() as upstream:
            if args.only in ("", "plain"):
                server, probe_of = serve("plain", upstream.url, {}, upstream)
                with server as handle:
                    checks = [*forge_checks(), *ISOLATION, ("headers: CR/LF, huge", raw_headers)]
                    checks += [("secrets: no proxy keys", plain_log_check(home / "plain/moim.log"))]
                    add(probe_of(handle.root), checks)
            credentials = upstream.url.replace("://", f"://{GATEWAY[0]}:{GATEWAY[1]}@")
            keyed = {"base_url": credentials, "api_key": PROVIDER_KEY, "read_timeout": 1}
            if args.only in ("", "keyed"):
                config = {"upstream": keyed, "auth": {"keys": KEYS}}
                server, probe_of = serve("keyed", upstream.url, config, upstream)
                with server as handle:
                    add(probe_of(handle.root), secret_checks(home / "keyed/moim.log"))
        if args.only in ("", "refused"):
            with socket.socket() as closed:
                closed.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
                url = f"http://{GATEWAY[0]}:{GATEWAY[1]}@127.0.0.1:{closed.getsockname()[1]}/v1"
                upstream_config = {"base_url": url, "api_key": PROVIDER_KEY}
                config = {"upstream": upstream_config, "auth": {"keys": KEYS}}
                server, probe_of = serve("refused", url, config, Upstream(url))
                with server as handle:
                    check = refused_check(home / "refused/moim.log")
                    add(probe_of(handle.root), [("secrets: the provider refusing", check)])
    print(f"total: {total[0] - total[1]}/{total[0]} ok")
    sys.exit(min(total[1], 100))


if __name__ == "__main__":
    main()
