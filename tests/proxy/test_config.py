"""proxy/config.py: defaults, then config.yaml, then the MOIM_* environment (CONTRACT.md).

Environments are passed as dicts; `os.environ` is never touched.
"""

import re
from fractions import Fraction
from pathlib import Path

import pytest

from memory import Settings, TierRule
from proxy.config import Config, ConfigError, EmbedderConfig, ModelRoute, ProxyKey, load_config

REPO = Path(__file__).resolve().parents[2]

FULL_YAML = """
server: {host: 0.0.0.0, port: 9999}
db: /data/moim.db
upstream:
  base_url: http://127.0.0.1:9000/v1
  api_key: sk-yaml
  connect_timeout: 3
  read_timeout: 120.5
memory:
  enabled: false
  placement: system
  vector_search: db
  fusion: rrf
  min_similarity: 0.5
  excerpt_min_similarity: 0.25
  recency_half_life_days: 7
  tiers:
    - {below: 0.4, excerpts: 4, chars: 500}
    - {below: "0.8", excerpts: 1, chars: 100}
context_windows: {my-local-model: 32768}
models:
  local: {model: llama3, api_base: http://127.0.0.1:11434/v1, openai_compatible: true}
  claude: anthropic/claude-3-5-sonnet-latest
auth:
  keys:
    - {key: sk-moim-alice, user_id: alice}
    - sk-moim-plain
  admin_keys: [sk-moim-admin]
"""

ENV = {
    "MOIM_HOST": "10.0.0.1",
    "MOIM_PORT": "7000",
    "MOIM_DB": "/env/moim.db",
    "MOIM_UPSTREAM_BASE_URL": "http://env-upstream/v1",
    "MOIM_UPSTREAM_API_KEY": "sk-env",
    "MOIM_MEMORY": "on",
}


@pytest.fixture
def in_empty_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(in_empty_dir):
    assert load_config(None, {}) == Config()


def test_built_in_defaults():
    config = Config()
    assert (config.host, config.port, config.upstream_base_url, config.upstream_api_key) == (
        "127.0.0.1",
        8080,
        None,
        None,
    )
    assert config.memory_enabled is True
    assert config.db_path == Path("moim.db")
    assert config.memory == Settings()
    assert config.memory.placement == "before_last_user"  # keeps the provider's prompt cache
    assert config.memory.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"


def test_empty_config_file_means_all_defaults(in_empty_dir):
    path = write(in_empty_dir / "empty.yaml", "")
    assert load_config(path, {}) == Config()


def test_config_file_with_only_comments_means_all_defaults(in_empty_dir):
    path = write(in_empty_dir / "comments.yaml", "# nothing here\n")
    assert load_config(path, {}) == Config()


def test_yaml_keys(in_empty_dir):
    config = load_config(write(in_empty_dir / "moim.yaml", FULL_YAML), {})
    assert (config.host, config.port) == ("0.0.0.0", 9999)
    assert config.db_path == Path("/data/moim.db")
    assert (config.upstream_base_url, config.upstream_api_key) == (
        "http://127.0.0.1:9000/v1",
        "sk-yaml",
    )
    assert (config.connect_timeout, config.read_timeout) == (3.0, 120.5)
    assert config.memory_enabled is False
    memory = config.memory
    assert (memory.placement, memory.vector_search) == ("system", "db")
    assert memory.fusion == "rrf"
    assert (memory.min_similarity, memory.recency_half_life_days) == (0.5, 7.0)
    assert memory.excerpt_min_similarity == 0.25
    assert memory.context_windows == {"my-local-model": 32768}
    assert memory.embedding_model == Settings().embedding_model
    assert config.routes == {
        "local": ModelRoute("llama3", "http://127.0.0.1:11434/v1", None, True),
        "claude": ModelRoute("anthropic/claude-3-5-sonnet-latest"),
    }
    assert config.keys == (
        ProxyKey("sk-moim-alice", user_id="alice"),
        ProxyKey("sk-moim-plain"),
        ProxyKey("sk-moim-admin", admin=True),
    )


def test_recall_wait_is_read_in_seconds_and_0_never_waits(in_empty_dir):
    assert Config().recall_wait == 5.0
    path = write(in_empty_dir / "wait.yaml", "memory: {recall_wait: 0}\n")
    assert load_config(path, {}).recall_wait == 0.0
    path = write(in_empty_dir / "wait.yaml", "memory: {recall_wait: 1.5}\n")
    assert load_config(path, {}).recall_wait == 1.5


