/**
 * The fixture PodLists: the shared one (`../shared/fixtures/driver-pods.json` beside the repository) and the
 * repository's own cases of Kyuubi's state rule (`test/fixtures/kyuubi-state-pods.json`, described in
 * test/fixtures/README.md). Both are realistic pods with their expected answers in `expected.cleaner/*`
 * annotations.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { DriverPod } from '../../src/kube/driver-pod.ts';

/** Absolute path of the shared fixture file. */
export const FIXTURE_PATH = fileURLToPath(
  new URL('../../../shared/fixtures/driver-pods.json', import.meta.url),
);

/** Absolute path of the repository's fixture file of Kyuubi's state cases. */
export const KYUUBI_STATE_FIXTURE_PATH = fileURLToPath(
  new URL('../fixtures/kyuubi-state-pods.json', import.meta.url),
);

/**
 * A fixture pod as parsed JSON: the full pod (spec, managedFields, every container status…), typed by the
 * fields the cleaner reads (a {@link DriverPod}, timestamps as strings as on the wire) plus the annotations.
 */
export type FixturePod = DriverPod & {
  readonly metadata?: DriverPod['metadata'] & { readonly annotations?: Readonly<Record<string, string>> };
};

const read = (path: string) => (JSON.parse(readFileSync(path, 'utf8')) as { items: FixturePod[] }).items;

/** The shared fixture pods, with their `expected.cleaner/*` annotations. */
export function fixturePods(): FixturePod[] {
  return read(FIXTURE_PATH);
}

/** The repository's fixture pods of Kyuubi's state rule (sidecars, renamed container, restarts, evictions, OOM). */
export function kyuubiStatePods(): FixturePod[] {
  return read(KYUUBI_STATE_FIXTURE_PATH);
}

/** Every fixture pod: the shared ones, then the repository's. */
export function allFixturePods(): FixturePod[] {
  return [...fixturePods(), ...kyuubiStatePods()];
}

/** An expectation annotation of a fixture pod. */
export function expected(pod: FixturePod, key: string): string | undefined {
  return pod.metadata?.annotations?.[`expected.cleaner/${key}`];
}
