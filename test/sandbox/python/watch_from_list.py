"""Lists, changes a pod, then watches from the list's resourceVersion and deletes a pod once the watch runs.

The watch must bring the change made after the list (MODIFIED, from the server's history), the live
deletion (MODIFIED with deletionTimestamp, then DELETED), and nothing of the pods as listed (no replay).
Prints {"listRv": rv, "listed": [names], "events": ["TYPE name"], "watchArg": query of the watch}.
"""

import sys

from kubernetes import watch

from common import core_api, emit

kubeconfig, ns = sys.argv[1], sys.argv[2]
api = core_api(kubeconfig)
listed = api.list_namespaced_pod(ns)
rv = listed.metadata.resource_version
# The client sends a JSON patch for a list body (its Content-Type choice for PATCH).
api.patch_namespaced_pod(
    "keep", ns, [{"op": "add", "path": "/metadata/labels", "value": {"step": "patched"}}]
)

events = []
w = watch.Watch()
for ev in w.stream(api.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=30):
    name = ev["object"].metadata.name
    events.append(f"{ev['type']} {name}")
    if ev["type"] == "MODIFIED" and name == "keep":
        api.delete_namespaced_pod("gone", ns)
    if ev["type"] == "DELETED":
        w.stop()
emit({"listRv": rv, "listed": [p.metadata.name for p in listed.items], "events": events})
