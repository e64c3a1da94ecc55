/**
 * The few calls of the `zookeeper` npm package (a native binding of ZooKeeper's reference C client) this
 * project uses, typed from what the binding does (its bundled declarations do not match it: session ids and
 * `ephemeralOwner` are hex strings). Every call returns a promise that rejects with `Error("<rc> <name>")`,
 * `rc` one of ZooKeeper's error codes ({@link ZK_ERR}).
 */
import ZooKeeperModule from 'zookeeper';

/** A znode's stat, as the binding gives it. */
export interface ZkStat {
  /** The session id owning this ephemeral node (hex), `"0"` for a persistent node. */
  readonly ephemeralOwner: string;
  readonly version: number;
  /** The ACL's version: 0 until `set_acl` changes it. */
  readonly aversion: number;
}

/** One ACL entry. */
export interface ZkAcl {
  perms: number;
  scheme: string;
  auth: string;
}

/** The client handle of one ZooKeeper session. */
export interface ZkHandle {
  /** The session id (hex) once connected. */
  readonly client_id: string;
  /** The session timeout the server granted, ms, once connected (the C client's `zoo_recv_timeout`). */
  readonly timeout: number;
  init(config: Record<string, unknown>): void;
  close(): void;
  on(event: 'connect' | 'connecting', cb: () => void): void;
  on(event: 'close', cb: (handle: unknown, code: number) => void): void;
  /** Returns the C client's code at once (ZINVALIDSTATE -9 before `init`); `cb` gets the server's answer. */
  add_auth(scheme: string, auth: string, cb: (rc: number, error: string) => void): number;
  create(path: string, data: string, flags: number): Promise<string>;
  exists(path: string, watch: boolean): Promise<ZkStat | null>;
  w_exists(path: string, watch: (type: number, state: number, path: string) => void): Promise<ZkStat | null>;
  get(path: string, watch: boolean): Promise<[ZkStat, Buffer | string]>;
  w_get(
    path: string,
    watch: (type: number, state: number, path: string) => void,
  ): Promise<[ZkStat, Buffer | string]>;
  get_children(path: string, watch: boolean): Promise<string[]>;
  w_get_children(path: string, watch: (type: number, state: number, path: string) => void): Promise<string[]>;
  set(path: string, data: string, version: number): Promise<ZkStat>;
  /**
   * Resolves once the server this handle talks to has applied every write the quorum committed before the
   * sync reached the leader (ZooKeeper's `sync`): a read sent after it on the same session (answered in
   * order) is then as fresh as the leader's. A follower cut off from the leader cannot answer it.
   */
  sync(path: string): Promise<unknown>;
  delete_(path: string, version: number): Promise<void>;
  set_acl(path: string, version: number, acl: readonly ZkAcl[]): Promise<void>;
  /** The node's ACL (`scheme: 'digest'`, `auth: "user:base64(sha1(user:password))"`) and its stat. */
  get_acl(path: string): Promise<[ZkAcl[], ZkStat]>;
}

interface ZkConstructor {
  new (config: Record<string, unknown>): ZkHandle;
  readonly constants: Record<string, number>;
}

const ZooKeeper = ZooKeeperModule as unknown as ZkConstructor;

/** ZooKeeper's create modes (the binding's constants). */
export const ZK_MODE = {
  persistent: ZooKeeper.constants.ZOO_PERSISTENT ?? 0,
  ephemeral: ZooKeeper.constants.ZOO_EPHEMERAL ?? 1,
  ephemeralSequential: ZooKeeper.constants.ZOO_EPHEMERAL_SEQUENTIAL ?? 3,
  container: ZooKeeper.constants.ZOO_CONTAINER ?? 4,
} as const;

/** The error codes this project tells apart. */
export const ZK_ERR = { noNode: -101, noAuth: -102, nodeExists: -110, notEmpty: -111 } as const;

/** The session state code the binding's `close` event carries when the server expired the session. */
export const ZK_EXPIRED_SESSION_STATE = -112;

/** ZooKeeper's `CREATOR_ALL_ACL`: every right, to the identities the session authenticated as. */
export const CREATOR_ALL_ACL: readonly ZkAcl[] = [{ perms: 31, scheme: 'auth', auth: '' }];

/** ZooKeeper's `OPEN_ACL_UNSAFE`: every right, to anyone. */
export const OPEN_ACL_UNSAFE: readonly ZkAcl[] = [{ perms: 31, scheme: 'world', auth: 'anyone' }];

