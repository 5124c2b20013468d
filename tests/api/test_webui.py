"""The chat page at GET / (webui/, docs/WEBUI.md), driven in headless Chromium through Selenium
against a real server: streamed answers with their speed and context use, Stop cancelling the
request on the server, model text rendered as text, the API key asked for on a 401, readable
errors. Waits poll the DOM with generous limits (the CI server is the sanitized build) and no
test depends on how fast anything runs."""
import json
import os
import pathlib
import re
import shutil

import pytest
import requests

from serve_helpers import REPO, STORIES, TEMPLATE, models_required, skip_or_fail
from test_api_serving import wait_for

WAIT = 180  # seconds any one step may take; a limit against hanging, never a speed threshold
CTX = 8192  # long enough that the Stop test's request is still generating when Stop is pressed
PROMPT = "Once upon a time"
ARTIFACTS = pathlib.Path(os.environ.get("DESKSIDE_ARTIFACTS", "/tmp"))


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip_or_fail("selenium is not installed (.venv/bin/pip install selenium)", models_required())
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        skip_or_fail("Chromium is not installed (apt-get install chromium chromium-driver)", models_required())
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1100,760"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))  # the named driver: nothing is fetched
    driver.set_script_timeout(WAIT)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def chat_server(start_server):
    return start_server(STORIES, "--chat-template", TEMPLATE, "--parallel", 2, "--ctx-size", CTX)


def wait(driver, cond, what, timeout=WAIT):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: cond(d), message=what)


def css(driver, selector):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


def text_of(driver, selector):
    found = css(driver, selector)
    return found[-1].text if found else ""


def open_page(driver, server, settings=None, conversations=None):
    """Loads the page with fresh storage (and the given settings / conversations in it), then
    waits until it shows the model."""
    driver.get(server.url + "/")
    driver.execute_script("localStorage.clear(); sessionStorage.clear();")
    if settings is not None:
        driver.execute_script("localStorage.setItem('deskside.settings', arguments[0])", json.dumps(settings))
    if conversations is not None:
        driver.execute_script("localStorage.setItem('deskside.conversations', arguments[0]);"
                              "localStorage.setItem('deskside.current', arguments[1])",
                              json.dumps(conversations), conversations[0]["id"])
    driver.get(server.url + "/")
    if server.api_key is None:
        wait(driver, lambda d: text_of(d, "#model-name") == server.model_id, "the page shows the model")


def send(driver, text):
    from selenium.webdriver.common.keys import Keys
    box = css(driver, "#input")[0]
    box.clear()
    box.send_keys(text, Keys.ENTER)


def wait_answer(driver, n_answers):
    """Waits until the n-th answer has its statistics line (the stream has ended) and returns it."""
    wait(driver, lambda d: len(css(d, ".msg.assistant .stats")) >= n_answers and css(d, "#send")[0].is_displayed(),
         f"answer {n_answers} ends with its statistics")
    return text_of(driver, ".msg.assistant .stats")


def stored_messages(driver):
    return driver.execute_script(
        "const id = localStorage.getItem('deskside.current');"
        "return JSON.parse(localStorage.getItem('deskside.conversations')).find(c => c.id === id).messages;")


def api_answer(server, max_tokens):
    body = {"model": server.model_id, "messages": [{"role": "user", "content": PROMPT}], "temperature": 0,
            "max_tokens": max_tokens}
    r = server.post("/v1/chat/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_page_streams_an_answer_with_speed_and_context(browser, chat_server):
    open_page(browser, chat_server)
    assert text_of(browser, "#model-ctx") == f"context {CTX}"
    assert text_of(browser, "#model-devices") == "on " + chat_server.get("/v1/deskside/info").json()["devices"]
    # Settings through the dialog, as a user sets them.
    css(browser, "#open-settings")[0].click()
    for field, value in [("#set-temperature", "0"), ("#set-max-tokens", "48"), ("#set-system", "")]:
        css(browser, field)[0].clear()
        css(browser, field)[0].send_keys(value)
    css(browser, "#settings-save")[0].click()
    wait(browser, lambda d: not d.execute_script("return document.getElementById('settings').open"), "settings close")

    send(browser, PROMPT)
    stats = wait_answer(browser, 1)
    expected = api_answer(chat_server, 48)
    m = re.fullmatch(r"prompt (\d+) tokens at [\d.]+ tok/s · generated (\d+) tokens at [\d.]+ tok/s · "
                     rf"context (\d+) / {CTX} \(\d+%\)", stats)
    assert m, stats
    usage = expected["usage"]
    assert (int(m[1]), int(m[2]), int(m[3])) == (usage["prompt_tokens"], usage["completion_tokens"],
                                                 usage["total_tokens"])
    # The streamed text, put together by the page, is what the API answers in one piece.
    messages = stored_messages(browser)
    assert [x["role"] for x in messages] == ["user", "assistant"]
    assert messages[1]["content"] == expected["choices"][0]["message"]["content"]
    assert text_of(browser, ".msg.assistant .body").split() == messages[1]["content"].split()
    assert text_of(browser, "#conversations .current .title") == PROMPT
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "deskside-webui.png"))

    # Regenerate: the same answer again (temperature 0) in place of the first.
    browser.execute_script("window.firstAnswer = document.querySelector('.msg.assistant')")
    css(browser, ".msg.assistant .regenerate")[0].click()
    wait(browser, lambda d: d.execute_script("const m = document.querySelector('.msg.assistant');"
                                             "return m !== window.firstAnswer && !!m.querySelector('.stats')"),
         "a new answer with its statistics")
    assert stored_messages(browser)[1]["content"] == messages[1]["content"]
    # Edit and resend: the last question returns to the box and leaves the history.
    css(browser, ".msg.user .edit")[0].click()
    assert css(browser, "#input")[0].get_attribute("value") == PROMPT
    assert stored_messages(browser) == [] and not css(browser, ".msg")
    send(browser, PROMPT + " there was")
    wait_answer(browser, 1)
    assert stored_messages(browser)[0]["content"] == PROMPT + " there was"


