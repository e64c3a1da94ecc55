"""DELETE with a uid precondition: a mismatch is a 409 Conflict Status, the matching uid deletes.

Prints {"mismatch": {"status", "body"}, "matched": {"uid", "deletionTimestamp"}, "afterwards": status of a GET}.
"""

import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException

from common import core_api, emit, new_pod

kubeconfig, ns = sys.argv[1], sys.argv[2]
api = core_api(kubeconfig)
pod = api.create_namespaced_pod(ns, new_pod("guarded"))
mismatch = None
try:
    api.delete_namespaced_pod(
        "guarded", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-its-uid"))
    )
except ApiException as e:
    mismatch = {"status": e.status, "body": json.loads(e.body)}
deleted = api.delete_namespaced_pod(
    "guarded", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pod.metadata.uid))
)
afterwards = None
try:
    api.read_namespaced_pod("guarded", ns)
except ApiException as e:
    afterwards = e.status
emit(
    {
        "mismatch": mismatch,
        "matched": {"uid": pod.metadata.uid, "deletionTimestamp": str(deleted.metadata.deletion_timestamp)},
        "afterwards": afterwards,
    }
)