def test_tiers_are_read_as_exact_fractions(in_empty_dir):
    config = load_config(write(in_empty_dir / "moim.yaml", FULL_YAML), {})
    assert config.memory.tier_rules == (
        TierRule(Fraction(2, 5), 4, 500),
        TierRule(Fraction(4, 5), 1, 100),
    )


def test_shipped_config_yaml_loads():
    shipped = Path(__file__).resolve().parents[2] / "config.yaml"
    config = load_config(shipped, {})
    assert config.memory.tier_rules == Settings().tier_rules
    assert config.memory.embedding_model == Settings().embedding_model


def test_config_yaml_in_the_working_directory_is_found(in_empty_dir):
    write(in_empty_dir / "config.yaml", "server: {port: 1234}\n")
    assert load_config(None, {}).port == 1234


def test_moim_config_names_the_file(in_empty_dir):
    write(in_empty_dir / "config.yaml", "server: {port: 1234}\n")
    other = write(in_empty_dir / "other.yaml", "server: {port: 4321}\n")
    assert load_config(None, {"MOIM_CONFIG": str(other)}).port == 4321


def test_explicit_path_beats_moim_config(in_empty_dir):
    named = write(in_empty_dir / "named.yaml", "server: {port: 1111}\n")
    other = write(in_empty_dir / "other.yaml", "server: {port: 4321}\n")
    assert load_config(named, {"MOIM_CONFIG": str(other)}).port == 1111


def test_environment_beats_yaml(in_empty_dir):
    config = load_config(write(in_empty_dir / "moim.yaml", FULL_YAML), ENV)
    assert (config.host, config.port) == ("10.0.0.1", 7000)
    assert config.db_path == Path("/env/moim.db")
    assert (config.upstream_base_url, config.upstream_api_key) == (
        "http://env-upstream/v1",
        "sk-env",
    )
    assert config.memory_enabled is True
    assert config.memory.placement == "system"  # untouched by the environment


def test_the_journal_is_beside_the_database_unless_journal_names_it(in_empty_dir):
    """With Postgres the journal was always `./moim.db.journal`, in the working directory (in
    the Docker image `/app`, lost with the container): `journal:` / MOIM_JOURNAL name it."""
    postgres = {"MOIM_DB": "postgresql://moim@db/moim"}
    assert load_config(None, {"MOIM_DB": "/d/x.db"}).journal_path == Path("/d/x.db.journal")
    assert load_config(None, postgres).journal_path == Path("moim.db.journal")
    yaml_file = write(in_empty_dir / "moim.yaml", "journal: /data/yaml.journal\n")
    assert load_config(yaml_file, postgres).journal_path == Path("/data/yaml.journal")
    env = {**postgres, "MOIM_JOURNAL": "/data/env.journal"}
    assert load_config(yaml_file, env).journal_path == Path("/data/env.journal")


def test_moim_memory_off_turns_memory_off(in_empty_dir):
    assert load_config(None, {"MOIM_MEMORY": "off"}).memory_enabled is False
    assert load_config(None, {"MOIM_MEMORY": " OFF "}).memory_enabled is False


def test_moim_memory_must_be_on_or_off(in_empty_dir):
    with pytest.raises(ConfigError, match="MOIM_MEMORY"):
        load_config(None, {"MOIM_MEMORY": "maybe"})


def test_bad_moim_port_names_the_variable(in_empty_dir):
    with pytest.raises(ConfigError, match="MOIM_PORT"):
        load_config(None, {"MOIM_PORT": "eighty"})


