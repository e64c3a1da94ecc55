/**
 * Debian tools the operations tests drive (promtool, chromium): found on PATH, or installed once by
 * scripts/install-test-tools.sh (apt-get; fast when present). Missing after that → `undefined`, and the
 * test skips with the reason printed.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../scripts/install-test-tools.sh', import.meta.url));
let installed = false;

function which(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const path = r.stdout.trim();
  return r.status === 0 && path ? path : undefined;
}

/** The path of a tool (`promtool`, `chromium`), installing the test tools when it is missing. */
export function ensureTool(name: 'promtool' | 'chromium'): string | undefined {
  let path = which(name);
  if (!path && !installed) {
    installed = true;
    const r = spawnSync('bash', [SCRIPT], { encoding: 'utf8', timeout: 600_000 });
    if (r.stderr.trim()) process.stderr.write(r.stderr);
    path = which(name);
  }
  if (!path)
    process.stderr.write(`${name} is not available and could not be installed: its checks are skipped\n`);
  return path;
}
