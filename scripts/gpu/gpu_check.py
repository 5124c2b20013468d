#!/usr/bin/env python3
"""The device check of scripts/gpu-check.sh: one run on an NVIDIA machine, within a time budget.

usage: gpu_check.py BUNDLE_DIR OUT_DIR   (BUNDLE_DIR made by scripts/gpu-bundle.sh; see docs/CUDA.md)

Steps (each with a time budget; each ends pass, fail, skip or timeout, with its seconds and why):
  0  the bundle's binaries start here
  a  `deskside devices --json`: the device, its memory and features, driver and toolkit versions
  b  `deskside_tests "[backend-ops]"` with DESKSIDE_REQUIRE_DEVICES=DEVICE: every op and weight type
     on the device against the CPU
  c  `deskside_tests "[API-reference]"` and `"[API-generation]"` on the bundle's models and
     llama.cpp references (DESKSIDE_SHARED_DIR=BUNDLE/shared)
  d  greedy tokens of `deskside generate` on DEVICE, on two logical devices (DESKSIDE_API_SPLIT=2)
     and on DEVICE,cpu, each equal to the CPU's, on stories260K and synth-k
  e  `deskside serve --devices DEVICE`: a chat completion and the same one streamed (official openai
     client if importable, else urllib with the same JSON and SSE parsing)
  f  speed: the device's memory bandwidth (scripts/gpu/bandwidth.cu), `deskside bench` pp512/tg128 on
     Llama-3-8B-shaped Q4_0, Q4_K_M and Q8_0 files written here by scripts/make-llama8b-shaped.py
     (in the background while a-e run), and tg128 x bytes read per token / bandwidth
  g  the same op suite and one bench on vulkan0 where the NVIDIA Vulkan driver is present (optional)
Writes OUT_DIR/gpu-check.md (the table), gpu-check.json, gpu-check.log (every command's output) and
devices.json. Exit status: 1 if a step failed, 3 if none failed but a correctness step timed out, else 0.

Environment: DEVICE (cuda0; cpu or vulkan0 try the check where there is no CUDA device), DRY_RUN=1
(tiny synthetic models, shorter budgets, DEVICE cpu unless set: the table logic on any machine),
TOTAL_BUDGET_S (470), BENCH_REPS (2), SCRATCH_DIR (where the 8B files go; a temporary folder),
STEPS (e.g. "b,c": only those steps after 0 and a, for a shorter rerun),
VULKAN_FATAL=1 (let a failing step g fail the check; by default it is reported, not counted).
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

DRY_RUN = os.environ.get("DRY_RUN", "") == "1"
DEVICE = os.environ.get("DEVICE") or ("cpu" if DRY_RUN else "cuda0")
API = re.sub(r"\d+$", "", DEVICE)
TOTAL_BUDGET_S = float(os.environ.get("TOTAL_BUDGET_S", "300" if DRY_RUN else "470"))
BENCH_REPS = os.environ.get("BENCH_REPS", "2")
VULKAN_FATAL = os.environ.get("VULKAN_FATAL", "") == "1"
STEPS = set(filter(None, os.environ.get("STEPS", "").replace(" ", "").split(",")))
LOG_PER_COMMAND, LOG_TOTAL = 1_000_000, 15_000_000  # bytes of output kept (files back: 16 MiB each)


def find_nvidia_icd() -> str:
    """The NVIDIA driver's Vulkan ICD manifest: where the device notes put it, the standard folders,
    then anywhere under the driver's mount (the first run found none at the first path)."""
    import glob  # noqa: PLC0415
    for path in ("/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json", "/usr/share/vulkan/icd.d/nvidia_icd.json",
                 "/etc/vulkan/icd.d/nvidia_icd.json", "/usr/local/share/vulkan/icd.d/nvidia_icd.json"):
        if os.path.exists(path):
            return path
    found = sorted(glob.glob("/usr/local/nvidia/**/nvidia_icd*.json", recursive=True) +
                   glob.glob("/usr/share/**/nvidia_icd*.json", recursive=True))
    return found[0] if found else "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"


NVIDIA_ICD = find_nvidia_icd()
HIDE_VULKAN = {"VK_DRIVER_FILES": "/nonexistent/gpu-check-hides-vulkan.json",
               "VK_ICD_FILENAMES": "/nonexistent/gpu-check-hides-vulkan.json"}

# Budgets in seconds: the sum of the required steps stays under TOTAL_BUDGET_S; tests usually end
# well before their budget. g gets what is left.
BUDGET = {"bundle": 20, "devices": 15, "backend-ops": 90, "reference": 55, "generation": 45, "greedy": 45,
          "serve": 35, "bandwidth": 15, "bench": 45, "vk-ops": 60, "vk-bench": 40, "per-case": 75}