@pytest.mark.parametrize(
    "yaml_text, key",
    [
        ("server: {port: eighty}", "server.port"),
        ("server: {port: true}", "server.port"),
        ("server: {port: 8080.5}", "server.port"),
        ("server: {host: 8080}", "server.host"),
        ("db: 5", "db"),
        ("upstream: {base_url: 5}", "upstream.base_url"),
        ("upstream: {read_timeout: soon}", "upstream.read_timeout"),
        ("memory: {enabled: 'yes'}", "memory.enabled"),
        ("memory: {min_similarity: high}", "memory.min_similarity"),
        ("memory: {min_similarity: .nan}", "memory.min_similarity"),
        ("memory: {recency_half_life_days: .nan}", "memory.recency_half_life_days"),
        ("memory: {placement: everywhere}", "memory.placement"),
        ("memory: {recall_wait: -1}", "memory.recall_wait"),
        ("memory: {recall_wait: .inf}", "memory.recall_wait"),
        ("memory: {vector_search: gpu}", "memory.vector_search"),
        ("memory: {fusion: ranks}", "memory.fusion"),
        ("memory: {tiers: [{below: 2, excerpts: 1, chars: 1}]}", "memory.tiers"),
        ("memory: {tiers: [{below: 0.5}]}", "memory.tiers"),
        ("context_windows: {gpt-4o: big}", "context_windows.gpt-4o"),
        ("context_windows: {gpt-4o: 0}", "context_windows.gpt-4o"),
        ("context_windows: {gpt-4o: -128000}", "context_windows.gpt-4o"),
        ("server: [1, 2]", "server"),
        ("models: {local: {api_base: x}}", "models.local"),
        ("auth: {keys: [{user_id: alice}]}", "auth.keys[0]"),
        ("upstream: {base_url: not a url}", "upstream.base_url"),
        ("upstream: {base_url: 'localhost:8000/v1'}", "upstream.base_url"),
        ("upstream: {base_url: 'ftp://example.com/v1'}", "upstream.base_url"),
        ("memory: {skip_ui_tasks: sometimes}", "memory.skip_ui_tasks"),
    ],
)
def test_bad_value_names_its_key(in_empty_dir, yaml_text, key):
    path = write(in_empty_dir / "bad.yaml", yaml_text + "\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    assert str(raised.value).startswith(key + ":")


def test_an_upstream_url_from_the_environment_is_checked_and_not_echoed(in_empty_dir):
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"MOIM_UPSTREAM_BASE_URL": "user:s3cret@provider/v1"})
    assert str(raised.value).startswith("MOIM_UPSTREAM_BASE_URL: must be an http")
    assert "s3cret" not in str(raised.value)
    config = load_config(None, {"MOIM_UPSTREAM_BASE_URL": "https://api.example.com/v1"})
    assert config.upstream_base_url == "https://api.example.com/v1"


def test_top_level_must_be_a_mapping(in_empty_dir):
    with pytest.raises(ConfigError, match="mapping"):
        load_config(write(in_empty_dir / "list.yaml", "- 1\n- 2\n"), {})


def test_unreadable_yaml_is_a_config_error(in_empty_dir):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(write(in_empty_dir / "broken.yaml", "server: {port: [\n"), {})


