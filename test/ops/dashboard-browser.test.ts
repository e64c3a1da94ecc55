/**
 * The Bull dashboard in a real headless Chromium (Debian's, driven by playwright-core): every target's
 * queue is listed, and a completed cleanup job shows its outcome. Screenshots go to test-artifacts/.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../../src/queue/job-identity.ts';
import { waitFor } from '../helpers/wait.ts';
import { createTerminatedDriver, type OpsEnv, type OpsReplica, startOpsEnv } from './ops-env.ts';
import { ensureTool } from './test-tools.ts';

const ARTIFACTS = 'test-artifacts';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const USER = 'operator';
const PASSWORD = 'dashboard-pass';

let chromiumPath: string | undefined;
let env: OpsEnv;
let r: OpsReplica;
let browser: BrowserContext | undefined;
let profile: string | undefined;
const uids: Record<string, string> = {};

beforeAll(async () => {
  chromiumPath = ensureTool('chromium');
  if (!chromiumPath) return;
  env = await startOpsEnv(['alpha', 'beta']);
  r = await env.startReplica('ui-1', {
    SDC_TARGETS: 'alpha:ui-a,beta:ui-b',
    SDC_QUEUE_PREFIX: 'ui',
    SDC_DASHBOARD_USER: USER,
    SDC_DASHBOARD_PASSWORD: PASSWORD,
  });
  for (const [ctx, ns] of [
    ['alpha', 'ui-a'],
    ['beta', 'ui-b'],
  ] as const) {
    const server = env.servers[ctx];
    if (!server) throw new Error(`no sandbox server ${ctx}`);
    const pod = createTerminatedDriver(server, ns, `${ctx}-report`);
    uids[ns] = pod.metadata?.uid ?? '';
    await waitFor(`${ns} driver deleted`, () => !server.pods.get(ns, pod.metadata?.name ?? ''), 30_000);
  }
  profile = mkdtempSync(join(tmpdir(), 'sdc-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    args: CHROMIUM_ARGS,
    headless: true,
    httpCredentials: { username: USER, password: PASSWORD },
    viewport: { width: 1400, height: 900 },
  });
  mkdirSync(ARTIFACTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await env?.stop();
});

describe('Bull dashboard in Chromium', () => {
  it('lists every target queue and shows a completed job with its outcome', async (ctx) => {
    if (!chromiumPath || !browser) {
      ctx.skip('chromium is not installed and could not be (apt-get install chromium)');
      return;
    }
    const page = await browser.newPage();
    await page.goto(`${r.http.url}/ui`);
    for (const label of ['alpha:ui-a', 'beta:ui-b']) {
      await page.getByText(label, { exact: true }).first().waitFor({ timeout: 20_000 });
    }
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-overview.png'), fullPage: true });

    const queue = encodeURIComponent(
      queueName({ cluster: env.servers.alpha?.clusterName ?? '', namespace: 'ui-a' }),
    );
    await page.goto(`${r.http.url}/ui/queue/${queue}?status=completed`);
    const uid = uids['ui-a'] ?? '';
    await page.getByText(uid).first().waitFor({ timeout: 20_000 });
    await page.getByText('"accepted"').first().waitFor({ timeout: 20_000 });
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-completed-job.png'), fullPage: true });
    const body = (await page.locator('body').textContent()) ?? '';
    expect(body).toContain(uid);
    expect(body).toMatch(/returnValue:\s*\{\s*outcome:\s*"accepted"/);
    await page.close();
  }, 90_000);
});