def test_stop_cancels_the_request_on_the_server(browser, chat_server):
    max_tokens = CTX - 400  # the prompt is about 120 tokens with the template's system message
    open_page(browser, chat_server, settings={"temperature": "0", "max_tokens": str(max_tokens),
                                              "extra": json.dumps({"ignore_eos": True})})
    before = chat_server.metrics()["deskside_generated_tokens_total"]
    cancelled = chat_server.metrics()["deskside_cancelled_sequences_total"]
    closed = 'deskside_requests_total{route="/v1/chat/completions",status="499"}'
    closed_before = chat_server.metrics().get(closed, 0)
    send(browser, PROMPT)
    # Streaming: text is in the page while the request still runs (Stop is shown).
    wait(browser, lambda d: len(text_of(d, ".msg.assistant .body")) > 20 and css(d, "#stop")[0].is_displayed(),
         "streamed text arrives before the answer ends")
    css(browser, "#stop")[0].click()
    wait(browser, lambda d: text_of(d, ".msg.assistant .stopped") == "Stopped.", "the page says it stopped")
    assert css(browser, "#send")[0].is_displayed() and not css(browser, "#stop")[0].is_displayed()
    # The aborted fetch closed the connection: the server cancelled the sequence and freed its blocks.
    assert wait_for(lambda: chat_server.metrics()["deskside_running_sequences"] == 0, WAIT)
    m = chat_server.metrics()
    assert m["deskside_generated_tokens_total"] - before < max_tokens
    assert m["deskside_cancelled_sequences_total"] == cancelled + 1
    # The stream is counted when it ends: as 499, its client having gone.
    assert wait_for(lambda: chat_server.metrics().get(closed, 0) == closed_before + 1, WAIT)
    kept = stored_messages(browser)[1]
    assert kept["stopped"] and kept["content"] and "stats" not in kept


XSS = ('<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> '
       '<svg onload="window.__pwned = 3"></svg>')


def test_model_text_is_rendered_as_text(browser, chat_server):
    conv = {"id": "x1", "title": "hostile", "messages": [
        {"role": "user", "content": "<b>question</b>"},
        {"role": "assistant", "content": f"**bold** {XSS}\n\n```html\n{XSS}\n```\n- item `<i>`"}]}
    open_page(browser, chat_server, conversations=[conv])
    body = css(browser, ".msg.assistant .body")[0]
    assert "<script>window.__pwned = 1</script>" in body.text
    assert '<img src=x onerror="window.__pwned = 2">' in body.text
    assert css(browser, ".msg.user .body")[0].text == "<b>question</b>"
    # Formatting still applies around the text; no element came from the text itself.
    assert [e.text for e in css(browser, ".msg.assistant strong")] == ["bold"]
    assert len(css(browser, ".msg.assistant .code .copy")) == 1
    assert not css(browser, "#messages script, #messages img, #messages svg, #messages b, #messages i")
    assert browser.execute_script("return window.__pwned") is None

    # The streamed path: a grammar makes the model itself write the markup, through the same renderer.
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"const": XSS}}}
    open_page(browser, chat_server, settings={"temperature": "0", "extra": json.dumps({"response_format": schema})})
    send(browser, PROMPT)
    wait_answer(browser, 1)
    assert stored_messages(browser)[1]["content"] == json.dumps(XSS)
    assert "<script>window.__pwned = 1</script>" in text_of(browser, ".msg.assistant .body")
    assert not css(browser, "#messages script, #messages img, #messages svg")
    assert browser.execute_script("return window.__pwned") is None