def test_a_config_file_that_is_not_utf8_is_a_config_error(in_empty_dir):
    path = in_empty_dir / "latin1.yaml"
    path.write_bytes("upstream: {base_url: http://caf\u00e9.local/v1}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="cannot read config .*latin1.yaml"):
        load_config(path, {})


def test_missing_config_file_is_a_config_error(in_empty_dir):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(in_empty_dir / "absent.yaml", {})


# -- the consolidation schedule ----------------------------------------------------------------


def test_consolidation_schedule_is_off_by_default(in_empty_dir):
    shipped = load_config(Path(__file__).resolve().parents[2] / "config.yaml", {})
    empty = load_config(write(in_empty_dir / "empty.yaml", "consolidation:\n"), {})
    for config in (Config(), shipped, empty):
        assert (
            config.consolidation_model,
            config.consolidation_every_minutes,
            config.consolidation_min_new_turns,
            config.consolidation_turns,
        ) == (None, 60.0, 10, 40)


def test_consolidation_schedule_keys(in_empty_dir):
    text = "consolidation: {model: local, every_minutes: 2.5, min_new_turns: 4, turns: 12}\n"
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert (
        config.consolidation_model,
        config.consolidation_every_minutes,
        config.consolidation_min_new_turns,
        config.consolidation_turns,
    ) == ("local", 2.5, 4, 12)
    path = write(in_empty_dir / "whole.yaml", "consolidation: {every_minutes: 5}\n")
    whole = load_config(path, {})
    assert whole.consolidation_every_minutes == 5.0


def test_moim_consolidation_model_beats_yaml(in_empty_dir):
    path = write(in_empty_dir / "moim.yaml", "consolidation: {model: local, turns: 12}\n")
    config = load_config(path, {"MOIM_CONSOLIDATION_MODEL": "gpt-4o-mini"})
    assert (config.consolidation_model, config.consolidation_turns) == ("gpt-4o-mini", 12)


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("[gpt-4o-mini]", "consolidation: must be a mapping"),
        ("{model: 5}", "consolidation.model: expected str, got 5"),
        ("{every_minutes: 0}", "consolidation.every_minutes: must be above 0, got 0.0"),
        ("{every_minutes: -1.5}", "consolidation.every_minutes: must be above 0, got -1.5"),
        ("{every_minutes: .inf}", "consolidation.every_minutes: must be above 0, got inf"),
        ("{every_minutes: hourly}", "consolidation.every_minutes: expected float, got 'hourly'"),
        ("{min_new_turns: 0}", "consolidation.min_new_turns: must be at least 1, got 0"),
        ("{min_new_turns: 2.5}", "consolidation.min_new_turns: expected an integer, got 2.5"),
        ("{turns: 0}", "consolidation.turns: must be from 1 to 1000, got 0"),
        ("{turns: 1001}", "consolidation.turns: must be from 1 to 1000, got 1001"),
    ],
)
def test_bad_consolidation_values_name_their_key(in_empty_dir, yaml_text, message):
    path = write(in_empty_dir / "bad.yaml", f"consolidation: {yaml_text}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    assert str(raised.value) == message


# -- proxy keys --------------------------------------------------------------------------------

SECRET = "sk-moim-s3cret"


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("auth: {keys: ['']}", "auth.keys[0]: the key is empty"),
        ("auth: {keys: [{key: '   '}]}", "auth.keys[0]: the key is empty"),
        (
            f"auth: {{keys: [{SECRET}, {{key: '', user_id: bob}}]}}",
            "auth.keys[1]: the key is empty",
        ),
        ("auth: {admin_keys: ['']}", "auth.admin_keys[0]: the key is empty"),
        ("auth: {admin_keys: [5]}", "auth.admin_keys[0]: expected a string"),
        ("auth: {keys: [sk-1234]}", "auth.keys[0]: the key is shorter than 8 characters"),
        (f"auth: {{keys: [' {SECRET}']}}", "auth.keys[0]: the key starts or ends with whitespace"),
        (
            "auth: {keys: ['sk-moim-\u00e9t\u00e9']}",
            "auth.keys[0]: the key must be printable ASCII",
        ),
        ("auth: {keys: sk-moim-plain}", "auth.keys: expected a list"),
        (
            f"auth: {{keys: [{{key: {SECRET}, user_id: alice}}], admin_keys: [{SECRET}]}}",
            "auth: proxy keys #1 and #2 are the same key with different users or rights",
        ),
    ],
)
def test_bad_proxy_key_is_refused_by_position_never_by_value(in_empty_dir, yaml_text, message):
    path = write(in_empty_dir / "bad.yaml", yaml_text + "\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    assert str(raised.value) == message
    assert SECRET not in str(raised.value)


def test_a_key_given_twice_with_one_meaning_counts_once(in_empty_dir):
    path = write(in_empty_dir / "moim.yaml", f"auth: {{keys: [{SECRET}]}}\n")
    config = load_config(path, {"MOIM_PROXY_KEYS": f"{SECRET},sk-moim-other"})
    assert config.keys == (ProxyKey(SECRET), ProxyKey("sk-moim-other"))


def test_environment_keys_are_checked_too(in_empty_dir):
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"MOIM_PROXY_KEYS": f"{SECRET},,short"})
    assert str(raised.value) == "MOIM_PROXY_KEYS item 3: the key is shorter than 8 characters"
    bound = write(in_empty_dir / "moim.yaml", f"auth: {{keys: [{{key: {SECRET}, user_id: a}}]}}\n")
    with pytest.raises(ConfigError, match=r"^auth: proxy keys #1 and #2 are the same key"):
        load_config(bound, {"MOIM_PROXY_KEYS": SECRET})


KEYS_FILE = f"""# moim proxy keys, one a line

{SECRET}
   # an indented comment
  sk-moim-second
"""


def test_keys_file_from_yaml_adds_unbound_keys(in_empty_dir):
    write(in_empty_dir / "keys.txt", KEYS_FILE)
    text = "auth: {keys: [{key: sk-moim-alice, user_id: alice}], keys_file: keys.txt}\n"
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert config.keys == (
        ProxyKey("sk-moim-alice", user_id="alice"),
        ProxyKey(SECRET),
        ProxyKey("sk-moim-second"),
    )


def test_keys_file_from_the_environment_means_the_same_as_moim_proxy_keys(in_empty_dir):
    path = write(in_empty_dir / "keys.txt", KEYS_FILE)
    from_file = load_config(None, {"MOIM_PROXY_KEYS_FILE": str(path)})
    from_list = load_config(None, {"MOIM_PROXY_KEYS": f"{SECRET}, sk-moim-second"})
    assert from_file.keys == from_list.keys == (ProxyKey(SECRET), ProxyKey("sk-moim-second"))


