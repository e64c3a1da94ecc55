#!/usr/bin/env bash
# Makes a release: one commit that moves every place the version is written to VERSION and dates its
# CHANGELOG entry, and the annotated tag vVERSION on it.
#
#   bash scripts/release.sh VERSION [--date YYYY-MM-DD]      (the date defaults to today, UTC)
#
# Refuses (exit 1, nothing changed) a VERSION that is not a semantic version, a working tree with changes
# (staged, unstaged or untracked), an existing tag vVERSION, and a CHANGELOG.md without the entry
# `## VERSION (unreleased)`: write the entry first (what changed, and what operators must do), commit, then run
# this. What moves (scripts/release/versions.ts): package.json and package-lock.json (`npm version`, no network),
# the image tag in the README, CONTRIBUTING, docs/, the Dockerfile and the manifests under infra/ (`newTag`),
# the remote base's `?ref=vVERSION`, and the CHANGELOG heading `## VERSION (YYYY-MM-DD)`. test/unit/version.test.ts
# checks the same agreement on every commit. Pushing is left to you (the command is printed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

version=
date=$(date -u +%F)
while (($#)); do
  case $1 in
    --date) date=${2:?--date needs YYYY-MM-DD}; shift 2 ;;
    -h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "release: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) version=$1; shift ;;
  esac
done
refuse() { echo "release: $*" >&2; exit 1; }

[[ -n $version ]] || { echo "usage: bash scripts/release.sh VERSION [--date YYYY-MM-DD]" >&2; exit 2; }
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || refuse "$version is not a semantic version (X.Y.Z)"
[[ $date =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || refuse "--date $date is not YYYY-MM-DD"
[[ -z $(git status --porcelain) ]] ||
  refuse "the working tree has changes: commit or stash them first (git status)"
[[ -z $(git tag --list "v$version") ]] || refuse "the tag v$version exists already"
grep -qxF "## $version (unreleased)" CHANGELOG.md ||
  refuse "CHANGELOG.md has no entry \"## $version (unreleased)\": write it (what changed, what operators must do), commit, run again"

npm version "$version" --no-git-tag-version --allow-same-version >/dev/null
node scripts/release/move-version.ts "$version" "$date"
git add -A
git commit --quiet -m "Release $version"
git tag -a "v$version" -m "spark-driver-cleaner $version"
echo "release: committed and tagged v$version ($(git rev-parse --short HEAD)). Then:"
echo "  git push origin HEAD v$version"
echo "  bash scripts/build-image.sh --tag registry.example.com/spark-driver-cleaner:$version"