if DRY_RUN:
    BUDGET.update({"backend-ops": 40, "reference": 30, "generation": 30, "bench": 20})


def selected(step_id: str) -> bool:
    return not STEPS or step_id in STEPS


class Check:
    def __init__(self, bundle: str, out: str):
        self.bundle = os.path.abspath(bundle)
        self.out = os.path.abspath(out)
        self.start = time.monotonic()
        self.deadline = self.start + TOTAL_BUDGET_S
        self.steps: list[dict] = []
        self.info: dict = {"device_under_test": DEVICE, "dry_run": DRY_RUN}
        self.log = open(os.path.join(self.out, "gpu-check.log"), "w", encoding="utf-8", errors="replace")
        self.run_sh = os.path.join(self.bundle, "run")
        self.shared = os.path.join(self.bundle, "shared")
        self.device_ok = True
        self.broken = ""  # why nothing can run, once step 0 failed
        self.hide_vulkan = API != "vulkan"
        self.per_case_left = BUDGET["per-case"]  # all per-case reruns together

    # ---- bookkeeping --------------------------------------------------------------------------
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, sid: str, name: str, kind: str, status: str, seconds: float, budget: float, detail: str,
               data: dict | None = None) -> dict:
        step = {"id": sid, "name": name, "kind": kind, "status": status, "seconds": round(seconds, 1),
                "budget_s": round(budget), "detail": detail, "data": data or {}}
        self.steps.append(step)
        print(f"gpu-check: [{status.upper():7}] {sid} {name} ({seconds:.1f} s): {detail}", flush=True)
        return step

    def skip(self, sid: str, name: str, kind: str, why: str) -> dict:
        return self.record(sid, name, kind, "skip", 0, 0, why)

    def budget(self, key: str) -> float:
        return max(0.0, min(BUDGET[key], self.left()))

    def cmd(self, argv: list[str], timeout: float, env: dict | None = None) -> tuple[int | None, str, float]:
        """Runs argv (stdout+stderr together) for at most timeout s; rc None on timeout."""
        full_env = dict(os.environ, **(env or {}))
        t0 = time.monotonic()
        self.log.write(f"\n===== {' '.join(argv)}\n===== env: {env or {}} timeout {timeout:.0f} s\n")
        self.log.flush()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env,
                             start_new_session=True, text=True, errors="replace")
        try:
            output, _ = p.communicate(timeout=max(timeout, 0.1))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            output, _ = p.communicate()
            rc = None
        seconds = time.monotonic() - t0
        kept = output[-LOG_PER_COMMAND:] if self.log.tell() < LOG_TOTAL else "(output not kept: the log is full)"
        self.log.write(kept)
        self.log.write(f"\n===== rc {rc}, {seconds:.1f} s\n")
        self.log.flush()
        return rc, output, seconds

    def deskside(self, *args: str) -> list[str]:
        return [self.run_sh, "deskside", *args]

    def test_env(self, extra: dict | None = None) -> dict:
        # The CPU side of every comparison at its AVX2 level: the bits each CUDA op reproduces
        # (docs/CUDA.md); a device's host may well have AVX-512.
        env = {"DESKSIDE_SHARED_DIR": self.shared, "DESKSIDE_TEST_BINARY": os.path.join(self.bundle, "deskside"),
               "DESKSIDE_CPU_ISA": "avx2"}
        if self.hide_vulkan:
            env.update(HIDE_VULKAN)  # the CUDA steps test CUDA; vulkan0 (the same GPU) has step g
        env.update(extra or {})
        return env

    def model(self, stem: str) -> str:
        return os.path.join(self.shared, "models", stem + ".gguf")

    # ---- 0: the bundle runs here ------------------------------------------------------------------
    def step_bundle(self) -> None:
        name = "bundle unpacks and its binaries start"
        try:
            self.info["bundle"] = json.load(open(os.path.join(self.bundle, "manifest.json")))
        except OSError as e:
            self.broken = f"no bundle at {self.bundle}: {e}"
            self.record("0", name, "correctness", "fail", 0, 0, self.broken)
            return
        rc, output, s = self.cmd(self.deskside("--version"), self.budget("bundle"))
        if rc == 0:
            b = self.info["bundle"]
            self.record("0", name, "correctness", "pass", s, BUDGET["bundle"],
                        f"{output.strip()}, commit {b['commit']}{' (dirty)' if b['dirty'] else ''}, "
                        f"CUDA {b['deskside_cuda']} sm_{b['cuda_archs']}, nvcc {b['nvcc']}")
            return
        _, trace, _ = self.cmd(self.deskside(), 20, {"DESKSIDE_BUNDLE_LDD": "1"})
        missing = sorted({line.split()[0] for line in trace.splitlines() if "not found" in line})
        self.broken = "deskside does not start here: " + (
            "missing libraries " + ", ".join(missing) if missing else (output.strip().splitlines() or ["?"])[-1])
        self.record("0", name, "correctness", "fail" if rc is not None else "timeout", s, BUDGET["bundle"], self.broken)

    # ---- a: devices ---------------------------------------------------------------------------------
    def step_devices(self) -> None:
        name = "deskside devices --json"
        env = {}
        if os.path.exists(NVIDIA_ICD) and not os.environ.get("VK_DRIVER_FILES"):
            env["VK_DRIVER_FILES"] = NVIDIA_ICD
        rc, output, s = self.cmd(self.deskside("devices", "--json"), self.budget("devices"), env)
        versions = self.versions()
        try:
            listing = json.loads(output[output.index("{"):])
        except ValueError:
            self.device_ok = False
            self.record("a", name, "correctness", "fail" if rc is not None else "timeout", s, BUDGET["devices"],
                        f"rc {rc}, no JSON: {output.strip()[-200:]}", versions)
            return
        with open(os.path.join(self.out, "devices.json"), "w") as f:
            json.dump({"deskside": listing, "versions": versions}, f, indent=2)
        self.info["devices"] = listing
        self.info["versions"] = versions
        dev = next((d for d in listing.get("devices", []) if d.get("name") == DEVICE), None)
        self.info["vulkan0"] = next((d for d in listing.get("devices", []) if d.get("name") == "vulkan0"), None)
        if dev is None or not dev.get("usable", False):
            self.device_ok = False
            why = listing.get(f"no_{API}_reason") or (dev or {}).get("note") or "not listed"
            self.record("a", name, "correctness", "fail", s, BUDGET["devices"], f"{DEVICE} unusable: {why}", versions)
            return
        gib = dev.get("total_memory", 0) / 2**30
        feats = " ".join(dev.get("features", []))
        extra = "; ".join(f"{k} {v}" for k, v in versions.items() if v)
        self.record("a", name, "info", "pass", s, BUDGET["devices"],
                    f"{DEVICE}: {dev.get('description')}, {gib:.1f} GiB, features: {feats or '-'}; {extra}",
                    {"device": dev, "versions": versions})

    def versions(self) -> dict:
        v: dict = {"host": platform.node(), "kernel": platform.release()}
        if shutil.which("nvidia-smi"):
            try:
                q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                                    "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
                first = q.strip().splitlines()[0].split(", ")
                v.update(gpu=first[0], driver=first[1], memory=first[2], compute_capability=first[3])
            except (subprocess.SubprocessError, IndexError, OSError):
                pass
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        if not os.path.exists(nvcc):
            nvcc = ""
        if nvcc:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"release ([0-9.]+)", out)
            v["nvcc"] = m.group(1) if m else "?"
        return v

    # ---- b, c: the Catch2 suites ----------------------------------------------------------------------
    def catch2(self, sid: str, key: str, tag: str, extra_env: dict, kind: str = "correctness") -> dict:
        name = f'deskside_tests "{tag}" on {extra_env.get("DESKSIDE_REQUIRE_DEVICES", DEVICE)}'
        if not self.info.get("bundle", {}).get("deskside_tests", False):
            return self.skip(sid, name, kind, "deskside_tests is not in the bundle (it did not build)")
        budget = self.budget(key)
        if budget < 5:
            return self.skip(sid, name, kind, "no time left in the total budget")
        rc, output, s = self.cmd([self.run_sh, "deskside_tests", tag, "--durations", "yes"], budget,
                                 self.test_env(extra_env))
        summary = self.catch2_summary(output)
        if "No test cases matched" in output or "No tests ran" in output:
            return self.record(sid, name, kind, "skip", s, budget, f"no test has the tag {tag} in this build")
        if rc is None:
            step = self.record(sid, name, kind, "timeout", s, budget, f"stopped after {s:.0f} s; {summary}")
        else:
            step = self.record(sid, name, kind, "pass" if rc == 0 else "fail", s, budget, summary)
        if step["status"] == "fail":
            self.catch2_cases(sid, tag, extra_env, kind)
        return step

    def catch2_cases(self, sid: str, tag: str, extra_env: dict, kind: str) -> None:
        """After a suite failed or timed out: each of its test cases alone, in its own process, with
        CUDA_LAUNCH_BLOCKING=1, so that a sticky device error in one case cannot fail the others and
        an error is reported at the launch that caused it (rows sid.1, sid.2, ...)."""
        budget = min(self.per_case_left, self.left() - 30)
        if budget < 10:
            return
        t0 = time.monotonic()
        deadline = t0 + budget
        env = self.test_env(dict(extra_env, CUDA_LAUNCH_BLOCKING="1"))
        rc, listing, _ = self.cmd([self.run_sh, "deskside_tests", tag, "--list-test-names-only"], 20, env)
        names = [line.strip() for line in listing.splitlines() if line.strip()] if rc is not None else []
        if len(names) < 2:  # one case: its failure is already in the row above
            return
        for i, case in enumerate(names, 1):
            left = deadline - time.monotonic()
            row = f"{sid}.{i}"
            if left < 3:
                self.skip(row, case[:90], kind, "no time left for the per-case reruns")
                continue
            spec = re.sub(r"([,\[\]\\])", r"\\\1", case)
            rc, output, s = self.cmd([self.run_sh, "deskside_tests", spec], left, env)
            summary = self.catch2_summary(output)
            errors = sorted(set(re.findall(r"cuda[^\n]{0,80}?: (cuda[A-Za-z]+)", output)))
            if errors:
                summary += "; " + ", ".join(errors[:3])
            status = "timeout" if rc is None else ("pass" if rc == 0 else "fail")
            self.record(row, case[:90], "diagnostic", status, s, 0, summary)
        self.per_case_left -= time.monotonic() - t0

    @staticmethod
    def catch2_summary(output: str) -> str:
        lines = output.splitlines()
        total = next((line.strip() for line in reversed(lines)
                      if line.startswith("All tests passed") or line.startswith("test cases:")), "no summary")
        failed, current, prev = [], "", ""
        for i, line in enumerate(lines):
            if prev.startswith("-----") and i + 1 < len(lines) and lines[i + 1].startswith("-----"):
                current = line.strip()
            if "FAILED:" in line and current and current not in failed:
                failed.append(current)
            prev = line
        warned = [lines[i + 1].strip() for i, line in enumerate(lines[:-1]) if line.rstrip().endswith("warning:")]
        text = total + (f"; {len(warned)} warnings (skips), first: {warned[0][:120]}" if warned else "")
        if failed:
            text += "; failed: " + "; ".join(failed[:3]) + (f" (+{len(failed) - 3})" if len(failed) > 3 else "")
        return text

    # ---- d: greedy tokens of generate on each placement against the CPU --------------------------------
    def generate(self, model: str, devices: str, timeout: float, env: dict | None = None,
                 split: str | None = None) -> tuple[list | None, str, float]:
        args = ["generate", "-m", model, "-p", self.prompt(), "-n", "32", "--temp", "0", "--json",
                "--devices", devices]
        if split:
            args += ["--split", split]
        rc, output, s = self.cmd(self.deskside(*args), timeout, self.test_env(env))
        if rc is None:
            return None, f"timed out after {s:.0f} s", s
        for line in output.splitlines():
            if line.startswith("{"):
                try:
                    return json.loads(line)["tokens"], "", s
                except (ValueError, KeyError):
                    pass
        return None, f"rc {rc}: {(output.strip().splitlines() or ['no output'])[-1][:200]}", s

    def prompt(self) -> str:
        path = os.path.join(self.shared, "reference", "prompts-stories.txt")
        if os.path.exists(path):
            first = open(path, encoding="utf-8").readline().strip()
            if first:
                return first
        return "Once upon a time"

    def step_greedy(self) -> None:
        models = [m for m in ("stories260K",) if os.path.exists(self.model(m))]
        synth = [m for m in ("synth-k", "synth-k-q8_0", "synth-k-q4_k_m") if os.path.exists(self.model(m))]
        models += synth[:1]
        split_env = {f"DESKSIDE_{API.upper()}_SPLIT": "2"}
        if API == "cpu":
            placements = [("cpu,cpu", {}, "1,1")]
        else:
            placements = [(DEVICE, {}, None), (f"{API}0,{API}1", split_env, "1,1"), (f"{DEVICE},cpu", {}, "1,1")]
        group_deadline = time.monotonic() + self.budget("greedy")
        for stem in models:
            base, why, s0 = self.generate(self.model(stem), "cpu", max(0.0, group_deadline - time.monotonic()))
            for devices, env, split in placements:
                name = f"greedy 32 tokens, {stem} on {devices} = cpu"
                if base is None:
                    self.record("d", name, "correctness", "fail" if "timed out" not in why else "timeout", s0,
                                BUDGET["greedy"], f"the CPU run failed: {why}")
                    continue
                left = group_deadline - time.monotonic()
                if left < 2:
                    self.skip("d", name, "correctness", "no time left in the step's budget")
                    continue
                toks, why2, s = self.generate(self.model(stem), devices, left, env, split)
                if toks is None:
                    self.record("d", name, "correctness", "timeout" if "timed out" in why2 else "fail", s,
                                BUDGET["greedy"], why2)
                elif toks == base:
                    self.record("d", name, "correctness", "pass", s, BUDGET["greedy"], f"{len(toks)} tokens equal")
                else:
                    i = next((k for k, (a, b) in enumerate(zip(toks, base)) if a != b), min(len(toks), len(base)))
                    self.record("d", name, "correctness", "fail", s, BUDGET["greedy"],
                                f"differs from token {i}: {toks[i:i + 4]} vs cpu {base[i:i + 4]}",
                                {"tokens": toks, "cpu": base})
        if not models:
            self.skip("d", "greedy placements", "correctness", "neither stories260K nor synth-k is in the bundle")

    # ---- e: serve, chat and streamed chat ------------------------------------------------------------------
    def step_serve(self) -> None:
        name = f"serve --devices {DEVICE}: chat + streamed chat"
        budget = self.budget("serve")
        if budget < 5:
            self.skip("e", name, "correctness", "no time left in the total budget")
            return
        t0 = time.monotonic()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        template = os.path.join(self.shared, "templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
        argv = self.deskside("serve", "-m", self.model("stories260K"), "--devices", DEVICE, "--host", "127.0.0.1",
                             "--port", str(port), "--chat-template", template, "--shutdown-grace", "2")
        self.log.write(f"\n===== {' '.join(argv)} (background)\n")
        self.log.flush()
        proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **self.test_env()), start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        client = "urllib"
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"deskside serve exited with {proc.returncode} (gpu-check.log)")
                try:
                    with urllib.request.urlopen(url + "/health", timeout=1) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if time.monotonic() - t0 > budget:
                    raise TimeoutError("not healthy within the budget")
                time.sleep(0.1)
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                model_id = json.load(r)["data"][0]["id"]
            body = {"model": model_id, "max_tokens": 24, "temperature": 0,
                    "messages": [{"role": "user", "content": "Tell me a story about a cat."}]}
            timeout = max(1.0, budget - (time.monotonic() - t0))
            try:
                import openai  # noqa: PLC0415 (optional: absent on the bare GPU image)
                client = f"openai {openai.__version__}"
                text, finish, usage, streamed, chunks = chat_openai(openai, url, body, timeout)
            except ImportError:
                text, finish, usage, streamed, chunks = chat_urllib(url, body, timeout)
            problems = []
            if not text:
                problems.append("empty completion")
            if finish not in ("stop", "length"):
                problems.append(f"finish_reason {finish!r}")
            if streamed != text:
                problems.append(f"streamed text differs: {streamed[:60]!r} vs {text[:60]!r}")
            if chunks < 2:
                problems.append(f"{chunks} stream chunks")
            status = "fail" if problems else "pass"
            detail = "; ".join(problems) if problems else \
                f"{usage} completion tokens, {chunks} chunks streamed, same text ({client}): {text[:40]!r}"
            self.record("e", name, "correctness", status, time.monotonic() - t0, budget, detail, {"client": client})
        except TimeoutError as e:
            self.record("e", name, "correctness", "timeout", time.monotonic() - t0, budget, f"{e} ({client})")
        except Exception as e:  # noqa: BLE001 (any client or server error is this step's failure)
            self.record("e", name, "correctness", "fail", time.monotonic() - t0, budget,
                        f"{type(e).__name__}: {str(e)[:200]} ({client})")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    # ---- f: bandwidth and bench ----------------------------------------------------------------------------
    def start_writers(self) -> None:
        """Writes the three synthetic files in the background while a-e run."""
        self.writers = {}
        self.scratch = ""
        kind = "tiny" if DRY_RUN else "8B"
        need = 20 * 2**30 if kind == "8B" else 2**24
        base = os.environ.get("SCRATCH_DIR") or tempfile.gettempdir()
        free = shutil.disk_usage(base).free
        if free < need:
            self.writers_why = f"{free / 2**30:.1f} GiB free in {base}, {need / 2**30:.0f} GiB needed"
            return
        self.scratch = tempfile.mkdtemp(prefix="gpu-check-", dir=base)
        writer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "make-llama8b-shaped.py")
        for qtype in ("q4_0", "q4_k_m", "q8_0"):
            path = os.path.join(self.scratch, f"llama8b-shaped-{qtype}.gguf")
            argv = [sys.executable, writer, path, "--type", qtype] + (["--tiny"] if DRY_RUN else [])
            self.writers[qtype] = (subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                                   path, time.monotonic())

    def step_bandwidth(self) -> None:
        name = f"memory bandwidth of {DEVICE} (copy kernel, 2 GiB)"
        self.bandwidth = None
        if API != "cuda":
            self.skip("f", name, "speed", f"the probe is CUDA; DEVICE is {DEVICE}")
            return
        if not self.info.get("bundle", {}).get("bandwidth_probe"):
            self.skip("f", name, "speed", "the bundle has no bandwidth probe (no nvcc where it was built)")
            return
        rc, output, s = self.cmd([self.run_sh, "bandwidth", "2048", "10", DEVICE[len(API):]], self.budget("bandwidth"))
        m = re.search(r"\{.*\}", output)
        if rc != 0 or not m:
            self.record("f", name, "speed", "timeout" if rc is None else "fail", s, BUDGET["bandwidth"],
                        (output.strip().splitlines() or ["no output"])[-1][:200])
            return
        self.bandwidth = json.loads(m.group(0))
        self.record("f", name, "speed", "pass", s, BUDGET["bandwidth"],
                    f"copy {self.bandwidth['copy_gbps']:.0f} GB/s (read + write), "
                    f"read {self.bandwidth['read_gbps']:.0f} GB/s",
                    self.bandwidth)

    def step_bench(self, qtype: str, device: str, sid: str = "f", key: str = "bench", kind: str = "speed",
                   env: dict | None = None) -> None:
        label = {"q4_0": "Q4_0", "q4_k_m": "Q4_K_M", "q8_0": "Q8_0"}[qtype]
        shape = "tiny Llama-shaped" if DRY_RUN else "Llama-3-8B-shaped"
        name = f"bench pp512 + tg128, {shape} {label}, {device}"
        if qtype not in self.writers:
            self.skip(sid, name, kind, getattr(self, "writers_why", "the synthetic files were not written"))
            return
        proc, path, t_start = self.writers[qtype]
        budget = self.budget(key)
        t0 = time.monotonic()
        try:
            proc.wait(max(0.1, budget))
        except subprocess.TimeoutExpired:
            self.record(sid, name, kind, "timeout", time.monotonic() - t0, budget, "the file was still being written")
            return
        stats_line = proc.stdout.read() if proc.stdout else ""
        if proc.returncode != 0:
            self.record(sid, name, kind, "fail", 0, budget, f"make-llama8b-shaped.py: {stats_line.strip()[-200:]}")
            return
        stats = gguf_stats(path)
        left = budget - (time.monotonic() - t0)
        if left < 3:
            self.skip(sid, name, kind, "no time left in the step's budget")
            return
        rc, output, s = self.cmd(self.deskside("bench", "-m", path, "--devices", device, "-p", "512", "-n", "128",
                                               "-r", BENCH_REPS, "--json"), left, self.test_env(env))
        results = {}
        try:
            for r in json.loads(output[output.index("["):output.rindex("]") + 1]):
                results[r["test"]] = r["avg_ts"]
        except (ValueError, KeyError, TypeError):
            pass
        if rc != 0 or "tg128" not in results:
            last = (output.strip().splitlines() or ["-"])[-1][:200]
            why = f"stopped after {s:.0f} s" if rc is None else f"rc {rc}: {last}"
            self.record(sid, name, kind, "timeout" if rc is None else "fail", s, budget, why, stats)
            return
        tg, pp = results["tg128"], results.get("pp512", 0.0)
        achieved = tg * stats["bytes_per_token"] / 1e9
        per_token = stats["bytes_per_token"]
        read = f"{per_token / 1e9:.2f} GB" if per_token >= 1e8 else f"{per_token / 1e6:.2f} MB"
        detail = f"pp512 {pp:.1f} t/s, tg128 {tg:.1f} t/s; {read} read per token -> {achieved:.1f} GB/s"
        if self.bandwidth:  # measured on this GPU (vulkan0 in step g is the same chip)
            detail += f" = {100 * achieved / self.bandwidth['read_gbps']:.0f}% of read, " \
                      f"{100 * achieved / self.bandwidth['copy_gbps']:.0f}% of copy bandwidth"
        self.record(sid, name, kind, "pass", s, budget, detail, dict(stats, pp512=pp, tg128=tg, achieved_gbps=achieved))

    # ---- g: vulkan0 on the NVIDIA driver (optional) ------------------------------------------------------------
    def step_vulkan(self) -> None:
        kind = "vulkan"
        vk = self.info.get("vulkan0")
        why = ""
        if API != "cuda":
            why = "only in the CUDA check"
        elif vk is None:
            reason = self.info.get("devices", {}).get("no_vulkan_reason", "")
            why = "no vulkan0" + (f": {reason}" if reason else "") + \
                  ("" if os.path.exists(NVIDIA_ICD) else f" (no {NVIDIA_ICD})")
        elif "nvidia" not in vk.get("description", "").lower():
            why = f"vulkan0 is {vk.get('description')}, not the NVIDIA driver"
        if why:
            self.skip("g", "vulkan0 (NVIDIA Vulkan driver): backend-ops + bench Q4_0", kind, why)
            return
        env = {"DESKSIDE_REQUIRE_DEVICES": "vulkan0"}
        if os.path.exists(NVIDIA_ICD) and not os.environ.get("VK_DRIVER_FILES"):
            env["VK_DRIVER_FILES"] = NVIDIA_ICD
        self.hide_vulkan = False
        self.catch2("g", "vk-ops", "[backend-ops]", env, kind)
        self.step_bench("q4_0", "vulkan0", "g", "vk-bench", kind, env)

    # ---- the whole run ------------------------------------------------------------------------------------------
    def run(self) -> int:
        self.step_bundle()
        if self.broken:
            return self.finish()
        self.step_devices()
        if not self.device_ok:
            self.skip("b-g", "every step on the device", "correctness", f"{DEVICE} is not usable (step a)")
            return self.finish()
        if selected("f") or selected("g"):
            self.start_writers()
        require = {"DESKSIDE_REQUIRE_DEVICES": DEVICE}
        if API == "cpu":
            self.skip("b-c", "deskside_tests suites", "correctness", "DEVICE=cpu: no device to compare with the CPU")
        else:
            if selected("b"):
                self.catch2("b", "backend-ops", "[backend-ops]", require)
                # The backend's own tests (graphs, allocation errors, registry) and the op-by-op mirror of
                # a whole model against the CPU: where [backend-ops] passes and a model does not, the
                # mirror names the first op that differs.
                mirror = "[device-mirror]~[vulkan],[device-mirror-families]"
                self.catch2("b", "backend-ops", f"[{API}-backend],{mirror}", require)
            if selected("c"):
                self.catch2("c", "reference", f"[{API}-reference]", require)
                self.catch2("c", "generation", f"[{API}-generation]", require)
        if selected("d"):
            self.step_greedy()
        if selected("e"):
            self.step_serve()
        if selected("f"):
            self.step_bandwidth()
            for qtype in ("q4_0", "q4_k_m", "q8_0"):
                self.step_bench(qtype, DEVICE)
        if selected("g"):
            self.step_vulkan()
        skipped = [sid for sid in "bcdefg" if not selected(sid)]
        if skipped:
            self.skip(",".join(skipped), "steps not in STEPS", "info", f"STEPS={os.environ.get('STEPS')}")
        return self.finish()

    def finish(self) -> int:
        for proc, _, _ in getattr(self, "writers", {}).values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if getattr(self, "scratch", ""):
            shutil.rmtree(self.scratch, ignore_errors=True)

        def counts(step: dict) -> bool:
            return step["kind"] != "vulkan" or VULKAN_FATAL

        failed = [s for s in self.steps if s["status"] == "fail" and counts(s)]
        timed_out = [s for s in self.steps if s["status"] == "timeout" and s["kind"] == "correctness"]
        result = "fail" if failed else ("incomplete" if timed_out else "pass")
        total = time.monotonic() - self.start
        self.info.update(result=result, seconds=round(total, 1), total_budget_s=TOTAL_BUDGET_S,
                         finished=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
        table = self.table(result, total)
        with open(os.path.join(self.out, "gpu-check.md"), "w") as f:
            f.write(table)
        with open(os.path.join(self.out, "gpu-check.json"), "w") as f:
            json.dump({"info": self.info, "steps": self.steps}, f, indent=2)
        print("\n" + table, flush=True)
        self.log.close()
        return 1 if failed else (3 if timed_out else 0)

    def table(self, result: str, total: float) -> str:
        v = self.info.get("versions", {})
        b = self.info.get("bundle", {})
        head = [f"### {self.info['finished']}: {v.get('gpu', DEVICE)}" + (" (dry run)" if DRY_RUN else ""),
                "",
                f"device under test {DEVICE}; driver {v.get('driver', '-')}, compute capability "
                f"{v.get('compute_capability', '-')}, nvcc {v.get('nvcc', '-')} there; bundle commit "
                f"{b.get('commit', '-')}{' (dirty)' if b.get('dirty') else ''}, built {b.get('built', '-')} for "
                f"sm_{b.get('cuda_archs', '-')} (CUDA backend {b.get('deskside_cuda', '-')}); "
                f"{total:.0f} s of a {TOTAL_BUDGET_S:.0f} s budget; result **{result}**",
                "",
                "| step | check | result | s | budget s | detail |",
                "|---|---|---|---:|---:|---|"]
        rows = [f"| {s['id']} | {s['name']} | {s['status']}"
                f"{'' if s['kind'] != 'vulkan' or VULKAN_FATAL or s['status'] != 'fail' else ' (not counted)'} | "
                f"{s['seconds']:.1f} | {s['budget_s']} | {s['detail'].replace('|', '/')} |" for s in self.steps]
        return "\n".join(head + rows) + "\n"


def chat_openai(openai, url: str, body: dict, timeout: float):
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=timeout)
    r = client.chat.completions.create(**body)
    text = r.choices[0].message.content or ""
    streamed, chunks = "", 0
    for chunk in client.chat.completions.create(**body, stream=True):
        chunks += 1
        if chunk.choices and chunk.choices[0].delta.content:
            streamed += chunk.choices[0].delta.content
    return text, r.choices[0].finish_reason, r.usage.completion_tokens if r.usage else "?", streamed, chunks


