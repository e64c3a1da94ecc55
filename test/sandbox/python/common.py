"""Shared by the conformance scripts: a CoreV1Api from the sandbox's kubeconfig, and JSON output.

Each script is run by test/sandbox/python-conformance.test.ts as
``/usr/bin/python3 SCRIPT KUBECONFIG NAMESPACE`` and prints one JSON object per line on stdout.
"""

import json
import sys

from kubernetes import client, config


def core_api(kubeconfig: str) -> client.CoreV1Api:
    """A CoreV1Api configured from the kubeconfig (HTTPS with the sandbox's CA, bearer token)."""
    config.load_kube_config(config_file=kubeconfig)
    return client.CoreV1Api()


def new_pod(name: str, labels=None) -> client.V1Pod:
    """A minimal pod: one busybox container."""
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )


def emit(obj) -> None:
    """Writes one JSON line and flushes (the test may be waiting for it)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
