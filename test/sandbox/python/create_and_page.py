"""Creates five pods, then lists them two at a time with limit/continue.

Prints {"created": [{name, uid, phase}], "pages": [[names]], "continues": [bool], "pageRvs": [rv]}.
"""

import sys

from common import core_api, emit, new_pod

kubeconfig, ns = sys.argv[1], sys.argv[2]
api = core_api(kubeconfig)
created = []
for i in range(5):
    pod = api.create_namespaced_pod(ns, new_pod(f"page-{i}", {"app": "paged"}))
    created.append({"name": pod.metadata.name, "uid": pod.metadata.uid, "phase": pod.status.phase})

pages, continues, page_rvs = [], [], []
token = None
while True:
    kwargs = {"limit": 2, "label_selector": "app=paged"}
    if token:
        kwargs["_continue"] = token
    page = api.list_namespaced_pod(ns, **kwargs)
    pages.append([p.metadata.name for p in page.items])
    page_rvs.append(page.metadata.resource_version)
    token = page.metadata._continue
    continues.append(bool(token))
    if not token:
        break
emit({"created": created, "pages": pages, "continues": continues, "pageRvs": page_rvs})