@pytest.mark.parametrize("source", ["yaml", "env"])
def test_missing_keys_file_is_a_config_error(in_empty_dir, source):
    missing = in_empty_dir / "absent-keys.txt"
    with pytest.raises(ConfigError) as raised:
        if source == "yaml":
            load_config(write(in_empty_dir / "moim.yaml", f"auth: {{keys_file: {missing}}}\n"), {})
        else:
            load_config(None, {"MOIM_PROXY_KEYS_FILE": str(missing)})
    name = "auth.keys_file" if source == "yaml" else "MOIM_PROXY_KEYS_FILE"
    assert str(raised.value).startswith(f"{name}: cannot read {missing}")


@pytest.mark.parametrize("listed", [",", " , ,", ",\n"])
def test_moim_proxy_keys_that_holds_no_key_is_refused_not_read_as_no_keys(in_empty_dir, listed):
    # ',' is what a template's empty list renders: read as no keys, moim answered anyone.
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"MOIM_PROXY_KEYS": listed})
    assert str(raised.value).startswith("MOIM_PROXY_KEYS holds no key")


@pytest.mark.parametrize("source", ["yaml", "env"])
def test_a_keys_file_that_holds_no_key_is_refused(in_empty_dir, source):
    path = write(in_empty_dir / "keys.txt", "# moim proxy keys, one a line\n\n")
    with pytest.raises(ConfigError) as raised:
        if source == "yaml":
            load_config(write(in_empty_dir / "moim.yaml", f"auth: {{keys_file: {path}}}\n"), {})
        else:
            load_config(None, {"MOIM_PROXY_KEYS_FILE": str(path)})
    name = "auth.keys_file" if source == "yaml" else "MOIM_PROXY_KEYS_FILE"
    assert str(raised.value).startswith(f"{name}: {path} holds no key")


def test_bad_key_in_a_keys_file_names_its_line_never_its_value(in_empty_dir):
    path = write(in_empty_dir / "keys.txt", f"{SECRET}\n# comment\nsk-shrt\n")
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"MOIM_PROXY_KEYS_FILE": str(path)})
    assert str(raised.value) == (
        "MOIM_PROXY_KEYS_FILE line 3: the key is shorter than 8 characters"
    )


# -- limits ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("server: {max_body_bytes: -1}", "server.max_body_bytes: must be at least 1, got -1"),
        ("server: {max_body_bytes: 0}", "server.max_body_bytes: must be at least 1, got 0"),
        ("server: {max_messages: 0}", "server.max_messages: must be at least 1, got 0"),
        ("server: {max_header_bytes: -2}", "server.max_header_bytes: must be at least 1, got -2"),
        ("memory: {ingest_queue_size: -5}", "memory.ingest_queue_size: must be at least 1, got -5"),
        ("upstream: {connect_timeout: 0}", "upstream.connect_timeout: must be above 0, got 0.0"),
        ("upstream: {read_timeout: -3}", "upstream.read_timeout: must be above 0, got -3.0"),
        ("upstream: {read_timeout: .nan}", "upstream.read_timeout: expected a number, got .nan"),
        ("memory: {busy_timeout: 0}", "memory.busy_timeout: must be above 0, got 0.0"),
        ("server: {header_timeout: 0}", "server.header_timeout: must be above 0, got 0.0"),
        ("server: {body_timeout: -1}", "server.body_timeout: must be above 0, got -1.0"),
        ("server: {keep_alive_timeout: 0}", "server.keep_alive_timeout: must be above 0, got 0.0"),
        ("server: {shutdown_timeout: -1}", "server.shutdown_timeout: must be above 0, got -1.0"),
    ],
)
def test_limits_below_one_are_refused_naming_the_key(in_empty_dir, yaml_text, message):
    path = write(in_empty_dir / "bad.yaml", yaml_text + "\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path, {})
    assert str(raised.value) == message


def test_limits_from_yaml(in_empty_dir):
    text = (
        "server: {max_body_bytes: 1, max_messages: 2, max_header_bytes: 3, header_timeout: 6,"
        " body_timeout: 7.5}\n"
        "memory: {ingest_queue_size: 4, busy_timeout: 0.5}\n"
    )
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert (
        config.max_body_bytes,
        config.max_messages,
        config.max_header_bytes,
        config.ingest_queue_size,
        config.memory.busy_timeout,
        config.header_timeout,
        config.body_timeout,
    ) == (1, 2, 3, 4, 0.5, 6.0, 7.5)


def test_slow_client_limits_default_to_10_and_20_seconds():
    assert (Config().header_timeout, Config().body_timeout) == (10.0, 20.0)


@pytest.mark.parametrize(
    ("key", "variable", "default"),
    [
        # above AWS ALB's and nginx's 60 s idle timeout, so the balancer closes first
        ("keep_alive_timeout", "MOIM_KEEP_ALIVE_TIMEOUT", 75.0),
        # below Kubernetes' 30 s grace period, so a stop ends before its SIGKILL
        ("shutdown_timeout", "MOIM_SHUTDOWN_TIMEOUT", 25.0),
    ],
)
def test_server_times_from_yaml_and_the_environment(in_empty_dir, key, variable, default):
    assert getattr(Config(), key) == default
    path = write(in_empty_dir / "moim.yaml", f"server: {{{key}: 120}}\n")
    assert getattr(load_config(path, {}), key) == 120.0
    assert getattr(load_config(path, {variable: "650.5"}), key) == 650.5
    for bad in ("soon", "0", "-1", "inf"):
        with pytest.raises(ConfigError) as raised:
            load_config(None, {variable: bad})
        assert str(raised.value).startswith(f"{variable}: ")


# -- what a key entry may say ------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            "{key: KEY, users: []}",
            "auth.keys[0].users: the list is empty; name the users this key may act for, "
            "or leave 'users' out for a key that acts for any user",
        ),
        (
            "{key: KEY, users: }",
            "auth.keys[0].users: the list is empty; name the users this key may act for, "
            "or leave 'users' out for a key that acts for any user",
        ),
        ("{key: KEY, users: [bob, '']}", "auth.keys[0].users[1]: the user id is empty"),
        ("{key: KEY, users: [bob, '  ']}", "auth.keys[0].users[1]: the user id is empty"),
        ("{key: KEY, user_id: ''}", "auth.keys[0].user_id: the user id is empty"),
        (
            "{key: KEY, users: [bob], admin: true}",
            "auth.keys[0]: 'users' and 'admin: true' contradict each other: "
            "an admin key acts for any user",
        ),
        (
            "{key: KEY, user_id: alice, admin: true}",
            "auth.keys[0]: 'user_id' and 'admin: true' contradict each other: "
            "an admin key acts for any user",
        ),
        (
            "{key: KEY, user_id: alice, users: [alice, bob]}",
            "auth.keys[0]: 'user_id' and 'users' contradict each other: "
            "a key is bound to one user or may act for a list of them, not both",
        ),
    ],
)
def test_a_key_entry_that_is_empty_or_contradicts_itself_is_refused(in_empty_dir, entry, message):
    """`users: []` acted for every user; contradictions were accepted and half-applied."""
    text = f"auth: {{keys: [{entry.replace('KEY', SECRET)}]}}\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", text), {})
    assert str(raised.value) == message