def test_reasoning_and_tool_calls_are_collapsed(browser, chat_server):
    from selenium.webdriver.common.by import By
    conv = {"id": "r1", "title": "thinking", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "answer", "reasoning": "first I think <b>hard</b>",
         "tool_calls": [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]}]}
    open_page(browser, chat_server, conversations=[conv])
    reasoning = css(browser, ".msg.assistant details.reasoning")
    assert len(reasoning) == 1 and reasoning[0].get_attribute("open") is None
    assert reasoning[0].find_element(By.TAG_NAME, "summary").text == "Reasoning"
    assert "first I think <b>hard</b>" in reasoning[0].get_attribute("textContent")
    calls = css(browser, ".msg.assistant details.tool-call")
    assert len(calls) == 1 and calls[0].get_attribute("open") is None
    assert calls[0].find_element(By.TAG_NAME, "summary").text == "Tool call: get_weather"
    assert '{"city": "Paris"}' in calls[0].get_attribute("textContent")

    # Streamed: a named tool choice makes the model call the function; its deltas build the call.
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}}]
    choice = {"type": "function", "function": {"name": "get_weather"}}
    open_page(browser, chat_server, settings={"temperature": "0", "extra": json.dumps({"tools": tools,
                                                                                         "tool_choice": choice})})
    send(browser, PROMPT)
    wait(browser, lambda d: css(d, "#send")[0].is_displayed() and css(d, ".msg.assistant details.tool-call"),
         "the answer ends with its tool call")
    call = stored_messages(browser)[1]["tool_calls"][0]
    assert call["name"] == "get_weather" and isinstance(json.loads(call["arguments"])["city"], str)
    shown = css(browser, ".msg.assistant details.tool-call")[0]
    assert shown.get_attribute("open") is None
    assert shown.find_element(By.TAG_NAME, "summary").text == "Tool call: get_weather"


def test_api_key_is_asked_for_once(browser, start_server):
    server = start_server(STORIES, "--chat-template", TEMPLATE, "--ctx-size", 1024, api_key="webui-secret")
    assert requests.get(server.url + "/", timeout=30).status_code == 200  # the page needs no key
    assert requests.get(server.url + "/v1/deskside/info", timeout=30).status_code == 401
    open_page(browser, server, settings={"temperature": "0", "max_tokens": "16"})
    wait(browser, lambda d: d.execute_script("return document.getElementById('key-dialog').open"), "the key dialog")
    css(browser, "#api-key")[0].send_keys("webui-secret")
    css(browser, "#key-ok")[0].click()
    wait(browser, lambda d: text_of(d, "#model-name") == server.model_id, "the page shows the model")
    assert browser.execute_script("return sessionStorage.getItem('deskside.apiKey')") == "webui-secret"
    send(browser, PROMPT)
    assert "tok/s" in wait_answer(browser, 1)
    assert not browser.execute_script("return document.getElementById('key-dialog').open")


def test_api_errors_are_readable(browser, chat_server):
    open_page(browser, chat_server, settings={"max_tokens": str(CTX * 2)})
    send(browser, PROMPT)
    wait(browser, lambda d: text_of(d, ".msg.assistant .error"), "an error message")
    error = text_of(browser, ".msg.assistant .error")
    assert error.startswith("The server refused the request (400): ") and "context" in error, error
    open_page(browser, chat_server, settings={"extra": json.dumps({"temperature": "hot"})})
    send(browser, PROMPT)
    wait(browser, lambda d: text_of(d, ".msg.assistant .error"), "an error message")
    assert "temperature" in text_of(browser, ".msg.assistant .error")


def test_files_are_served_with_their_types_and_policy(chat_server, start_server):
    total = 0
    kinds = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for file in sorted((REPO / "webui").iterdir()):
        name, kind = file.name, kinds[file.suffix]
        r = requests.get(chat_server.url + ("/" if name == "index.html" else "/webui/" + name), timeout=30)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(kind)
        assert r.content == file.read_bytes()  # the build embedded the files as they are
        csp = r.headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        total += len(r.content)
    assert total < 150_000
    assert not re.search(r"<script(?![^>]*\bsrc=)", requests.get(chat_server.url + "/", timeout=30).text)
    info = chat_server.get("/v1/deskside/info").json()
    assert info == {"model": chat_server.model_id, "context_length": CTX, "devices": info["devices"],
                    "chat_template": True}
    assert info["devices"]  # "cpu", or the devices and their layers

    off = start_server(STORIES, "--no-webui")
    for path in ["/", "/webui/app.js"]:
        r = requests.get(off.url + path, timeout=30)
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
