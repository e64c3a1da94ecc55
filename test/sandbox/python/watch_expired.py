"""Lists, waits for a line on stdin (the test compacts the history meanwhile), then watches from the list's
resourceVersion without a timeout: the client retries a 410 once, then raises ApiException(410).

Prints {"listRv": rv}, then {"status": code, "reason": text} (or {"events": [...]} if no error came).
"""

import sys

from kubernetes import watch
from kubernetes.client.rest import ApiException

from common import core_api, emit

kubeconfig, ns = sys.argv[1], sys.argv[2]
api = core_api(kubeconfig)
rv = api.list_namespaced_pod(ns).metadata.resource_version
emit({"listRv": rv})
sys.stdin.readline()
events = []
try:
    for ev in watch.Watch().stream(api.list_namespaced_pod, ns, resource_version=rv):
        events.append(f"{ev['type']} {ev['object'].metadata.name}")
except ApiException as e:
    emit({"status": e.status, "reason": e.reason})
    sys.exit(0)
emit({"events": events})
