import pytest
import sqlean

from memory.fts import fts_query, fts_terms


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


def test_query_is_quoted_terms_joined_with_or():
    assert fts_query("deploy the staging server") == '"deploy" OR "staging" OR "server"'


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ('"foo" OR bar', '"foo" OR "bar"'),
        ("NEAR(alpha beta)", '"near" OR "alpha" OR "beta"'),
        ("col:val", '"col" OR "val"'),
        ("text:secret", '"text" OR "secret"'),
        ("pre*", '"pre"'),
        ("^start", '"start"'),
        ('unbalanced "quote here', '"unbalanced" OR "quote"'),
        ("NOT wanted", '"wanted"'),
        ("cats AND dogs", '"cats" OR "dogs"'),
        ("+plus -minus (paren) {brace}", '"plus" OR "minus" OR "paren" OR "brace"'),
        ("\"\"\" '' ;-- drop table t", '"drop" OR "table"'),
    ],
)
def test_fts_syntax_in_user_text_becomes_plain_quoted_terms(text, query):
    assert fts_query(text) == query


@pytest.mark.parametrize("text", ["", "   ", "the and of what is it", "?!* ^ : ()", "a b c I"])
def test_text_without_terms_gives_no_query(text):
    assert fts_query(text) is None


def test_query_keeps_at_most_max_terms():
    text = " ".join(f"word{i}" for i in range(40))
    assert fts_query(text, max_terms=3) == '"word0" OR "word1" OR "word2"'
    assert fts_query(text) == " OR ".join(f'"word{i}"' for i in range(24))


def test_max_terms_below_one_is_rejected():
    with pytest.raises(ValueError):
        fts_query("anything", max_terms=0)


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
    db = sqlean.connect(":memory:")
    db.execute("create virtual table t using fts5(text, tokenize='porter unicode61')")
    db.executemany("insert into t(rowid, text) values (?, ?)", enumerate(ROWS, start=1))
    yield db
    db.close()


def _match(db, text):
    query = fts_query(text)
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


def test_raw_user_text_would_break_fts5_but_the_query_does_not(fts):
    with pytest.raises(sqlean.OperationalError):
        fts.execute("select rowid from t where t match ?", ('"unbalanced quote',)).fetchall()
    assert _match(fts, '"unbalanced quote') == []


def test_dropped_terms_are_left_out_of_the_query():
    assert fts_query("What did Caroline research?", drop={"caroline"}) == '"research"'
    assert fts_query("Caroline?", drop={"caroline"}) is None
