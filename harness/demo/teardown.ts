/**
 * Everything the demo started, in one stack, so that it is all stopped on every way out: normal end,
 * an error, Ctrl-C (SIGINT) or SIGTERM. Steps run last-in first-out (replicas before the API servers
 * and Redis/etcd they use), each at most once, and one failing step does not stop the others.
 */

/** A stack of cleanup steps. */
export class Teardown {
  readonly #steps: { name: string; run: () => Promise<void> }[] = [];
  #all: Promise<void> | undefined;

  /**
   * Registers a step; returns a function that runs it now (and removes it from the stack), for
   * resources that end before the demo does. Both ways run the step once.
   */
  add(name: string, fn: () => void | Promise<void>): () => Promise<void> {
    let once: Promise<void> | undefined;
    const step = {
      name,
      run: () => {
        once ??= Promise.resolve()
          .then(fn)
          .catch((err: unknown) => {
            process.stderr.write(`demo: stopping ${name} failed: ${(err as Error).message}\n`);
          });
        return once;
      },
    };
    this.#steps.push(step);
    return () => {
      const i = this.#steps.indexOf(step);
      if (i >= 0) this.#steps.splice(i, 1);
      return step.run();
    };
  }

  /** Runs every remaining step, newest first. Idempotent: later calls wait for the first. */
  run(): Promise<void> {
    this.#all ??= (async () => {
      while (this.#steps.length > 0) await this.#steps.pop()?.run();
    })();
    return this.#all;
  }
}
