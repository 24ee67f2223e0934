import pytest
import sqlean

from memory.store.fts import (
    fts_document,
    fts_match,
    fts_terms,
    owner_token,
    search_terms,
    word_set,
)


def test_terms_are_lowercased_words_without_stopwords_or_single_characters():
    assert fts_terms("What did I say about the Auth-Service bug in v2, a week ago?") == [
        "say",
        "auth",
        "service",
        "bug",
        "v2",
        "week",
        "ago",
    ]


def test_terms_are_deduplicated_in_order_of_first_appearance():
    assert fts_terms("Rust rust RUST cargo Rust cargo") == ["rust", "cargo"]


def test_underscores_split_words_like_the_unicode61_tokenizer():
    assert fts_terms("preference:dark_mode") == ["preference", "dark", "mode"]


def test_unicode_words_are_terms():
    assert fts_terms("Café in Zürich, 東京に行きました, Ελληνικά") == [
        "café",
        "zürich",
        "東京に行きました",
        "ελληνικά",
    ]


def test_combining_accents_are_normalised_to_the_precomposed_letter():
    assert fts_terms("cafe\u0301") == ["café"]


def test_search_terms_are_the_first_terms_minus_those_dropped():
    assert search_terms("deploy the staging server") == ["deploy", "staging", "server"]
    assert search_terms("What did Caroline research?", drop={"caroline"}) == ["research"]
    assert search_terms("Caroline?", drop={"caroline"}) == []


def test_a_word_longer_than_any_chunk_holds_is_no_search_term():
    """No chunk holds it (chunks are cut at 1,000 characters), and the Porter stemmer takes
    quadratic time on a run of "y" (1 MB: 7 minutes, under the lock every recall and the
    writer's indexing stem under)."""
    long = "y" * 1_000_000
    assert search_terms(f"where is my {long} kayak?") == ["kayak"]
    assert search_terms(f"{'b' * 2_000} kayak") == ["b" * 2_000, "kayak"]


def test_search_terms_keep_at_most_max_terms():
    text = " ".join(f"word{i}" for i in range(40))
    assert search_terms(text, max_terms=3) == ["word0", "word1", "word2"]
    assert search_terms(text) == [f"word{i}" for i in range(24)]


def test_max_terms_below_one_is_rejected():
    with pytest.raises(ValueError):
        search_terms("anything", max_terms=0)


def test_a_match_is_the_users_stemmed_terms_quoted_and_joined_with_or():
    owner = owner_token("ann")
    assert fts_match("ann", ["deploying", "staging", "servers"]) == (
        f'"{owner}_deploi" OR "{owner}_stage" OR "{owner}_server"'
    )


def test_terms_with_one_stem_are_searched_once():
    assert fts_match("ann", ["cooking", "cooked", "cooks"]) == f'"{owner_token("ann")}_cook"'


def test_no_terms_give_no_match():
    assert fts_match("ann", []) is None


def test_owner_tokens_differ_by_user_and_hold_only_token_characters():
    assert owner_token("ann") != owner_token("bob")
    assert owner_token("ann") == owner_token("ann")
    assert owner_token('a b:c"d').isalnum()


def test_a_document_keeps_repeats_and_drops_stopwords():
    owner = owner_token("ann")
    assert fts_document("ann", "The cat saw the cats, a cat!") == " ".join(
        f"{owner}_{stem}" for stem in ["cat", "saw", "cat", "cat"]
    )


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ('"foo" OR bar', ["foo", "bar"]),
        ("NEAR(alpha beta)", ["near", "alpha", "beta"]),
        ("col:val", ["col", "val"]),
        ("text:secret", ["text", "secret"]),
        ("pre*", ["pre"]),
        ("^start", ["start"]),
        ('unbalanced "quote here', ["unbalanced", "quote"]),
        ("NOT wanted", ["wanted"]),
        ("cats AND dogs", ["cats", "dogs"]),
        ("+plus -minus (paren) {brace}", ["plus", "minus", "paren", "brace"]),
        ('""" \'\' ;-- drop table t', ["drop", "table"]),
    ],
)
def test_fts_syntax_in_user_text_becomes_plain_terms(text, terms):
    assert search_terms(text) == terms


@pytest.mark.parametrize("text", ["", "   ", "the and of what is it", "?!* ^ : ()", "a b c I"])
def test_text_without_terms_gives_no_match(text):
    assert fts_match("ann", search_terms(text)) is None


ROWS = [
    "The auth service rejects expired tokens",
    "We deployed staging on Friday",
    "col:val is how FTS5 filters a column",
    "Café au lait in Zürich",
    "NEAR the river we walked",
    "prefix searching like pre* is FTS syntax",
    "東京に行きました",
]


@pytest.fixture
def fts():
    """A table like `chunks_fts`: ann owns ROWS (rowids 1..7), bob owns the same text (11..17)."""
    db = sqlean.connect(":memory:")
    db.execute(
        "create virtual table t using fts5(terms, content='', contentless_delete=1, "
        "tokenize=\"unicode61 tokenchars '_'\")"
    )
    for user, base in (("ann", 0), ("bob", 10)):
        db.executemany(
            "insert into t(rowid, terms) values (?, ?)",
            [(base + i, fts_document(user, text)) for i, text in enumerate(ROWS, start=1)],
        )
    yield db
    db.close()


def _match(db, text, user="ann"):
    query = fts_match(user, search_terms(text))
    assert query is not None
    rows = db.execute("select rowid from t where t match ? order by rowid", (query,))
    return [rowid for (rowid,) in rows]


@pytest.mark.parametrize(
    ("text", "rowids"),
    [
        ('"auth" OR staging', [1, 2]),
        ("NEAR(auth tokens)", [1, 5]),
        ("col:val", [3]),
        ("text:staging", [2]),
        ("pre*", [6]),
        ("^deployed", [2]),
        ('"unbalanced quote', []),
        ("NOT staging", [2]),
        ("token AND expiring", [1]),
        ("cafe\u0301 zurich", [4]),
        ("東京に行きました", [7]),
        ("deploying", [2]),
    ],
)
def test_queries_run_against_a_real_fts5_table_and_match_words(fts, text, rowids):
    assert _match(fts, text) == rowids
    assert _match(fts, text, "bob") == [rowid + 10 for rowid in rowids]


def test_raw_user_text_would_break_fts5_but_the_match_does_not(fts):
    with pytest.raises(sqlean.OperationalError):
        fts.execute("select rowid from t where t match ?", ('"unbalanced quote',)).fetchall()
    assert _match(fts, '"unbalanced quote') == []


def test_a_user_id_cannot_widen_the_match_to_other_users(fts):
    for user in ['ann" OR "x', "*", "ann bob", ""]:
        assert _match(fts, "staging auth", user) == []


def test_the_word_set_of_a_text_holds_each_of_its_terms_as_fts_terms_reads_them():
    text = "Ｔhe Auth-Service bug in v2, a week ago: café"
    assert set(fts_terms(text)) <= word_set(text)
    assert {"auth", "service", "v2", "café", "the", "a"} <= word_set(text)
    assert "auth-service" not in word_set(text)