def test_a_bad_key_entry_is_named_by_its_position_never_its_key(in_empty_dir):
    text = f"auth: {{keys: [sk-moim-plain, {{key: {SECRET}, users: []}}]}}\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", text), {})
    assert str(raised.value).startswith("auth.keys[1].users: the list is empty")
    assert SECRET not in str(raised.value)


def test_consistent_key_entries_load(in_empty_dir):
    text = (
        "auth:\n"
        "  keys:\n"
        "    - {key: sk-moim-alice, user_id: alice, admin: false}\n"
        "    - {key: sk-moim-team, users: [bob, carol]}\n"
        "    - {key: sk-moim-admin, admin: true}\n"
    )
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert config.keys == (
        ProxyKey("sk-moim-alice", user_id="alice"),
        ProxyKey("sk-moim-team", users=("bob", "carol")),
        ProxyKey("sk-moim-admin", admin=True),
    )


# -- unknown keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        (
            "memory: {placment: system}",
            "memory.placment: unknown key; did you mean memory.placement?",
        ),
        ("sever: {port: 1234}", "sever: unknown key; did you mean server?"),
        ("server: {prot: 1234}", "server.prot: unknown key; did you mean server.port?"),
        (
            "upstream: {base_ulr: x}",
            "upstream.base_ulr: unknown key; did you mean upstream.base_url?",
        ),
        (
            "consolidation: {every_minute: 5}",
            "consolidation.every_minute: unknown key; did you mean consolidation.every_minutes?",
        ),
        # A typo that used to leave the proxy open: no keys were read at all.
        ("auth: {key: [sk-moim-plain]}", "auth.key: unknown key; did you mean auth.keys?"),
        (
            "auth: {keys: [{key: sk-moim-plain, user: alice}]}",
            "auth.keys[0].user: unknown key; did you mean auth.keys[0].users?",
        ),
        (
            "models: {local: {model: llama3, api_bsae: x}}",
            "models.local.api_bsae: unknown key; did you mean models.local.api_base?",
        ),
        (
            "memory: {tiers: [{below: 0.5, excerpts: 5, chras: 600}]}",
            "memory.tiers[0].chras: unknown key; did you mean memory.tiers[0].chars?",
        ),
        # The right key in the wrong place.
        ("memory: {db: ./moim.db}", "memory.db: unknown key; did you mean db?"),
        ("port: 1234", "port: unknown key; did you mean server.port?"),
        (
            "server: {colour: blue}",
            "server.colour: unknown key; server takes: body_timeout, header_timeout, host, "
            "keep_alive_timeout, max_body_bytes, max_header_bytes, max_messages, metrics_public, "
            "port, shutdown_timeout",
        ),
        (
            "wibble: 1",
            "wibble: unknown key; the top level takes: auth, consolidation, context_windows, db, "
            "inspector, journal, memory, models, server, upstream",
        ),
        (
            "server: {1: 2}",
            "server.1: unknown key; server takes: body_timeout, header_timeout, host, "
            "keep_alive_timeout, max_body_bytes, max_header_bytes, max_messages, metrics_public, "
            "port, shutdown_timeout",
        ),
    ],
)
def test_an_unknown_key_is_refused_naming_its_path_and_a_near_miss(
    in_empty_dir, yaml_text, message
):
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", yaml_text + "\n"), {})
    assert str(raised.value) == message


