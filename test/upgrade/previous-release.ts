/**
 * The previous release's replica, run from its own source next to this one: a rolling update has replicas of
 * both versions on one Redis and one etcd, so each must read what the other writes. Its source comes from this
 * repository's history (`git archive` of the release commit, CHANGELOG.md), run with this tree's
 * node_modules: the release's dependencies are the ones pinned then, which this tree still satisfies (the
 * test fails, not skips, should they drift apart).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The release a rolling update comes from: its version and commit (CHANGELOG.md). */
export const PREVIOUS_RELEASE = {
  version: '0.1.0',
  commit: '80c170eee2eea82d5e5bbacbceffa6c11be88c9b',
} as const;

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Extracts the previous release's `src/`, `workers/` and `package.json` into a new temporary directory
 * whose `node_modules` links to this tree's.
 * @returns the path of its CLI entry point (`src/cli.ts`), for `spawnReplica({ cliPath })`.
 * @throws Error when git or the release commit is not available (a shallow clone): the message says so.
 */
export function extractPreviousRelease(): string {
  const { commit, version } = PREVIOUS_RELEASE;
  try {
    execFileSync('git', ['-C', repoRoot, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
  } catch {
    throw new Error(
      `release ${version} (${commit}) is not in this clone's history: fetch it (git fetch --unshallow)`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), `sdc-release-${version}-`));
  const tar = execFileSync('git', ['-C', repoRoot, 'archive', commit, 'src', 'workers', 'package.json']);
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  return join(dir, 'src', 'cli.ts');
}
