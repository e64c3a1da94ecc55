/**
 * bull-board's libraries, in a module of their own that src/http/dashboard.ts loads with `import()` on the first
 * request under `/ui`, so that nothing of them is loaded before. They are CommonJS packages: imported statically
 * here, their named exports resolve the same way under Node and in the image's esbuild bundle, where an `import()`
 * of a CommonJS package itself yields only `default` (scripts/image/bundle.ts refuses that shape).
 */
export { createBullBoard } from '@bull-board/api';
export { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
export { FastifyAdapter } from '@bull-board/fastify';
