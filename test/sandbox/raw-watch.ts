/** A raw watch client for tests: reads newline-delimited JSON events from a sandbox watch URL. */

/** One decoded watch line. */
export interface RawEvent {
  type: string;
  object: {
    kind?: string;
    code?: number;
    reason?: string;
    metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  };
}

/** Opens `url` and collects events into `events` until `close()` or the stream ends (`ended`). */
export async function openRawWatch(url: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers, signal: controller.signal });
  const events: RawEvent[] = [];
  let ended = false;
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const pump = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let nl = buf.indexOf('\n');
        while (nl >= 0) {
          events.push(JSON.parse(buf.slice(0, nl)) as RawEvent);
          buf = buf.slice(nl + 1);
          nl = buf.indexOf('\n');
        }
      }
    } catch {
      // aborted or reset
    } finally {
      ended = true;
    }
  })();
  return {
    status: res.status,
    events,
    get ended() {
      return ended;
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
}