def test_every_unknown_key_is_named_at_once(in_empty_dir):
    text = "server: {prot: 1234}\nmemory: {placment: system}\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", text), {})
    assert str(raised.value) == (
        "server.prot: unknown key; did you mean server.port?\n"
        "memory.placment: unknown key; did you mean memory.placement?"
    )


def test_an_unknown_name_under_auth_is_not_echoed_as_it_may_be_a_secret(in_empty_dir):
    text = f"auth:\n  {SECRET}: alice\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", text), {})
    assert str(raised.value) == (
        "auth: an unknown key (its name is not shown: it may be a secret); auth takes: "
        "account_endpoints_for_all_keys, admin_keys, keys, keys_file, metrics_keys, "
        "refuse_open_bind"
    )


def test_model_names_and_context_window_names_are_free(in_empty_dir):
    text = "models: {my-alias: gpt-4o}\ncontext_windows: {anything-at-all: 4096}\n"
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert config.routes == {"my-alias": ModelRoute("gpt-4o")}
    assert config.memory.context_windows == {"anything-at-all": 4096}


def uncommented(text):
    """config.yaml with each commented-out `key: value` example line turned back on."""
    return re.sub(r"^(\s*)# ([a-z_]+: )", r"\1\2", text, flags=re.MULTILINE)


def test_every_key_the_shipped_config_yaml_documents_is_known(in_empty_dir):
    """The commented examples of the repo's config.yaml, switched on, all load."""
    write(in_empty_dir / "keys.txt", f"{SECRET}\n")
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    text = uncommented(text).replace("/run/secrets/moim-keys", str(in_empty_dir / "keys.txt"))
    config = load_config(write(in_empty_dir / "all.yaml", text), {})
    assert config.memory.db_path == Path("./moim.db")
    assert config.max_header_bytes == 16384
    assert config.consolidation_model == "gpt-4o-mini"
    assert config.metrics_public is False and "metrics_public: false" in text
    assert config.keys == (
        ProxyKey("sk-moim-admin", admin=True),
        ProxyKey("sk-moim-scrape", metrics_only=True),
        ProxyKey(SECRET),
    )


def test_the_readme_yaml_examples_load(in_empty_dir):
    blocks = re.findall(
        r"```yaml\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S
    )
    assert blocks
    for number, block in enumerate(blocks):
        load_config(write(in_empty_dir / f"readme-{number}.yaml", block), {})


# -- who may read /metrics ---------------------------------------------------------------------


def test_metrics_keys_and_a_public_metrics_switch(in_empty_dir):
    text = "server: {metrics_public: true}\nauth: {metrics_keys: [sk-moim-scrape]}\n"
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})
    assert config.metrics_public is True
    assert config.keys == (ProxyKey("sk-moim-scrape", metrics_only=True),)
    assert Config().metrics_public is False


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        (
            "auth: {metrics_keys: [sk-1234]}",
            "auth.metrics_keys[0]: the key is shorter than 8 characters",
        ),
        (
            f"auth: {{keys: [{SECRET}], metrics_keys: [{SECRET}]}}",
            "auth: proxy keys #1 and #2 are the same key with different users or rights",
        ),
        ("server: {metrics_public: 'yes'}", "server.metrics_public: expected bool, got 'yes'"),
    ],
)
def test_bad_metrics_settings_are_refused(in_empty_dir, yaml_text, message):
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", yaml_text + "\n"), {})
    assert str(raised.value) == message


