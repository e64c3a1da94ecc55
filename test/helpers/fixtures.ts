/** The shared fixture PodList (`../shared/fixtures/driver-pods.json` beside the repository). */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { DriverPod } from '../../src/kube/driver-pod.ts';

/** Absolute path of the fixture file. */
export const FIXTURE_PATH = fileURLToPath(
  new URL('../../../shared/fixtures/driver-pods.json', import.meta.url),
);

/**
 * A fixture pod as parsed JSON: the full pod (spec, managedFields, every container status…), typed by the
 * fields the cleaner reads (a {@link DriverPod}, timestamps as strings as on the wire) plus the annotations.
 */
export type FixturePod = DriverPod & {
  readonly metadata?: DriverPod['metadata'] & { readonly annotations?: Readonly<Record<string, string>> };
};

/** The fixture pods, with their `expected.cleaner/*` annotations. */
export function fixturePods(): FixturePod[] {
  return (JSON.parse(readFileSync(FIXTURE_PATH, 'utf8')) as { items: FixturePod[] }).items;
}

/** An expectation annotation of a fixture pod. */
export function expected(pod: FixturePod, key: string): string | undefined {
  return pod.metadata?.annotations?.[`expected.cleaner/${key}`];
}
