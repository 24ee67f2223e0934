"""The web inspector in a real browser: Debian's chromium, headless, driven by Selenium through
Debian's chromedriver, with JavaScript switched off (the inspector has none; reading and its
forms must work without it).

One walk through it as a person would: log in with an admin key, load each main page, edit a
fact and make a search through the forms, open "why this block", and check that stored markup
shows as text. A screenshot of each page is written to tests/artifacts/ (git-ignored).

.ci/run installs chromium and chromium-driver when they are missing (as root, from Debian's
mirror); pip installs selenium with ".[test]". Outside CI, a machine without them skips this
test and says why; in CI (CI set) it fails instead.
"""

import base64
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from proxy.config import ProxyKey
from tests.e2e.test_inspector import chat

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
ADMIN = "sk-admin-browser"
KAYAK = "I keep my red kayak at the marina in Porto"
SCRIPT = "<script>document.title='pwned'</script>"
SESSIONS = {
    "gear": "The kayak paddle and my life vest hang in the marina shed",
    "dinner": "My carbonara uses guanciale and pecorino, never cream",
    "weekend": "On Saturday I paddled the kayak upriver to the old mill",
}


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return 'selenium is not installed (pip install ".[test]")'
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver; see .ci/run)"
    return None


@pytest.fixture
def driver():
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="moim-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(argument)
    options.add_experimental_option(
        "prefs", {"profile.managed_default_content_settings.javascript": 2}
    )
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def follow(element):
    """Click a link or a form's button and wait until the next page has replaced this one."""
    from selenium.webdriver.support.wait import WebDriverWait

    page = element.parent.find_element("tag name", "html")
    element.click()
    WebDriverWait(element.parent, 30).until(lambda _: gone(page))


def gone(element):
    """True once `element` has left the document. Chromium says so with a stale reference or,
    asked while the new page replaces it, with "does not belong to the document" (selenium's
    `staleness_of` knows only the first: the second failed one CI run)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


def shot(driver, name):
    """The whole page as a PNG in tests/artifacts/ (through DevTools: no script needed)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    png = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"inspector-{name}.png"
    path.write_bytes(base64.b64decode(png["data"]))
    print(f"screenshot: {path}")


def test_the_inspector_in_a_real_browser(make_proxy, driver):
    from selenium.webdriver.common.by import By

    proxy = make_proxy(keys=(ProxyKey(ADMIN, admin=True),), upstream_api_key="sk-provider")
    chat(proxy, "alice", KAYAK, key=ADMIN, x_memory_session_id="trip")
    for session, text in SESSIONS.items():
        chat(proxy, "alice", text, key=ADMIN, x_memory_session_id=session)
    proxy.flush()
    proxy.layer.set_fact("alice", "home_city", "Porto")
    chat(proxy, "alice", "Where did I leave my kayak?", key=ADMIN, x_request_id="req-kayak")
    proxy.layer.set_fact("alice", "note", SCRIPT)
    find = driver.find_element
    text = lambda: find(By.TAG_NAME, "main").text  # noqa: E731

    driver.get(proxy.root + "/ui")  # no login yet: the login page
    assert driver.current_url.endswith("/ui/login")
    find(By.NAME, "key").send_keys(ADMIN)
    follow(find(By.CSS_SELECTOR, "form.stack button"))
    assert driver.current_url.endswith("/ui") and "alice" in text()
    cookie = driver.get_cookie("moim_ui")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    shot(driver, "users")

    follow(find(By.LINK_TEXT, "alice"))
    assert "trip" in text() and KAYAK in text()
    shot(driver, "sessions")
    follow(find(By.LINK_TEXT, "trip"))
    assert KAYAK in text()
    shot(driver, "turns")

    follow(find(By.LINK_TEXT, "Facts"))
    value = find(By.CSS_SELECTOR, "input[aria-label='value of home_city']")
    value.clear()
    value.send_keys("Lisbon")
    follow(value.find_element(By.XPATH, "following-sibling::button"))
    assert (
        find(By.CSS_SELECTOR, "input[aria-label='value of home_city']").get_attribute("value")
        == "Lisbon"
    )
    assert [(f.value, f.status) for f in proxy.layer.fact_history("alice", "home_city")] == [
        ("Porto", "superseded"),
        ("Lisbon", "active"),
    ]
    assert (
        find(By.CSS_SELECTOR, "input[aria-label='value of note']").get_attribute("value") == SCRIPT
    )  # stored markup is text, and nothing of it ran
    assert driver.find_elements(By.TAG_NAME, "script") == [] and "pwned" not in driver.title
    shot(driver, "facts")

    follow(find(By.LINK_TEXT, "Search"))
    find(By.NAME, "q").send_keys("red kayak marina")
    follow(find(By.CSS_SELECTOR, "form[role=search] button"))
    rows = driver.find_elements(By.CSS_SELECTOR, "table.hits tbody tr")
    assert rows and KAYAK in rows[0].text
    assert "q=red+kayak+marina" in driver.current_url
    shot(driver, "search")

    follow(find(By.LINK_TEXT, "Why this block"))
    follow(find(By.LINK_TEXT, "req-kayak"))
    assert "The block as sent" in text() and "=== Memory Context ===" in text()
    assert "Lisbon" not in find(By.CSS_SELECTOR, "pre.block").text  # sent before the edit
    shot(driver, "why")