# -- values moim serve could not use -----------------------------------------------------------


def test_a_port_outside_1_to_65535_is_refused(in_empty_dir):
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", "server: {port: 70000}\n"), {})
    assert str(raised.value) == "server.port: must be from 1 to 65535, got 70000"
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"MOIM_PORT": "0"})
    assert str(raised.value) == "MOIM_PORT: must be from 1 to 65535, got 0"


def test_a_provider_key_of_the_wrong_type_is_not_echoed(in_empty_dir):
    text = "upstream: {api_key: 123456789012}\nmodels: {m: {model: x, api_key: 123456789012}}\n"
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", text), {})
    assert str(raised.value) == "upstream.api_key: expected str (the value is not shown)"


# -- memory.embedder ---------------------------------------------------------------------------


def test_the_bundled_embedder_is_the_default(in_empty_dir):
    assert load_config(None, {}).embedder is None


def test_an_embedder_from_yaml(in_empty_dir):
    text = """
memory:
  embedder:
    model: BAAI/bge-small-en-v1.5
    api_base: http://127.0.0.1:8081/v1
    api_key: sk-embed
    dimensions: 384
    batch_size: 32
    timeout: 20
    query_timeout: 1.5
    retries: 5
    query_prefix: "query: "
    document_prefix: "passage: "
"""
    config = load_config(write(in_empty_dir / "moim.yaml", text), {})

    assert config.embedder == EmbedderConfig(
        model="BAAI/bge-small-en-v1.5",
        api_base="http://127.0.0.1:8081/v1",
        api_key="sk-embed",
        dimensions=384,
        batch_size=32,
        timeout=20.0,
        query_timeout=1.5,
        retries=5,
        query_prefix="query: ",
        document_prefix="passage: ",
    )
    assert "sk-embed" not in repr(config)


def test_embedder_environment_beats_yaml(in_empty_dir):
    text = "memory: {embedder: {model: a-model, api_base: 'http://a/v1', dimensions: 8}}\n"
    env = {
        "MOIM_EMBEDDER_MODEL": "openai/text-embedding-3-small",
        "MOIM_EMBEDDER_API_BASE": "http://b/v1",
        "MOIM_EMBEDDER_API_KEY": "sk-env-embed",
    }
    config = load_config(write(in_empty_dir / "moim.yaml", text), env)

    assert config.embedder == EmbedderConfig(
        "openai/text-embedding-3-small", "http://b/v1", "sk-env-embed", dimensions=8
    )


def test_moim_embedder_model_alone_names_an_embedder(in_empty_dir):
    config = load_config(None, {"MOIM_EMBEDDER_MODEL": "openai/text-embedding-3-small"})
    assert config.embedder == EmbedderConfig("openai/text-embedding-3-small")


def test_an_embedder_address_without_a_model_is_refused(in_empty_dir):
    with pytest.raises(ConfigError, match="MOIM_EMBEDDER_MODEL"):
        load_config(None, {"MOIM_EMBEDDER_API_BASE": "http://b/v1"})


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("memory: {embedder: {api_base: 'http://a/v1'}}", "memory.embedder.model: required"),
        ("memory: {embedder: {model: m, dimensions: 0}}", "memory.embedder.dimensions: must be"),
        ("memory: {embedder: {model: m, batch_size: 0}}", "memory.embedder.batch_size: must be"),
        ("memory: {embedder: {model: m, timeout: 0}}", "memory.embedder.timeout: must be above"),
        ("memory: {embedder: {model: m, api_key: 5}}", "memory.embedder.api_key: expected str"),
        ("memory: {embedder: {model: m, modle: x}}", "memory.embedder.modle: unknown key"),
        ("memory: {embedder: text-embedding-3-small}", "memory.embedder: must be a mapping"),
    ],
)
def test_bad_embedder_settings_name_their_key(in_empty_dir, yaml_text, message):
    with pytest.raises(ConfigError) as raised:
        load_config(write(in_empty_dir / "bad.yaml", yaml_text + "\n"), {})
    assert message in str(raised.value)
    assert "(the value is not shown)" in str(raised.value) or "api_key" not in message


def test_chat_uis_background_tasks_skip_memory_unless_config_says_false(in_empty_dir):
    """`memory.skip_ui_tasks` (docs/dropin.md): on by default."""
    assert load_config(None, {}).skip_ui_tasks is True
    path = write(in_empty_dir / "tasks.yaml", "memory: {skip_ui_tasks: false}\n")
    assert load_config(path, {}).skip_ui_tasks is False
