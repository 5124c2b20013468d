"""`deskside serve --devices vulkan0` through the official openai client: a short part of the API
suite that runs in every test run (lavapipe where no GPU exists), checked against llama.cpp's
greedy outputs and against the same requests on the CPU server. The whole suite runs on a device
with DESKSIDE_TEST_DEVICES=vulkan0 (serve_helpers.py). Skipped where no Vulkan device exists, failed
where DESKSIDE_REQUIRE_DEVICES names vulkan0 (CI)."""
import concurrent.futures

import pytest

from serve_helpers import STORIES, TEMPLATE, device_required, has_device, skip_or_fail

MSGS = [{"role": "system", "content": "You tell short stories."},
        {"role": "user", "content": "Tell me about a cat and a dog."}]


@pytest.fixture(scope="module")
def vk(start_server):
    if not has_device("vulkan0"):
        skip_or_fail("no usable vulkan0 device (deskside devices): the Vulkan API tests are skipped",
                     device_required("vulkan0"))
    return start_server(STORIES, "--devices", "vulkan0", "--chat-template", TEMPLATE, "--parallel", 4,
                        "--ctx-size", 1024)


def test_vulkan_greedy_matches_llama_cpp(vk, reference):
    c = vk.client()
    for ref in reference["cases"][:2]:  # two of the five prompts: CI time
        out = c.completions.create(model="stories260K", prompt=ref["prompt_tokens"],
                                   max_tokens=len(ref["greedy_tokens"]), temperature=0)
        assert out.choices[0].text == ref["greedy_text"]
        assert out.usage.completion_tokens == len(ref["greedy_tokens"])


def test_vulkan_chat_equals_cpu_and_streams_the_same(vk, stories):
    """`stories` is the suite's CPU server (unless DESKSIDE_TEST_DEVICES moves it too)."""
    on_vk = vk.client().chat.completions.create(model="stories260K", messages=MSGS, max_tokens=24, temperature=0)
    on_cpu = stories.client().chat.completions.create(model="stories260K", messages=MSGS, max_tokens=24, temperature=0)
    assert on_vk.choices[0].message.content == on_cpu.choices[0].message.content
    assert on_vk.usage.prompt_tokens == on_cpu.usage.prompt_tokens
    assert on_vk.choices[0].finish_reason == on_cpu.choices[0].finish_reason
    chunks = list(vk.client().chat.completions.create(model="stories260K", messages=MSGS, max_tokens=24,
                                                      temperature=0, stream=True))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == on_vk.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [on_vk.choices[0].finish_reason]


def test_vulkan_concurrent_requests_equal_alone(vk, reference):
    """Requests batched together on the device give the tokens each gives alone (DESIGN.md
    decision 5 holds on Vulkan too)."""
    c = vk.client()
    prompts = [case["prompt"] for case in reference["cases"][:3]]

    def run(prompt):
        return c.completions.create(model="stories260K", prompt=prompt, max_tokens=16, temperature=0).choices[0].text

    alone = [run(p) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(run, prompts))
    assert together == alone