/** The call our patch adds to the binding (patches/zookeeper+7.3.0.patch); its ACL entries name `perm`. */
interface NativeWithCreateAcl {
  a_create_acl(
    path: string,
    data: string,
    mode: number,
    acl: { perm: number; scheme: string; auth: string }[],
    cb: (rc: number, error: string, created: string) => void,
  ): number;
}

/**
 * Creates `path` with `acl` in the same request, so that the node is never open in between (the published
 * binding's `create` always uses `OPEN_ACL_UNSAFE`). `CREATOR_ALL_ACL` needs the session authenticated.
 * @param mode one of {@link ZK_MODE}
 * @returns the path created (with its sequence suffix for a sequential mode).
 * @throws `Error("<rc> <name>")`: the server's answer (-110 node exists, -114 invalid ACL, ...) or the C
 *   client's refusal to send (-9 invalid state).
 */
export function createNode(
  h: ZkHandle,
  path: string,
  data: string,
  mode: number,
  acl: readonly ZkAcl[],
): Promise<string> {
  const native = (h as unknown as { native: NativeWithCreateAcl }).native;
  return new Promise<string>((resolve, reject) => {
    const rc = native.a_create_acl(
      path,
      data,
      mode,
      acl.map((a) => ({ perm: a.perms, scheme: a.scheme, auth: a.auth })),
      (code, error, created) => (code === 0 ? resolve(created) : reject(new Error(`${code} ${error}`))),
    );
    if (rc !== 0) reject(new Error(`${rc} cannot send the create of ${path}`));
  });
}

/** The ZooKeeper error code of a rejected call (`Error("<rc> <name>")`), or undefined. */
export function zkCode(err: unknown): number | undefined {
  const m = /^(-?\d+) /.exec((err as Error)?.message ?? '');
  return m ? Number(m[1]) : undefined;
}

/**
 * Creates a handle (not connected: `init` connects). The C client's own log goes to stderr, so it is turned
 * off (`debug_level` 0): the session logs its state changes itself. The binding closes a handle as if its
 * session had expired once the C client's processing has returned "nothing" 10 times in a row (its
 * `response_counter_limit`), which happens while it tries a server that was just killed: sessions the server
 * still held were ended on the client, and a new handle could not get past a dead server in the list. That
 * limit is lifted here: a session is lost when the server says it expired, or when the session
 * (src/leadership/zookeeper/session.ts) has been disconnected for a whole session timeout.
 * @param connect `host:port,...[/chroot]`
 * @param timeoutMs the session timeout asked for, ms (the server bounds it)
 */
export function createZkHandle(connect: string, timeoutMs: number): ZkHandle {
  return new ZooKeeper({
    connect,
    timeout: timeoutMs,
    debug_level: 0,
    host_order_deterministic: false,
    response_counter_limit: 2 ** 31 - 1,
  });
}

/**
 * Adds digest authentication (`user:password`) to a handle. Call it after `init`: before, the C handle does
 * not exist and the binding drops the call. The C client sends it before any request of the session, and
 * again on every reconnection. ZooKeeper accepts any digest (a wrong password is a different identity: the
 * nodes then answer ZNOAUTH).
 * @returns resolves once the server accepted it; rejects with `Error("<rc> <name>")` otherwise.
 */
export function addDigestAuth(h: ZkHandle, digest: string): Promise<void> {
  const added = new Promise<void>((resolve, reject) => {
    const rc = h.add_auth('digest', digest, (code, error) =>
      code === 0 ? resolve() : reject(new Error(`${code} ${error}`)),
    );
    if (rc !== 0) reject(new Error(`${rc} cannot add digest authentication`));
  });
  added.catch(() => undefined); // awaited by whoever needs it
  return added;
}

/**
 * The stat of `path`, or null when it does not exist (the binding rejects with ZNONODE where the C client
 * answers "no node").
 * @param watch called once when the node is created, changed or deleted (the watch is set either way).
 * @throws the call's error otherwise (connection loss, session expired).
 */
export async function statOf(
  h: ZkHandle,
  path: string,
  watch?: (type: number, state: number, path: string) => void,
): Promise<ZkStat | null> {
  try {
    return await (watch ? h.w_exists(path, watch) : h.exists(path, false));
  } catch (err) {
    if (zkCode(err) === ZK_ERR.noNode) return null;
    throw err;
  }
}
