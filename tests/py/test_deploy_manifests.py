"""deploy/kubernetes/*.yaml: every object passes kubernetes-validate (PyPI; it ships the Kubernetes API's
JSON schemas, so this runs offline) in strict mode, which rejects unknown fields, against the oldest
Kubernetes the manifests support (1.30: preStop's sleep action is on by default from there) and the
newest the validator knows; and the manifests agree with deskside itself: every flag they pass exists,
the probes, ports and grace periods fit --shutdown-grace and /health, and the metric the HPA scales on
is one /metrics exports."""
import copy
import pathlib
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

try:
    import kubernetes_validate
except ImportError:  # a failure, not a skip: CI must validate the manifests
    kubernetes_validate = None

REPO = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((REPO / "deploy" / "kubernetes").glob("*.yaml"))
OLDEST = "1.30.0"


def documents():
    return [(p.name, doc) for p in MANIFESTS for doc in yaml.safe_load_all(p.read_text()) if doc]


def by_kind(kind):
    found = [doc for _, doc in documents() if doc["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def validator():
    if kubernetes_validate is None:
        pytest.fail("kubernetes-validate is not installed (.venv/bin/pip install kubernetes-validate==1.37.0)")
    return kubernetes_validate


@pytest.mark.parametrize("version", [OLDEST, "latest"])
def test_manifests_pass_the_kubernetes_schemas(version):
    kv = validator()
    version = kv.utils.latest_version() if version == "latest" else version
    docs = documents()
    assert {d["kind"] for _, d in docs} >= {"Deployment", "Service", "HorizontalPodAutoscaler", "PersistentVolumeClaim"}
    for _, doc in docs:
        kv.validate(doc, version, strict=True)  # raises on the first error, naming the field


def test_the_validator_rejects_what_it_should():
    """A misspelt field and a wrong type fail, so the test above can fail at all."""
    kv = validator()
    deployment = by_kind("Deployment")
    misspelt = copy.deepcopy(deployment)
    misspelt["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/health"
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "two"
    for bad in (misspelt, wrong_type):
        with pytest.raises(kv.ValidationError):
            kv.validate(bad, OLDEST, strict=True)


def serve_args():
    container = by_kind("Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[0] == "serve"
    flags = {}
    i = 1
    while i < len(args):
        assert args[i].startswith("-"), args[i]
        flags[args[i]] = args[i + 1]  # every flag the manifest passes takes a value
        i += 2
    return container, flags


def test_deployment_flags_exist(deskside_bin):
    _, flags = serve_args()
    help_text = subprocess.run([str(deskside_bin), "serve", "--help"], capture_output=True, text=True, timeout=30)
    words = set(help_text.stdout.replace(",", " ").split()) | set(help_text.stderr.replace(",", " ").split())
    assert set(flags) <= words, set(flags) - words


def test_deployment_fits_the_server():
    deployment = by_kind("Deployment")
    pod = deployment["spec"]["template"]
    container, flags = serve_args()
    port = int(flags["--port"])
    assert flags["--host"] == "0.0.0.0"
    assert [p["containerPort"] for p in container["ports"] if p["name"] == "http"] == [port]
    for probe in ("startupProbe", "readinessProbe"):  # 503 while loading and while draining
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/metrics"  # 200 while draining, unlike /health
    # SIGTERM comes after preStop; the drain then takes up to --shutdown-grace; SIGKILL must come later.
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + int(flags["--shutdown-grace"])
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == 1
    assert flags["--devices"] == "cuda0"
    store = {e["name"]: e["value"] for e in container["env"]}["DESKSIDE_MODELS"]
    assert [m["name"] for m in container["volumeMounts"] if m["mountPath"] == store] == ["models"]
    key_dir = str(pathlib.PurePosixPath(flags["--api-key-file"]).parent)
    assert [m["name"] for m in container["volumeMounts"] if m["mountPath"] == key_dir] == ["api-key"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"


def test_service_and_hpa_point_at_the_deployment():
    deployment, service, hpa = by_kind("Deployment"), by_kind("Service"), by_kind("HorizontalPodAutoscaler")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": deployment["metadata"]["name"]}
    claim = by_kind("PersistentVolumeClaim")["metadata"]["name"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["persistentVolumeClaim"]["claimName"] == claim


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hpa_metric_is_exported(deskside_bin, shared):
    """The HPA's metric is a gauge a running server's /metrics really has."""
    metric = by_kind("HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"]["metric"]["name"]
    port = free_port()
    proc = subprocess.Popen([str(deskside_bin), "serve", "-m", str(shared / "models" / "stories260K-q8_0.gguf"),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "deskside serve exited"
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "deskside serve did not answer /metrics"
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    assert f"# TYPE {metric} gauge" in text
    assert any(line.split(" ")[0] == metric for line in text.splitlines() if not line.startswith("#"))
