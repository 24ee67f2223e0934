"""proxy/config_reader.py: a key nothing asked for is unknown, named by its path.

Through `load_config` (every section of config.yaml) these are tested in test_config.py;
here, `Section` alone.
"""

from proxy.config_reader import Section, unknown_keys


def test_keys_asked_by_get_in_or_items_are_known_and_the_rest_are_named_in_file_order():
    root = Section({"zz": 0, "a": 1, "b": 2, "free": {"x": 1}, "c": 3})
    root.get("a")
    assert "b" in root
    root.get("absent", None)
    dict(root.child(root["free"], "free").items())
    assert unknown_keys(root) == [
        "zz: unknown key; the top level takes: a, absent, b, free",
        "c: unknown key; the top level takes: a, absent, b, free",
    ]


def test_a_nested_key_is_named_by_its_whole_path_with_a_near_miss_or_its_right_place():
    root = Section({"server": {"prot": 1}, "memory": {"port": 2}})
    server = root.child(root["server"], "server")
    server.get("port")
    server.get("host")
    root.child(root["memory"], "memory").get("placement")
    assert unknown_keys(root) == [
        "server.prot: unknown key; did you mean server.port?",
        "memory.port: unknown key; did you mean server.port?",
    ]


def test_expected_keys_count_as_known():
    root = Section({"below": 0.5, "chras": 3})
    root.expect("below", "excerpts", "chars")
    assert unknown_keys(root) == ["chras: unknown key; did you mean chars?"]


def test_under_auth_a_name_with_no_near_miss_is_not_echoed():
    root = Section({"auth": {"sk-moim-0123456789": "alice", "kyes": []}})
    auth = root.child(root["auth"], "auth")
    auth.get("keys")
    auth.get("admin_keys")
    assert unknown_keys(root) == [
        "auth: an unknown key (its name is not shown: it may be a secret); "
        "auth takes: admin_keys, keys",
        "auth.kyes: unknown key; did you mean auth.keys?",
    ]
