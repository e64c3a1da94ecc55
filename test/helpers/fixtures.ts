/** The shared fixture PodList (`../shared/fixtures/driver-pods.json` beside the repository). */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';

/** Absolute path of the fixture file. */
export const FIXTURE_PATH = fileURLToPath(
  new URL('../../../shared/fixtures/driver-pods.json', import.meta.url),
);

/** The fixture pods, with their `expected.cleaner/*` annotations. */
export function fixturePods(): V1Pod[] {
  return (JSON.parse(readFileSync(FIXTURE_PATH, 'utf8')) as { items: V1Pod[] }).items;
}

/** An expectation annotation of a fixture pod. */
export function expected(pod: V1Pod, key: string): string | undefined {
  return pod.metadata?.annotations?.[`expected.cleaner/${key}`];
}
