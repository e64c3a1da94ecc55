/**
 * A real ZooKeeper for one test file: started before its tests (Debian's `zookeeper`, on free ports),
 * stopped after them.
 */
import { afterAll, beforeAll } from 'vitest';
import {
  type LocalZooKeeper,
  startZooKeeper,
  type ZooKeeperOptions,
} from '../../harness/sandbox/local-zookeeper.ts';

/**
 * Registers the file's `beforeAll`/`afterAll` for a ZooKeeper (`members`: 1, the default, a standalone
 * server; more, an ensemble). Call at the top level of a test file.
 * @returns the started ZooKeeper; throws when called before `beforeAll` ran.
 */
export function useZooKeeper(opts: ZooKeeperOptions = {}): () => LocalZooKeeper {
  let zk: LocalZooKeeper | undefined;
  beforeAll(async () => {
    zk = await startZooKeeper(opts);
  }, 90_000);
  afterAll(async () => {
    await zk?.stop();
  });
  return () => {
    if (!zk) throw new Error('ZooKeeper not started: call useZooKeeper() at the top level of the file');
    return zk;
  };
}