def chat_urllib(url: str, body: dict, timeout: float):
    def post(payload: dict):
        req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer none"})
        return urllib.request.urlopen(req, timeout=timeout)

    with post(body) as r:
        j = json.load(r)
    text = j["choices"][0]["message"]["content"] or ""
    streamed, chunks, done = "", 0, False
    with post(dict(body, stream=True)) as r:
        for raw in r:  # server-sent events: "data: {json}" lines, blank lines between, "data: [DONE]" last
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            chunks += 1
            choices = json.loads(data).get("choices") or []
            if choices and choices[0].get("delta", {}).get("content"):
                streamed += choices[0]["delta"]["content"]
    if not done:
        raise RuntimeError("the stream ended without data: [DONE]")
    return text, j["choices"][0]["finish_reason"], j.get("usage", {}).get("completion_tokens", "?"), streamed, chunks


def gguf_stats(path: str) -> dict:
    """Tensor bytes from a GGUF's tensor table: total, and read per decoded token (every tensor but
    token_embd, plus one row of it). A tensor's size is the distance to the next tensor's offset."""
    with open(path, "rb") as f:
        def u32():
            return struct.unpack("<I", f.read(4))[0]

        def u64():
            return struct.unpack("<Q", f.read(8))[0]

        def string():
            return f.read(u64()).decode("utf-8", "replace")

        scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def skip_value(t: int):
            if t == 8:
                f.seek(u64(), 1)
            elif t == 9:
                et, n = u32(), u64()
                if et in scalar:
                    f.seek(scalar[et] * n, 1)
                else:
                    for _ in range(n):
                        skip_value(et)
            else:
                f.seek(scalar[t], 1)

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        u32()
        n_tensors, n_kv = u64(), u64()
        alignment = 32
        for _ in range(n_kv):
            key, t = string(), u32()
            if key == "general.alignment" and t == 4:
                alignment = u32()
            else:
                skip_value(t)
        tensors = []
        for _ in range(n_tensors):
            name = string()
            ne = [u64() for _ in range(u32())]
            u32()
            tensors.append((u64(), name, ne))
        data_start = (f.tell() + alignment - 1) // alignment * alignment
        end = os.fstat(f.fileno()).st_size - data_start
    tensors.sort()
    sizes = {name: (tensors[i + 1][0] if i + 1 < len(tensors) else end) - off
             for i, (off, name, _) in enumerate(tensors)}
    total = sum(sizes.values())
    per_token = total
    for _, name, ne in tensors:
        if name == "token_embd.weight" and len(ne) == 2:
            per_token = total - sizes[name] + sizes[name] // ne[1]
    return {"file": os.path.basename(path), "weight_bytes": total, "bytes_per_token": per_token}


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    os.makedirs(sys.argv[2], exist_ok=True)
    return Check(sys.argv[1], sys.argv[2]).run()


if __name__ == "__main__":
    sys.exit(main())
