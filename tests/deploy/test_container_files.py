"""The container image and the Kubernetes manifests (issue 21): there is no container engine
here, so the Dockerfile is linted (hadolint, from the package index), the manifests are validated
against Kubernetes' own schemas offline (kubernetes-validate), and what a cluster operator relies
on is checked in them. The image's build steps run in `.ci/run` (`deploy/image-build.sh`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..conftest import IN_CI

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        if IN_CI:
            pytest.fail(f"{name} is not installed and CI is set (it is in the test extras)")
        pytest.skip(f"{name} is not installed")
    return found


def _documents() -> list[dict[str, Any]]:
    return [
        doc
        for path in MANIFESTS
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def test_the_dockerfile_passes_hadolint() -> None:
    done = subprocess.run(
        [_tool("hadolint"), "--no-color", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_runs_the_cli_as_a_non_root_user_on_a_pinned_base() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert base is not None and re.fullmatch(r"python:3\.\d+\.\d+-slim-\w+", base.group(1))
    assert re.search(r"^USER 10001", dockerfile, re.M)
    assert 'ENTRYPOINT ["handback"]' in dockerfile
    assert "image-build.sh" in dockerfile and "image-build.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_manifests_validate_against_the_kubernetes_schemas() -> None:
    checked = [path for path in MANIFESTS if path.name != "kustomization.yaml"]
    done = subprocess.run(
        [_tool("kubernetes-validate"), "--strict", "--quiet", *map(str, checked)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_web_and_worker_have_probes_budgets_resources_and_secrets() -> None:
    docs = _documents()
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    assert {
        ("Deployment", "handback-web"),
        ("Deployment", "handback-worker"),
        ("PodDisruptionBudget", "handback-web"),
        ("PodDisruptionBudget", "handback-worker"),
        ("Service", "handback-web"),
        ("Secret", "handback"),
    } <= kinds
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        pod = doc["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        role = doc["metadata"]["name"].removeprefix("handback-")
        assert container["args"][-2:] == ["--role", role]
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"]["path"] == "/healthz"
        assert container["resources"]["requests"] and container["resources"]["limits"]
        assert {"secretRef": {"name": "handback"}} in container["envFrom"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        # Longer than the bot's shutdown grace (30 s), so work in flight can go back to the inbox.
        assert pod["terminationGracePeriodSeconds"] > 30
